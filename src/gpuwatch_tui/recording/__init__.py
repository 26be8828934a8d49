"""Recording what gpuwatch saw, and reading it back (replay, demo, reports of the past).

No Textual here: the dashboard's ReplaySource (ui/replay_source.py) sits on top of `Replay`.
"""

from .files import RecordingWriter, read_recording
from .format import FORMAT, VERSION, RecordingError
from .recorder import Recorder, RollingRecorder
from .timeline import Replay, ReplayMonitor, Timeline

__all__ = ["FORMAT", "VERSION", "RecordingError", "RecordingWriter", "read_recording", "Recorder",
           "RollingRecorder", "Replay", "ReplayMonitor", "Timeline"]
