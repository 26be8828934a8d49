"""`gpuwatch kill|restart|dump|reap HOST JOB`: the headless side of the actions, through ActionService.

Exit codes: 0 done, 1 the action failed (or only partly worked), 2 refused or a usage mistake,
3 the host is not connected.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TextIO

from ..actions.audit import AuditError, AuditLog, current_user
from ..actions.dump import DumpReport
from ..actions.registry import ActionSpec
from ..jobs.job_actions import REAP
from ..actions.service import ActionRefused, ActionService
from ..actions.stack_analysis import frames_text
from ..monitor import Monitor

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_NOT_CONNECTED = 3
JOB_WAIT_S = 10.0  # how long to wait for the job to show up after the host is connected
CAPTURE_WAIT_S = 10.0  # restart: how long to wait for the job's facts to be read


def refuse(audit: AuditLog, host: str, job: str, action: str, reason: str, err: TextIO) -> int:
    """Audit a refusal and say it; 2."""
    try:
        audit.record(host=host, job=job, action=action, pids=(), command="", result=f"refused: {reason}")
    except AuditError as exc:
        reason = f"{reason} (and {exc})"
    print(f"gpuwatch: {reason}", file=err)
    return EXIT_REFUSED


def confirm(prompt: str, stdin: TextIO, out: TextIO) -> bool:
    out.write(prompt)
    out.flush()
    answer = stdin.readline()
    return answer.strip().lower() in ("y", "yes")


async def run_action(config, spec: ActionSpec, host: str, job: str, *, yes: bool, readonly: bool,
                     as_json: bool, native: bool | None = None, audit: AuditLog | None = None,
                     stdin: TextIO | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdin, out, err = stdin or sys.stdin, out or sys.stdout, err or sys.stderr
    audit = audit or AuditLog()
    if readonly:
        return refuse(audit, host, job, spec.name, f"read-only mode: {spec.cli_verb} is disabled "
                      "(--readonly or settings.readonly)", err)
    slurm = None
    if config.slurm is not None:
        # As `status` and the dashboard: the queue read first, so a running job's nodes are hosts here and
        # the kill of a Slurm job is scancel (it frees the allocation and ends every node's ranks).
        from .slurm_status import read_slurm  # noqa: PLC0415 - the Slurm wing only when [slurm] is set

        config, slurm = await read_slurm(config)
    names = [h.name for h in config.hosts]
    if host not in names:
        print(f"gpuwatch: no host {host!r} in the config; hosts: {', '.join(names)}", file=err)
        return EXIT_REFUSED
    if not yes and not stdin.isatty():
        return refuse(audit, host, job, spec.name, "not asking without a terminal: pass --yes to act", err)
    monitor = Monitor(config)
    service = ActionService(monitor, config.actions, audit, readonly, current_user(), slurm=slurm)
    await monitor.start()
    try:
        await monitor.wait_settled(config.settings.connect_timeout + 5)
        rec = monitor.store.hosts[host]
        if rec.state != "connected":
            print(f"gpuwatch: host {host} is not connected ({rec.state}" + (f": {rec.error}" if rec.error else "")
                  + ")", file=err)
            return EXIT_NOT_CONNECTED
        limit = max(JOB_WAIT_S, 4 * config.settings.sample_interval)
        if spec.name == REAP:
            view = await _wait_leftovers(monitor, host, job, limit)
        else:
            view = await _wait_job(monitor, service, host, job, limit)
        if view is None:
            if spec.name == REAP:
                there = sorted({v.name for v in monitor.tracker.views() if v.host == host and v.leftovers})
                return refuse(audit, host, job, spec.name, f"no job {job} with leftovers on {host}; jobs with "
                              f"leftovers there: {', '.join(there) or 'none'}", err)
            there = sorted({v.name for v in monitor.tracker.views() if v.host == host and v.alive})
            return refuse(audit, host, job, spec.name,
                          f"no job {job} on {host}; jobs there: {', '.join(there) or 'none'}", err)
        try:
            plan = await _plan(service, view.id, spec.name, native)
        except ActionRefused as exc:  # already audited by the service
            print(f"gpuwatch: {exc.reason}", file=err)
            return EXIT_REFUSED
        print(plan.text(), file=out)
        if not yes and not confirm("Proceed? [y/N] ", stdin, out):
            return refuse(audit, host, plan.job, spec.name, "not confirmed: nothing done", err)
        try:
            outcome = await service.execute(plan)
        except ActionRefused as exc:
            print(f"gpuwatch: {exc.reason}", file=err)
            return EXIT_REFUSED
        if as_json:
            print(json.dumps(outcome.to_json(), default=str), file=out)
        else:
            if isinstance(outcome.report, DumpReport):
                print("\n".join(stacks_text(outcome.report)), file=out)
            print("\n".join(outcome.summary()), file=out)
        return EXIT_DONE if outcome.ok else EXIT_FAILED
    finally:
        await monitor.stop()
        if slurm is not None:
            await slurm.client.runner.close()


async def _wait_job(monitor, service: ActionService, host: str, job: str, limit: float):
    deadline = time.monotonic() + limit
    while True:
        view = service.find_job(host, job)
        if view is not None and view.alive and monitor.tracker.ready(host):
            return view
        if time.monotonic() > deadline:
            return view if view is not None and view.alive else None
        await asyncio.sleep(0.1)


async def _wait_leftovers(monitor, host: str, job: str, limit: float):
    """The job (by name or id) on `host` that has leftovers, once the engine has followed them (a job found
    orphaned needs a frame or two); None when there is none within `limit`."""
    deadline = time.monotonic() + limit
    while True:
        views = [v for v in monitor.tracker.views() if v.host == host and job in (v.id, v.name)]
        found = next((v for v in views if v.leftovers is not None), None)
        if found is not None and monitor.tracker.ready(host):
            return found
        if time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def _plan(service: ActionService, job_id: str, action: str, native: bool | None):
    """The plan; a restart first waits (bounded) for the job's facts, read at discovery, to arrive."""
    if action == "restart_unbuffered":
        deadline = time.monotonic() + CAPTURE_WAIT_S
        while not service.facts_ready(job_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    return service.plan(job_id, action, native=native)


def stacks_text(report: DumpReport) -> list[str]:
    """Each rank's threads and frames, the suspect named."""
    lines = []
    suspects = {s.pid for s in report.analysis.suspects}
    for p in report.processes:
        verdict = report.analysis.of(p.pid)
        mark = "  <- SUSPECT" if p.pid in suspects else ""
        lines.append(f"== {p.label}{mark}" + (f": {verdict.why}" if verdict else ""))
        if not p.ok:
            lines.append(f"   {p.message}")
            continue
        for t in p.threads:
            lines.append(f"   thread {t.name or t.thread_id} ({'active' if t.active else 'idle'})")
            lines += ["     " + line for line in frames_text(t)]
    return lines
