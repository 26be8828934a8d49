"""A window of a recording, written as a recording of its own (for an incident bundle).

Each line of a recording holds only what changed since the line before, so a window cannot be cut out
of the file: it is replayed from the recording and recorded again, every sample and every tick inside
[start, end], the first tick of the window carrying the whole state of that instant.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from .recorder import Recorder
from .timeline import Replay, ReplayMonitor, Timeline


class _WindowMonitor(ReplayMonitor):
    """What a Recorder reads of a Monitor, over a Replay."""

    def __init__(self, replay: Replay, timeline: Timeline) -> None:
        super().__init__(replay)
        self.sessions = {h: None for h in timeline.hosts}
        s = timeline.header.get("settings") or {}
        self.settings = SimpleNamespace(sample_interval=timeline.sample_interval, history=timeline.history,
                                        stall_after=s.get("stall_after"), stale_after=s.get("stale_after"))
        self.last_samples: dict = {}


def write_window(timeline: Timeline, start: float, end: float, out: Path | str) -> int:
    """Record [start, end] of `timeline` into `out`; returns the number of tick lines written (0: none in it)."""
    start, end = max(start, timeline.start), min(end, timeline.end)
    replay = Replay(timeline, timeline.history)
    replay.seek(start)
    monitor = _WindowMonitor(replay, timeline)
    recorder = Recorder(monitor, out)
    recorder.open(start, subscribe=False)
    events = sorted([(t, 1, host, i) for host, entries in timeline.samples.items()
                     for i, (t, _, _) in enumerate(entries) if start < t <= end]
                    + [(t, 2, "", -1) for t in timeline.ticks if start <= t <= end])
    try:
        for t, kind, host, i in events:
            replay.seek(t)
            if kind == 1:
                monitor.last_samples[host] = timeline.sample(host, i)
                recorder.on_change()
            else:
                recorder.tick(t)
    finally:
        recorder.close()
    return recorder.ticks
