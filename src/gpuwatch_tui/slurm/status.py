"""Slurm in `gpuwatch status`: one queue read before the hosts are watched (so the nodes of running
jobs are among them), the `slurm` section of the JSON, and its lines in the table."""

from __future__ import annotations

from ..config import Config
from ..vocab import fmt_age
from .durations import format_slurm_duration
from .hosts import with_slurm_jobs
from .scancel import check_job_id
from .watch import SlurmWatch


async def read_slurm(config: Config) -> tuple[Config, SlurmWatch | None]:
    """The config to watch (plus the running jobs' nodes and jobs) and the watch that read the queue."""
    if config.slurm is None:
        return config, None
    from .run import make_watch

    watch = make_watch(config)
    try:
        await watch.poll()
    finally:
        await watch.client.runner.close()
    return with_slurm_jobs(config, watch.running()), watch


def _cell(value: str | None, width: int = 60) -> str:
    text = value if value else "-"
    return text if len(text) <= width else "…" + text[-(width - 1):]


def render_slurm(section: dict, now: float) -> list[str]:
    """Running (nodes, elapsed/limit), pending (reason), ended (final state, exit code), log path."""
    head = f"SLURM ({section.get('login')}, user {section.get('user') or 'all'})"
    lines = ["", head]
    if section.get("error"):
        lines.append(f"  queue not read: {section['error']}")
    rows = [["JOBID", "NAME", "STATE", "NODES / REASON", "ELAPSED/LIMIT", "EXIT", "LOG"]]
    for j in section.get("jobs") or []:
        if j["ended"]:
            where = j["nodelist"] or "-"
            code = ("-" if j["exit_code"] is None else str(j["exit_code"])) + (
                f" sig {j['exit_signal']}" if j.get("exit_signal") else "")
        elif j["pending"]:
            where, code = f"({j['reason'] or 'pending'})", "-"
        else:
            where, code = j["nodelist"] or "-", "-"
        elapsed = "-" if j["elapsed_s"] is None else format_slurm_duration(j["elapsed_s"])
        limit = format_slurm_duration(j["time_limit_s"])
        rows.append([j["job_id"], _cell(j["name"], 24), j["state"], _cell(where, 32), f"{elapsed}/{limit}", code,
                     _cell(j["stdout"])])
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        for j in section["jobs"]:
            if not j["ended"]:
                lines.append(f"    {cancel_hint(j['job_id'])}")
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
