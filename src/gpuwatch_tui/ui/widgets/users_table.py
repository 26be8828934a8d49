"""Who uses what (all-smi's most used view): per user, over every host, the jobs, the GPUs and GPU memory
their processes hold, how long those GPUs sat idle and the energy they drew over the history window.

A GPU counts for each user with a process on it; its idle time and energy go to each of them (a shared GPU
is rare, and splitting it would hide that it is shared)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ...vocab import MIB_PER_GIB
from ..palette import Palette

if TYPE_CHECKING:  # annotations only
    from ...store import Store
    from ...views import JobView

IDLE_UTIL_PCT = 5.0  # a held GPU below this utilisation in a sample is idle for that sample
UNKNOWN_USER = "(unknown)"


@dataclass
class UserRow:
    user: str
    jobs: set
    gpus: set  # (host, index)
    mem_mib: float = 0.0
    idle_s: float = 0.0
    window_s: float = 0.0  # GPU-seconds of history behind idle_s and energy_wh
    energy_wh: float = 0.0

    @property
    def hosts(self) -> set[str]:
        return {host for host, _ in self.gpus}


def user_rows(store: Store, jobs: list[JobView]) -> list[UserRow]:
    """One row per user holding a GPU anywhere, most GPUs first."""
    job_of = {slot: job for job in jobs for slot in job.pid_slots}
    rows: dict[str, UserRow] = {}
    for host in store.hosts.values():
        gap = host.sample_gap_s or 0.0
        for index, record in host.gpus.items():
            users_here = set()
            for proc in record.latest.processes:
                info = host.procs.get(proc.pid)
                user = (info.user if info is not None else None) or UNKNOWN_USER
                row = rows.setdefault(user, UserRow(user, set(), set()))
                row.mem_mib += proc.mem_used_mib or 0.0
                job = job_of.get((host.name, proc.pid)) or (job_of.get((host.name, info.ppid)) if info else None)
                if job is not None:
                    row.jobs.add(job.id)
                users_here.add(user)
            for user in users_here:
                row = rows[user]
                row.gpus.add((host.name, index))
                utils = [u for u in record.util_history if u is not None]
                row.idle_s += gap * sum(1 for u in utils if u < IDLE_UTIL_PCT)
                row.window_s += gap * len(utils)
                row.energy_wh += gap * sum(w for w in record.power_history if w is not None) / 3600.0
    return sorted(rows.values(), key=lambda r: (-len(r.gpus), -r.mem_mib, r.user))


def users_table(rows: list[UserRow], palette: Palette, window: int) -> Table | Text:
    if not rows:
        return Text("no process holds a GPU on any host", palette.style("muted"))
    table = Table(box=None, expand=False, show_header=True, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))
    for title, justify in (("User", "left"), ("Jobs", "right"), ("GPUs", "right"), ("Hosts", "right"),
                           ("GPU mem", "right"), (f"Idle (last {window} samples)", "right"), ("Energy", "right")):
        table.add_column(title, justify=justify)
    for row in rows:
        idle_pct = 100.0 * row.idle_s / row.window_s if row.window_s else None
        idle = Text("-" if idle_pct is None else f"{_duration(row.idle_s)} ({idle_pct:.0f}%)")
        if idle_pct is not None and idle_pct >= 50:
            idle.stylize(palette.style("phase-stalled", bold=True))
        table.add_row(Text(row.user, style="bold"), str(len(row.jobs)), str(len(row.gpus)), str(len(row.hosts)),
                      f"{row.mem_mib / MIB_PER_GIB:.1f} GiB", idle, f"{row.energy_wh:.1f} Wh")
    return table


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
