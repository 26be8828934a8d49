"""The marker line a restart with -u writes into the job's log, read back by any gpuwatch.

The restart is often done by another gpuwatch than the one watching (`gpuwatch restart` from a shell
while a dashboard runs). The marker in the shared log is what both see: it says the old run was ended
by gpuwatch (so it is `crashed/killed`, not `finished` when the new run's output lands in the same
file) and lets the watcher carry the job on into the new run.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass

# Written by actions/restart.py: "=== gpuwatch: restarted with -u at 2026-12-01T04:47:13Z by root (was pid 844) ==="
MARKER = re.compile(r"^=== gpuwatch: restarted with -u at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) by (.+) "
                    r"\(was pid (\d+)\) ===$")


@dataclass(frozen=True)
class RestartMarker:
    when: float  # unix time the restart began
    user: str
    old_pid: int

    def text(self) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(self.when))
        return f"restarted with -u by {self.user} via gpuwatch at {clock} (marker line in the log)"


def parse_marker(line: str) -> RestartMarker | None:
    m = MARKER.match(line.strip())
    if m is None:
        return None
    when = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ"))
    return RestartMarker(float(when), m.group(2), int(m.group(3)))
