"""DashboardSource over a recording: the same dashboard, with a clock the person drives.

Play/pause, speed 1x-60x, seek by time and to the next/previous phase change. The store the
widgets read is a real Store rebuilt at the cursor (recording/timeline.py), the jobs are the
recorded JobViews, and actions are refused: there is no host to act on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from ..model import DirStat, ProcInfo
from ..recording.timeline import Replay, Timeline
from ..views import JobView
from ..vocab import REPLAY_SPEEDS, fmt_clock, fmt_utc

STEP_S = 0.25  # wall seconds between clock steps while playing (the UI redraws at most 4 Hz anyway)


class ReplaySource:
    """Implements DashboardSource over a Timeline; `loop` starts over at the end (the demo)."""

    def __init__(self, timeline: Timeline, history: int = 120, speed: int = 1, playing: bool = True,
                 loop: bool = False, start: float | None = None) -> None:
        if speed not in REPLAY_SPEEDS:
            raise ValueError(f"replay speed should be one of {', '.join(map(str, REPLAY_SPEEDS))}, got {speed!r}")
        self.timeline = timeline
        self.replay = Replay(timeline, history)
        self.paused = False  # the UI's `p`: stop redrawing (the replay clock is `playing`)
        self.playing = playing
        self.speed = speed
        self.loop = loop
        self.damage = timeline.damage  # None, or where the recording is cut short and why
        self._dismissed: set[str] = set()
        self._callbacks: list[Callable[[], None]] = []
        self._stopped = asyncio.Event()
        if start is not None:
            self.replay.seek(start)

    @property
    def store(self):
        return self.replay.store

    # -- the clock ---------------------------------------------------------------------------
    def seek(self, t: float) -> float:
        at = self.replay.seek(t)
        self.notify()
        return at

    def seek_by(self, seconds: float) -> float:
        return self.seek(self.replay.cursor + seconds)

    def next_phase_change(self) -> float | None:
        """Jump to the next instant a job's phase changed; None (and no move) when there is none."""
        t = self.timeline.next_phase_change(self.replay.cursor)
        return None if t is None else self.seek(t)

    def previous_phase_change(self) -> float | None:
        t = self.timeline.previous_phase_change(self.replay.cursor)
        return None if t is None else self.seek(t)

    def toggle_play(self) -> bool:
        if not self.playing and self.replay.cursor >= self.timeline.end:
            self.replay.seek(self.timeline.start)  # play at the end starts over
        self.playing = not self.playing
        self.notify()
        return self.playing

    def faster(self) -> int:
        self.speed = REPLAY_SPEEDS[min(len(REPLAY_SPEEDS) - 1, REPLAY_SPEEDS.index(self.speed) + 1)]
        self.notify()
        return self.speed

    def slower(self) -> int:
        self.speed = REPLAY_SPEEDS[max(0, REPLAY_SPEEDS.index(self.speed) - 1)]
        self.notify()
        return self.speed

    def step(self, wall_seconds: float) -> None:
        """Advance the clock as `wall_seconds` of playing would (at the end: stop, or start over)."""
        if not self.playing:
            return
        target = self.replay.cursor + wall_seconds * self.speed
        if target > self.timeline.end:
            if self.loop:
                self.replay.seek(self.timeline.start)
                self._dismissed.clear()
            else:
                self.replay.seek(self.timeline.end)
                self.playing = False
        else:
            self.replay.seek(target)
        self.notify()

    def time_cursor(self) -> str:
        """The header's words for "now": play state, speed, the recorded time, where in the recording."""
        mark = "▶" if self.playing else "⏸"
        t = self.replay.cursor
        return (f"{mark} REPLAY {self.speed}x  {fmt_utc(t)}  "
                f"{fmt_clock(t - self.timeline.start)}/{fmt_clock(self.timeline.end - self.timeline.start)}")

    # -- actions: a recording has no host to act on ------------------------------------------
    def plan_action(self, job_id: str, name: str):
        from ..actions.service import ActionRefused  # the service only once a key is pressed

        raise ActionRefused("actions are disabled when replaying a recording: there is no host to act on")

    async def run_action(self, plan):
        return self.plan_action(plan.job_id, plan.action)

    def latest_dump(self, job_id: str):
        return None

    # -- DashboardSource ---------------------------------------------------------------------
    def now(self) -> float:
        return self.replay.cursor

    def jobs(self) -> list[JobView]:
        return [job for job in self.replay.jobs() if job.id not in self._dismissed]

    def job_log(self, job_id: str) -> list[str]:
        return self.timeline.log_at(job_id, self.replay.cursor)[0]

    def job_log_total(self, job_id: str) -> int:
        return self.timeline.log_at(job_id, self.replay.cursor)[1]

    def job_procs(self, job_id: str) -> list[ProcInfo]:
        return self.timeline.procs_at(job_id, self.replay.cursor)

    def job_outdir(self, job_id: str) -> DirStat | None:
        return self.timeline.outdir_at(job_id, self.replay.cursor)

    def dismiss_job(self, job_id: str) -> bool:
        known = any(job.id == job_id for job in self.jobs())
        self._dismissed.add(job_id)
        self.notify()
        return known

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def notify(self) -> None:
        for callback in self._callbacks:
            callback()

    async def run(self) -> None:
        self.notify()
        last = time.monotonic()
        while not self._stopped.is_set():
            try:
                await asyncio.wait_for(self._stopped.wait(), STEP_S)
            except asyncio.TimeoutError:
                pass
            now = time.monotonic()
            self.step(now - last)
            last = now

    async def stop(self) -> None:
        self._stopped.set()
