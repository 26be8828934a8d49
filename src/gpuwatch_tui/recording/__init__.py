"""Recording what gpuwatch saw, and reading it back (replay, demo, reports of the past).

No Textual here: the dashboard's ReplaySource (ui/replay_source.py) sits on top of `Replay`.
"""

from __future__ import annotations

from importlib import import_module

# Loaded on first use: `gpuwatch --help` and the dashboard's first frame need only `at_time`.
_HOMES = {
    "RecordingWriter": ".files", "read_recording": ".files", "FORMAT": ".format", "VERSION": ".format",
    "RecordingError": ".format", "Recorder": ".recorder", "RollingRecorder": ".recorder", "Replay": ".timeline",
    "ReplayMonitor": ".timeline", "Timeline": ".timeline",
}

__all__ = ["FORMAT", "VERSION", "RecordingError", "RecordingWriter", "read_recording", "Recorder",
           "RollingRecorder", "Replay", "ReplayMonitor", "Timeline"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value
