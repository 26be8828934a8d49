"""Reap a job's leftovers: end the processes it left running after its main process or launcher went.

    plan = service.plan(job_id, "reap")     # ActionService delegates the planning here
    outcome = await service.execute(plan)   # the kill's probe op on exactly those processes

The targets are the job's leftovers as the engine follows them (jobs/leftovers.py), each checked against
the host's latest frame (same pid, same start ticks) when planned and pinned again by the probe (pidfd,
start time) when signalled: a pid that now names another process is refused, never signalled.
"""

from __future__ import annotations

import shlex
import time

from ..jobs.job_actions import REAP
from ..views import JobView, LeftoverProcess
from .job_tree import JobTree
from .plan import ActionPlan, PlanTarget


def _command_text(p: LeftoverProcess) -> str:
    text = shlex.join(p.cmdline) if p.cmdline else f"[{p.name}]"
    return text if len(text) <= 160 else text[:157] + "..."


def reap_command(host: str, targets: tuple[PlanTarget, ...], grace_s: float) -> str:
    pids = " ".join(str(t.pid) for t in targets)
    return (f"on {host}: SIGTERM to {pids} (each pinned by pid and start time, checked again on the host), "
            f"wait up to {grace_s:g} s, then SIGKILL what is left")


def plan_reap(service, view: JobView, spec, refused) -> ActionPlan:
    """The plan that ends `view`'s leftovers and nothing else; `refused(reason)` is raised otherwise."""
    left = view.leftovers
    if left is None or not left.processes:
        raise refused(f"job {view.name} on {view.host} has no leftovers: nothing to reap")
    rec = service.monitor.store.hosts.get(view.host)
    if rec is None or rec.state != "connected":
        state = rec.state if rec is not None else "unknown"
        raise refused(f"host {view.host} is not connected ({state}): nothing can be sent to it")
    sample = service.monitor.last_samples.get(view.host)
    procs = sample.procs if sample is not None else {}
    now_there = [p for p in left.processes
                 if p.pid in procs and procs[p.pid].start_ticks == p.start_ticks and procs[p.pid].state != "Z"]
    if not now_there:
        raise refused(f"the leftovers of {view.name} on {view.host} are gone from the latest sample")
    targets = tuple(PlanTarget(p.pid, p.start_ticks, p.user or "?", "leftover", _command_text(p)) for p in now_there)
    warnings = []
    if view.alive:
        warnings.append("only the leftovers listed are signalled: the job's other processes are not touched")
    held = sum(p.gpu_memory_bytes for p in now_there)
    if held:
        gpus = sorted({g for p in now_there for g in p.gpus})
        warnings.append(f"they hold {held / 2**30:.1f} GiB on GPU {', '.join(map(str, gpus))}")
    tree = JobTree(view.host, view.name, (), leftovers=tuple(now_there))
    return ActionPlan(action=REAP, title=spec.title, host=view.host, job_id=view.id, job=view.name,
                      targets=targets, command=reap_command(view.host, targets, service.settings.kill_grace_s),
                      warnings=tuple(warnings), confirm=spec.confirm, created_at=time.time(), tree=tree)
