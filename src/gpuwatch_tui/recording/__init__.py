"""Recording what gpuwatch saw, and reading it back (replay, demo, reports of the past).

No Textual here: the dashboard's ReplaySource (ui/replay_source.py) sits on top of `Replay`.
"""

from __future__ import annotations

from ..lazy_exports import lazy_exports

# Loaded on first use: `gpuwatch --help` and the dashboard's first frame need only `at_time`.
_HOMES = {
    "RecordingWriter": ".files", "read_recording": ".files", "FORMAT": ".format", "VERSION": ".format",
    "RecordingError": ".format", "Recorder": ".recorder", "RollingRecorder": ".recorder", "Replay": ".timeline",
    "ReplayMonitor": ".timeline", "Timeline": ".timeline",
}

__all__ = ["FORMAT", "VERSION", "RecordingError", "RecordingWriter", "read_recording", "Recorder",
           "RollingRecorder", "Replay", "ReplayMonitor", "Timeline"]


__getattr__ = lazy_exports(__name__, _HOMES)
