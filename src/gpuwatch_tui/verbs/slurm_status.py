"""Slurm in `gpuwatch status`: one queue read before the hosts are watched (so the nodes of running
jobs are among them), the `slurm` section of the JSON, and its lines in the table."""

from __future__ import annotations

import dataclasses

from ..config import Config
from ..slurm.display import COLUMNS, queue_rows
from ..slurm.hosts import with_slurm_jobs
from ..slurm.records import SlurmJob
from ..slurm.run import make_watch
from ..slurm.scancel import check_job_id
from ..slurm.watch import SlurmWatch
from ..vocab import fmt_age


async def read_slurm(config: Config) -> tuple[Config, SlurmWatch | None]:
    """The config to watch (plus the running jobs' nodes and jobs) and the watch that read the queue."""
    if config.slurm is None:
        return config, None
    watch = make_watch(config)
    try:
        await watch.poll()
    finally:
        await watch.client.runner.close()
    return with_slurm_jobs(config, watch.running()), watch


def _cell(value: str | None, width: int = 60) -> str:
    text = value if value else "-"
    return text if len(text) <= width else "…" + text[-(width - 1):]


def job_from_json(data: dict) -> SlurmJob:
    """The record back from its `status --json` form."""
    names = {f.name for f in dataclasses.fields(SlurmJob)} - {"extra"}
    values = {k: v for k, v in data.items() if k in names}
    values["nodes"] = tuple(values.get("nodes") or ())
    return SlurmJob(**values)


def render_slurm(section: dict, now: float) -> list[str]:
    """Running (nodes, elapsed/limit), pending (reason), ended (final state, exit code), log path:
    the cells of the dashboard's Slurm table (display.py), and a scancel line per live job."""
    head = f"SLURM ({section.get('login')}, user {section.get('user') or 'all'})"
    lines = ["", head]
    if section.get("error"):
        lines.append(f"  queue not read: {section['error']}")
    jobs = [job_from_json(j) for j in section.get("jobs") or []]
    rows = [list(COLUMNS)] + [[_cell(c, 60 if i == 6 else 32) for i, c in enumerate(r.cells)] for r in queue_rows(jobs)]
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        for job in jobs:
            if job.is_active or job.is_pending:
                lines.append(f"    {cancel_hint(job.job_id)}")
    else:
        lines.append("  no jobs")
    for problem in section.get("problems") or []:
        lines.append(f"  note: {problem}")
    if section.get("read_at"):
        lines.append(f"  read {fmt_age(now - section['read_at'])} ago in {section.get('read_s') or 0:.2f}s")
    return lines


def cancel_hint(job_id: str) -> str:
    check_job_id(job_id)  # digits and _ only: safe to paste
    return f"gpuwatch scancel {job_id}"
