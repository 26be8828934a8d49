"""The one door to the actions: the dashboard and the CLI both plan, confirm, then execute through here.

    service = ActionService(monitor, settings, audit, readonly, local_user)
    plan = service.plan(job_id, "kill")        # sync; raises ActionRefused with words for a person
    ...show plan.text() and ask when plan.confirm...
    outcome = await service.execute(plan)      # ActionOutcome: .ok, .summary(), .to_json()

Every attempt, refused or done, is one line in the audit log; an action that cannot be recorded there is
refused. No Textual here.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path

from ..errors import GpuwatchError
from ..jobs.job_actions import DUMP, KILL, REAP, RESTART, DumpFinding
from ..jobs.job_lookup import find_job
from ..model import ChildProc, ProcInfo
from ..slurm.cancel import CancelRefused, plan_cancel
from ..slurm.hosts import slurm_id_of
from ..views import JobView
from . import registry
from .audit import AuditError, AuditLog
from .host_record import new_ref, note_action
from .dump import DEFAULT_DUMP_TIMEOUT_S, DumpFailed, DumpReport, DumpTarget, compare_with_saved, dump_job
from .job_tree import JobTree
from .kill import kill_job
from .multinode import execute_parts, plan_parts
from .plan import ActionOutcome, ActionPlan, PlanTarget
from .reap import plan_reap
from .restart import RestartPlan, build_restart, restart_job
from .settings import ActionSettings
from .stack_analysis import phase_hint

HOST_ACTIONS = (KILL, RESTART, DUMP, REAP)  # the registry's actions that act on a host
STALE_CAPTURE_S = 3600.0  # restart facts older than this get a louder warning


class ActionRefused(GpuwatchError):
    """The action was not taken: `reason` says why, in words for the person who asked."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _user(p: ProcInfo | ChildProc) -> str:
    if p.user:
        return p.user
    return f"uid {p.uid}" if p.uid is not None else "?"


def _cmd(p: ProcInfo | ChildProc) -> str:
    text = shlex.join(p.cmdline) if p.cmdline else f"[{p.name}]"
    return text if len(text) <= 160 else text[:157] + "..."


class ActionService:
    def __init__(self, monitor, settings: ActionSettings, audit: AuditLog, readonly: bool, local_user: str,
                 *, dump_timeout_s: float = DEFAULT_DUMP_TIMEOUT_S, slurm=None) -> None:
        self.monitor = monitor
        self.slurm = slurm  # a SlurmWatch ([slurm] in the config): kill of a Slurm job becomes scancel
        self.settings = settings
        self.audit = audit
        self.readonly = readonly
        self.local_user = local_user
        self.dump_timeout_s = dump_timeout_s
        self._dumps: dict[str, DumpReport] = {}

    # ------------------------------------------------------------------ reading
    def latest_dump(self, job_id: str) -> DumpReport | None:
        """The latest py-spy dump of a job taken through this service (for the stack view and reports)."""
        return self._dumps.get(job_id)

    def facts_ready(self, job_id: str) -> bool:
        """Whether the restart facts of the job's current top process have been read."""
        view = next((v for v in self.monitor.tracker.views() if v.id == job_id), None)
        captured = self.monitor.tracker.capture(job_id)
        return (view is not None and view.root is not None and captured is not None
                and (captured[0], captured[1]) == (view.root.pid, view.root.start_ticks))

    def find_job(self, host: str, name_or_id: str) -> JobView | None:
        """A job on `host` by its short id, its id, or a name only one job there has (several live jobs
        of that name raise job_lookup.AmbiguousJob: a person picks one by id)."""
        return find_job(self.monitor.tracker.views(), host, name_or_id, time.time())

    # ------------------------------------------------------------------ planning
    def plan(self, job_id: str, action_name: str, *, native: bool | None = None) -> ActionPlan:
        """What `action_name` would do to the job, for the person to confirm; ActionRefused otherwise
        (the refusal is audited)."""
        view = next((v for v in self.monitor.tracker.views() if v.id == job_id), None)
        host, job = (view.host, view.name) if view else ("?", job_id)
        try:
            return self._plan(view, job_id, action_name, native)
        except ActionRefused as refused:
            self._audit_refusal(host, job, action_name, (), "", refused)
            raise

    def _plan(self, view: JobView | None, job_id: str, action_name: str, native: bool | None) -> ActionPlan:
        try:
            spec = registry.by_name(action_name)
        except KeyError as exc:
            raise ActionRefused(str(exc.args[0])) from None
        if spec.name not in HOST_ACTIONS:
            raise ActionRefused(f"{spec.title} is not an action on a host's processes")
        if self.readonly:
            raise ActionRefused(f"read-only mode: {spec.title.lower()} is disabled (--readonly or settings.readonly)")
        if view is None:
            raise ActionRefused(f"no job {job_id!r}: it may have been dismissed")
        if spec.name == REAP:  # a job that has ended may have left processes behind
            return plan_reap(self, view, spec, ActionRefused)
        if spec.name == KILL and self.slurm is not None and (view.alive or view.parts):
            slurm_plan = self._slurm_kill_plan(view, spec)  # scancel ends every node's ranks at once
            if slurm_plan is not None:
                return slurm_plan
        if view.parts:
            return plan_parts(self, view, spec, native, ActionRefused)
        if not view.alive:
            raise ActionRefused(f"job {view.name} on {view.host} has ended: nothing to act on")
        rec = self.monitor.store.hosts.get(view.host)
        if rec is None or rec.state != "connected":
            state = rec.state if rec is not None else "unknown"
            raise ActionRefused(f"host {view.host} is not connected ({state}): nothing can be sent to it")
        procs = self.monitor.tracker.procs(view.id)
        if not procs:
            raise ActionRefused(f"job {view.name} on {view.host} has no live process in the latest sample")
        tree = self._tree(view, procs)
        now = time.time()
        common = dict(action=spec.name, title=spec.title, host=view.host, job_id=view.id, job=view.name,
                      confirm=spec.confirm, created_at=now, short_id=view.short_id)
        if spec.name == KILL:
            targets = self._targets(tree, procs)
            if not targets:
                raise ActionRefused("no process of this job has a known start time: nothing can be signalled safely")
            command = self._kill_command(view.host, targets)
            warnings = self._skipped_warning(tree)
            return ActionPlan(**common, targets=targets, command=command, warnings=warnings, tree=tree)
        if spec.name == RESTART:
            restart, warnings = self._restart_plan(view, tree, now)
            targets = self._targets(tree, procs)
            return ActionPlan(**common, targets=targets, command=restart.command(),
                              warnings=(*warnings, *self._skipped_warning(tree)), tree=tree, restart=restart)
        use_native = self.settings.pyspy_native if native is None else native
        py = [p for p in procs if p.is_python and p.start_ticks > 0]
        if not py:
            raise ActionRefused(f"job {view.name} has no Python process to dump")
        targets = tuple(PlanTarget(p.pid, p.start_ticks, _user(p), "main", _cmd(p)) for p in py)
        sudo = "sudo -n " if self.settings.pyspy_sudo else ""
        flags = " --native" if use_native else ""
        command = "\n".join(f"{sudo}py-spy dump --json{flags} --pid {t.pid}   # on {view.host}" for t in targets)
        warnings = ("py-spy stops each process for the moment it reads its stacks",)
        return ActionPlan(**common, targets=targets, command=command, warnings=warnings, tree=tree,
                          native=use_native)

    def _slurm_kill_plan(self, view: JobView, spec) -> ActionPlan | None:
        """scancel for a job Slurm owns (named slurm-<id>): signalling its pids would leave the allocation
        (and the other nodes' ranks) behind. None for a job that is not Slurm's."""
        slurm_id = slurm_id_of(view.name)
        if slurm_id is None:
            return None
        job = self.slurm.queue.get(slurm_id)
        if job is None:
            raise ActionRefused(f"Slurm job {slurm_id} is not in the queue as last read: it may have ended")
        try:
            cancel = plan_cancel(job, self.slurm.client.config.login)
        except CancelRefused as exc:
            raise ActionRefused(str(exc)) from None
        return ActionPlan(action=spec.name, title=spec.title, host=view.host, job_id=view.id, job=view.name,
                          targets=(), command=f"{cancel.command}   # on {cancel.where}", warnings=cancel.warnings,
                          confirm=spec.confirm, created_at=time.time(), slurm_cancel=cancel, short_id=view.short_id)

    def _tree(self, view: JobView, procs: list[ProcInfo]) -> JobTree:
        """The job's processes, and leftover GPU-memory holders: GPU processes whose pid is in the job's
        tree now or was in it (a DataLoader worker its rank no longer lists)."""
        sample = self.monitor.last_samples.get(view.host)
        state = self.monitor.tracker.state(view.id)
        was = set(view.pids) | (state.gpu_pids if state is not None else set())
        was |= {c.pid for p in procs for c in p.children}
        holders: list[ProcInfo] = []
        if sample is not None:
            on_gpu = {gp.pid for g in sample.gpus for gp in g.processes}
            holders = [sample.procs[pid] for pid in sorted(on_gpu & was) if pid in sample.procs]
        return JobTree(view.host, view.name, tuple(procs), tuple(holders))

    def _targets(self, tree: JobTree, procs: list[ProcInfo]) -> tuple[PlanTarget, ...]:
        facts: dict[int, ProcInfo | ChildProc] = {}
        for p in procs:
            facts[p.pid] = p
            for c in p.children:
                facts.setdefault(c.pid, c)
        for h in tree.gpu_holders:
            facts.setdefault(h.pid, h)
        return tuple(PlanTarget(t.pid, t.start_ticks, _user(facts[t.pid]), t.role, _cmd(facts[t.pid]))
                     for t in tree.targets())

    def _kill_command(self, host: str, targets: tuple[PlanTarget, ...]) -> str:
        pids = " ".join(str(t.pid) for t in targets)
        return (f"on {host}: SIGTERM to {pids} (launcher first, each pinned by pid and start time), "
                f"wait up to {self.settings.kill_grace_s:g} s, then SIGKILL what is left")

    @staticmethod
    def _skipped_warning(tree: JobTree) -> tuple[str, ...]:
        skipped = tree.skipped()
        if not skipped:
            return ()
        return (f"pids {', '.join(map(str, skipped))} have no known start time and will not be signalled",)

    def _restart_plan(self, view: JobView, tree: JobTree, now: float) -> tuple[RestartPlan, tuple[str, ...]]:
        tracker = self.monitor.tracker
        captured = tracker.capture(view.id)
        if view.root is None:
            raise ActionRefused(f"job {view.name}: its top process has no known start time; cannot restart it")
        if captured is None or (captured[0], captured[1]) != (view.root.pid, view.root.start_ticks):
            raise ActionRefused(f"the restart facts of {view.name} (pid {view.root.pid}) have not been read yet: "
                                "try again in a moment")
        _, _, facts, when = captured
        try:
            plan = build_restart(facts, host=view.host, job=view.name, log_mode=self.settings.restart_log_mode,
                                 local_user=self.local_user, now=now, kill_tree=tree,
                                 flight_recorder=self.settings.flight_recorder)
        except ValueError as exc:
            raise ActionRefused(str(exc)) from None
        age = now - when
        at = time.strftime("%H:%M:%S", time.localtime(when))
        note = f"command, directory and environment as read at {at} ({age:.0f} s ago)"
        if age > STALE_CAPTURE_S:
            note += ": the environment may be stale (the job's files or settings may have changed since)"
        return plan, (note,)

    # ------------------------------------------------------------------ doing
    async def execute(self, plan: ActionPlan) -> ActionOutcome:
        """Do what the plan says. Audited before (refused when the log cannot be written) and after."""
        if self.readonly:
            refused = ActionRefused("read-only mode: actions are disabled")
            self._audit_refusal(plan.host, plan.job, plan.action, plan.pids, plan.command, refused)
            raise refused
        try:
            self.audit.record(host=plan.host, job=plan.job, action=plan.action, pids=plan.pids,
                              command=plan.command, result="started", local_user=self.local_user,
                              job_id=plan.short_id)
        except AuditError as exc:
            raise ActionRefused(f"{exc}: the action was not taken (every action must be recorded)") from None
        if plan.parts:
            return self._audit_result(plan, await execute_parts(self, plan))
        tracker = self.monitor.tracker
        now = time.time()
        request = self._request(plan.host)
        if plan.slurm_cancel is not None:
            tracker.record_action(plan.job_id, KILL, self.local_user, now)
            result = await self.slurm.client.run_plan(plan.slurm_cancel)
            words = (f"scancel: Slurm job {plan.slurm_cancel.job.job_id} cancelled" if result.ok
                     else f"scancel failed: {result.failure()}")
            outcome = ActionOutcome(plan, "done" if result.ok else "failed", None, words)
        elif plan.action == KILL:
            ref = new_ref()
            tracker.record_action(plan.job_id, KILL, self.local_user, now, ref=ref)
            warning = await note_action(request, KILL, self.local_user, plan.targets, ref)
            report = await kill_job(request, plan.tree, self.settings.kill_grace_s,
                                    kill_wait_s=self.settings.kill_wait_s)
            outcome = self._killed(plan, report)
            if warning:
                outcome = dataclasses.replace(outcome, warnings=(*outcome.warnings, warning))
        elif plan.action == REAP:
            tracker.record_action(plan.job_id, REAP, self.local_user, now)
            report = await kill_job(request, plan.tree, self.settings.kill_grace_s,
                                    kill_wait_s=self.settings.kill_wait_s, order="together", action=REAP)
            outcome = self._killed(plan, report)
        elif plan.action == RESTART:
            outcome = await self._restart(plan, now, request)
        else:
            outcome = await self._dump(plan, now, request)
        return self._audit_result(plan, outcome)

    def _killed(self, plan: ActionPlan, report) -> ActionOutcome:
        """A kill's or reap's outcome: done only when nothing it reached is left; whatever is left (a process
        that outlived SIGKILL, one it may not signal) is followed as the job's leftovers from now on."""
        left = report.left_behind()
        if left:
            self.monitor.tracker.note_leftovers(plan.job_id, [(o.pid, o.start_ticks) for o in left])
            words = ", ".join(f"{o.pid} ({o.outcome})" for o in left)
            message = (f"left behind: {len(left)} process{'es' if len(left) > 1 else ''} {words}; "
                       f"shown as the job's leftovers")
            return ActionOutcome(plan, "partial", report, message)
        status = "done" if report.ok else ("partial" if report.outcomes else "failed")
        return ActionOutcome(plan, status, report)

    def _audit_result(self, plan: ActionPlan, outcome: ActionOutcome) -> ActionOutcome:
        try:
            self.audit.record(host=plan.host, job=plan.job, action=plan.action, pids=plan.pids,
                              command=plan.command, result=outcome.status, local_user=self.local_user,
                              detail={"summary": outcome.summary()}, job_id=plan.short_id)
        except AuditError as exc:
            outcome = ActionOutcome(plan, outcome.status, outcome.report, outcome.message,
                                    (*outcome.warnings, f"{exc}: this result is not in the audit log"))
        return outcome

    def _request(self, host: str):
        async def request(op: str, args: dict, timeout: float) -> dict:
            return await self.monitor.request(host, op, args, timeout)
        return request

    async def _restart(self, plan: ActionPlan, now: float, request) -> ActionOutcome:
        tracker = self.monitor.tracker
        ref = new_ref()
        record = tracker.record_action(plan.job_id, RESTART, self.local_user, now, ref=ref)
        warning = await note_action(request, RESTART, self.local_user, plan.targets, ref)
        old_serial = record.run
        old_pids = {t.pid for t in plan.targets}

        async def still_held() -> bool:
            # The new run must be seen as the same job: wait until the tracker has seen the old one end,
            # and for the old processes' GPU memory.
            job = tracker.state(plan.job_id)
            if job is not None and job.serial == old_serial and job.exit is None:
                return True
            sample = self.monitor.last_samples.get(plan.host)
            return sample is not None and any(gp.pid in old_pids for g in sample.gpus for gp in g.processes)

        report = await restart_job(request, plan.restart, still_held, settings=self.settings,
                                   note={"user": self.local_user, "id": new_ref()})
        if report.spawned and report.pid is not None:
            # A discovered job keeps its identity: the new process joins it, not a new job.
            tracker.expect_successor(plan.job_id, plan.host, report.pid, report.start_ticks or 0,
                                     report.wrapper_pid, time.time())
        if report.spawned and report.status_file:
            tracker.set_restart_status_file(plan.job_id, record, report.status_file)
            if self.monitor.job_facts is not None:
                self.monitor.job_facts.refresh(plan.job_id)
        status = "done" if report.spawned else "failed"
        return ActionOutcome(plan, status, report, warnings=(warning,) if warning else ())

    async def _dump(self, plan: ActionPlan, now: float, request) -> ActionOutcome:
        tracker = self.monitor.tracker
        ref = new_ref()
        tracker.record_action(plan.job_id, DUMP, self.local_user, now, ref=ref)
        targets = [DumpTarget(t.pid, t.start_ticks) for t in plan.targets]
        try:
            report = await dump_job(request, targets, plan.native, self.dump_timeout_s, self.settings.pyspy_sudo,
                                    host=plan.host, job=plan.job, job_id=plan.short_id,
                                    save_dir=self.dumps_dir())
        except DumpFailed as exc:
            return ActionOutcome(plan, "failed", None, str(exc))
        earlier = self._dumps.get(plan.job_id)
        if earlier is not None:
            report.compare_with(earlier)
        else:
            compare_with_saved(report, self.dumps_dir())
        self._dumps[plan.job_id] = report
        hint = phase_hint(report.analysis)
        clock = time.strftime("%H:%M", time.localtime(report.taken_at))
        evidence = "; ".join([f"py-spy {clock}: {report.analysis.summary}", *report.findings()])
        tracker.record_dump(plan.job_id, DumpFinding(report.taken_at, evidence, hint[0] if hint else None,
                                                     hint[1] if hint else None,
                                                     str(report.saved_to) if report.saved_to else None))
        # The reading on the host too: every gpuwatch watching the job gives the same verdict with it.
        warning = await note_action(request, DUMP, self.local_user, plan.targets, ref, finding={
            "evidence": evidence, "phase": hint[0] if hint else None, "detail": hint[1] if hint else None})
        ok = sum(1 for p in report.processes if p.ok)
        status = "done" if ok == len(report.processes) and ok else ("partial" if ok else "failed")
        return ActionOutcome(plan, status, report, warnings=(warning,) if warning else ())

    def dumps_dir(self) -> Path:
        """Dumps are kept next to the audit log, in gpuwatch's state dir."""
        return self.audit.path.parent / "dumps"

    def _audit_refusal(self, host: str, job: str, action: str, pids, command: str, refused: ActionRefused) -> None:
        try:
            self.audit.record(host=host, job=job, action=action, pids=pids, command=command,
                              result=f"refused: {refused.reason}", local_user=self.local_user)
        except AuditError as exc:
            refused.reason = f"{refused.reason} (and {exc})"
            refused.args = (refused.reason,)
