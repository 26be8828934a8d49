"""Actions on a job over several hosts: one plan per host (each through its own host's request path, each
process pinned by pid and start time by that host's probe), run at once, reported as one.

    plan = service.plan("multi:slurm job 42", "kill")   # ActionService delegates here for a multi-node job
    outcome = await service.execute(plan)              # every rank on every host

A kill ends every rank on every host; a py-spy dump dumps every rank on every host and analyses them
together, so the rank outside the collective is marked against the ranks waiting in it.
"""

from __future__ import annotations

import asyncio
import time

from ..jobs.job_actions import DUMP, KILL, DumpFinding
from ..views import JobView
from .dump import DumpReport, save_report
from .plan import ActionOutcome, ActionPlan, PlanTarget
from .stack_analysis import analyse, phase_hint


def part_views(monitor, view: JobView) -> list[JobView]:
    """The per-host jobs of a multi-node job, in its order (rank 0's host first)."""
    by_id = {v.id: v for v in monitor.tracker.views(joined=False)}
    return [by_id[p] for p in view.parts if p in by_id]


def plan_parts(service, view: JobView, spec, native: bool | None, refused):
    """One plan per host; the combined plan the person confirms carries them in `parts`."""
    if spec.name not in (KILL, DUMP):
        raise refused(f"{spec.title} of a job over {len(view.hosts)} hosts is not supported: "
                      "restart it with its launcher")
    live = [v for v in part_views(service.monitor, view) if v.alive]
    if not live:
        raise refused(f"job {view.name} on {', '.join(view.hosts)} has ended: nothing to act on")
    parts = tuple(service._plan(v, v.id, spec.name, native) for v in live)
    targets = tuple(PlanTarget(t.pid, t.start_ticks, t.user, t.role, f"[{p.host}] {t.command}")
                    for p in parts for t in p.targets)
    warnings = tuple(dict.fromkeys(w for p in parts for w in p.warnings))
    missing = [v.host for v in part_views(service.monitor, view) if not v.alive]
    if missing:
        warnings += (f"nothing left to act on at {', '.join(missing)}",)
    return ActionPlan(action=spec.name, title=spec.title, host=",".join(p.host for p in parts), job_id=view.id,
                      job=view.name, targets=targets, command="\n".join(p.command for p in parts),
                      warnings=warnings, confirm=spec.confirm, created_at=time.time(), native=parts[0].native,
                      parts=parts, short_id=view.short_id)


async def execute_parts(service, plan):
    """Every host's plan at once (each audited on its own); one outcome for all."""
    outcomes = await asyncio.gather(*(service.execute(p) for p in plan.parts), return_exceptions=True)
    lines, ok, some = [], 0, False
    for part, out in zip(plan.parts, outcomes):
        if isinstance(out, BaseException):
            lines.append(f"{part.host}: {out}")
            continue
        ok += out.ok
        some = some or out.status in ("done", "partial")
        lines += [f"{part.host}: {line}" for line in out.summary()] if plan.action == KILL else []
    status = "done" if ok == len(plan.parts) else ("partial" if some else "failed")
    report = None
    if plan.action == DUMP:
        reports = [o.report for o in outcomes if not isinstance(o, BaseException) and isinstance(o.report, DumpReport)]
        if reports:
            report = combined_dump(service, plan, reports)
        lines += [f"{p.host}: {o}" for p, o in zip(plan.parts, outcomes) if isinstance(o, BaseException)]
    return ActionOutcome(plan, status, report, "\n".join(lines))


def combined_dump(service, plan, reports: list[DumpReport]) -> DumpReport:
    """Every host's stacks analysed together: only then is the rank outside the collective visible
    against the ranks waiting inside it."""
    processes = [p for r in reports for p in r.processes]
    first = reports[0]
    report = DumpReport(host=plan.host, job=plan.job, taken_at=max(r.taken_at for r in reports),
                        pyspy=first.pyspy, pyspy_source=",".join(sorted({r.pyspy_source for r in reports})),
                        processes=processes, analysis=analyse(processes), native=first.native, sudo=first.sudo,
                        host_facts={r.host: r.host_facts for r in reports},
                        fr_records=[rec for r in reports for rec in r.fr_records],
                        ras=next((r.ras for r in reports if r.ras), None),
                        collective_notes=[n for r in reports for n in r.collective_notes], job_id=plan.short_id)
    report.compare_with(service._dumps.get(plan.job_id))
    try:
        report.saved_to = save_report(report, service.dumps_dir())
    except Exception:  # the per-host reports are saved already
        report.saved_to = None
    service._dumps[plan.job_id] = report
    hint = phase_hint(report.analysis)
    clock = time.strftime("%H:%M", time.localtime(report.taken_at))
    evidence = "; ".join([f"py-spy {clock}: {report.analysis.summary}", *report.findings()])
    finding = DumpFinding(report.taken_at, evidence,
                          hint[0] if hint else None, hint[1] if hint else None,
                          str(report.saved_to) if report.saved_to else None)
    for part in plan.parts:
        service.monitor.tracker.record_dump(part.job_id, finding)
    return report


__all__ = ["part_views", "plan_parts", "execute_parts", "combined_dump"]
