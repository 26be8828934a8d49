"""For the dialog-flow tests of the action keys: a recorded fleet that can plan and run actions.

The dashboard reaches the action service through its source (`plan_action`, `run_action`). Until the
service module is importable here, a minimal stand-in with the agreed contract (ActionRefused,
ActionPlan, ActionOutcome) is registered under its name, for these tests only.
"""

from __future__ import annotations

import asyncio
import shlex
import importlib
import sys
import types
from dataclasses import dataclass, field

from gpuwatch_tui.actions.kill import KillReport, ProcessOutcome
from gpuwatch_tui.actions.registry import by_name
from gpuwatch_tui.ui.levels import job_has_ended
from gpuwatch_tui.ui.recorded_source import RecordedSource


def _contract_module() -> types.ModuleType:
    try:
        return importlib.import_module("gpuwatch_tui.actions.service")
    except ImportError:
        pass
    module = types.ModuleType("gpuwatch_tui.actions.service")

    class ActionRefused(Exception):
        def __init__(self, reason: str) -> None:
            super().__init__(reason)
            self.reason = reason

    @dataclass(frozen=True)
    class PlanTarget:
        pid: int
        start_ticks: int
        user: str
        role: str
        command: str

    @dataclass(frozen=True)
    class ActionPlan:
        action: str
        title: str
        host: str
        job_id: str
        job: str
        targets: tuple
        command: str
        warnings: tuple[str, ...]
        confirm: bool
        created_at: float

    @dataclass(frozen=True)
    class ActionOutcome:
        plan: ActionPlan
        status: str
        report: object
        message: str = ""
        warnings: tuple[str, ...] = ()

        @property
        def ok(self) -> bool:
            return self.status == "done"

        def summary(self) -> list[str]:
            r = self.report
            if hasattr(r, "analysis"):  # a DumpReport
                return [f"py-spy dump of {r.job} on {r.host}: {len(r.processes)} processes", "  " + r.analysis.summary]
            return [r.summary()] if r is not None else [self.message]

        def to_json(self) -> dict:
            return {"status": self.status, "ok": self.ok}

    module.ActionRefused = ActionRefused
    module.PlanTarget = PlanTarget
    module.ActionPlan = ActionPlan
    module.ActionOutcome = ActionOutcome
    sys.modules[module.__name__] = module
    import gpuwatch_tui.actions as package

    package.service = module
    return module


service = _contract_module()


def _plan(action: str, job, procs) -> object:
    targets = []
    for p in procs:
        targets.append(service.PlanTarget(p.pid, p.start_ticks or 1, "ml", "main", shlex.join(p.cmdline)))
        targets += [service.PlanTarget(c.pid, c.start_ticks or 1, "ml", "descendant", shlex.join(c.cmdline))
                    for c in p.children]
    pids = " ".join(str(t.pid) for t in targets)
    command = {"kill": f"SIGTERM pids {pids}, SIGKILL after 10s",
               "restart_unbuffered": "cd /home/ml && PYTHONUNBUFFERED=1 setsid python3 -u train.py",
               "dump_stack": f"py-spy dump --json --pid each of {pids}"}[action]
    return service.ActionPlan(action=action, title=by_name(action).title, host=job.host, job_id=job.id, job=job.name,
                              targets=tuple(targets), command=command,
                              warnings=("environment captured 3 h ago: may be stale",) if action != "kill" else (),
                              confirm=by_name(action).confirm, created_at=0.0, short_id=job.short_id)


class ActingRecordedSource(RecordedSource):
    """Plans from the recorded processes; `run_action` waits for `release` and returns a kill report
    (one exited, one permission denied) or, for a dump, `next_dump`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.planned: list[object] = []
        self.ran: list[object] = []
        self.release: asyncio.Event | None = None
        self.next_dump = None

    def plan_action(self, job_id: str, name: str):
        job = next((j for j in self.jobs() if j.id == job_id), None)
        if job is None:
            raise service.ActionRefused(f"no job {job_id}")
        if job_has_ended(job):
            raise service.ActionRefused(f"{job.name} has ended ({job.phase}): nothing to {by_name(name).cli_verb}")
        plan = _plan(name, job, self.job_procs(job_id))
        self.planned.append(plan)
        return plan

    async def run_action(self, plan):
        self.ran.append(plan)
        if self.release is not None:
            await self.release.wait()
        if plan.action == "dump_stack":
            return service.ActionOutcome(plan, "done", self.next_dump)
        outcomes = (ProcessOutcome(plan.targets[0].pid, 1, "main", "python3", "exited", ended_at_s=0.3),
                    ProcessOutcome(plan.targets[-1].pid, 1, "main", "python3", "permission-denied",
                                   message="Operation not permitted"))
        report = KillReport(plan.host, plan.job, plan.command, 10.0, (), outcomes)
        return service.ActionOutcome(plan, "partial", report)

    def latest_dump(self, job_id: str):
        return None
