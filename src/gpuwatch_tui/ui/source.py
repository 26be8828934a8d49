"""What the dashboard reads: a small protocol the live core and recorded fixtures both implement."""

from __future__ import annotations

from typing import Callable, Protocol, TYPE_CHECKING, runtime_checkable

if TYPE_CHECKING:  # annotations only: the first frame comes before the frame model is imported
    from ..model import DirStat, ProcInfo
    from ..store import Store
    from ..views import JobView


@runtime_checkable
class DashboardSource(Protocol):
    """The dashboard's only view of the world.

    Everything is read on the app's asyncio loop; the UI never mutates the source except `paused`
    and `dismiss_job` (a person dismissing an ended job).
    """

    store: Store
    """Live object, mutated by the core between updates."""

    paused: bool
    """Set by the UI (`p`): the UI stops redrawing; the core keeps sampling."""

    def now(self) -> float:
        """Unix seconds used for ages in the UI (a fixed value in recorded sources)."""
        ...

    def jobs(self) -> list[JobView]:
        """Every job as a frozen typed view (the same object `status --json` serialises)."""
        ...

    def job_log(self, job_id: str) -> list[str]:
        """Already-sanitised log lines, newest last, bounded."""
        ...

    def job_log_total(self, job_id: str) -> int:
        """Lines ever seen for this job's log (so the UI can count "+N new")."""
        ...

    def job_procs(self, job_id: str) -> list[ProcInfo]: ...

    def job_outdir(self, job_id: str) -> DirStat | None: ...

    def dismiss_job(self, job_id: str) -> bool:
        """Forget a job that has ended (the UI only offers it for those); True if it was known.
        Subscribers are called so every view drops it."""
        ...

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the same asyncio loop after each change."""
        ...

    async def run(self) -> None:
        """Start sampling; returns when stopped."""
        ...

    async def stop(self) -> None: ...
