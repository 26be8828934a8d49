"""Knobs of the kill and restart actions, with the defaults the issue asks for.

Config keys (config.py reads them): [actions] kill_grace = "10s", restart_log_mode = "append" | "rotate",
restart_gpu_wait = "60s", pyspy_sudo = false, pyspy_native = false, flight_recorder = false.
"""

from __future__ import annotations

from dataclasses import dataclass

LOG_MODES = ("append", "rotate")


@dataclass(frozen=True)
class ActionSettings:
    kill_grace_s: float = 10.0  # SIGTERM, then this long for the job to exit, then SIGKILL
    kill_wait_s: float = 3.0  # after SIGKILL, how long to wait before calling a process a survivor
    restart_log_mode: str = "append"  # append after a marker line, or rotate the old log to NAME.1
    restart_gpu_wait_s: float = 60.0  # how long a restart waits for the old job's GPU memory to be freed
    pyspy_sudo: bool = False  # run py-spy as `sudo -n py-spy` on the hosts (needs a sudoers rule there)
    pyspy_native: bool = False  # dump native (C/C++) frames too
    flight_recorder: bool = False  # a restart turns torch's flight recorder and its dump pipe on

    def __post_init__(self) -> None:
        if self.restart_log_mode not in LOG_MODES:
            raise ValueError(f"restart_log_mode must be one of {', '.join(LOG_MODES)}, got {self.restart_log_mode!r}")
        for name in ("kill_grace_s", "kill_wait_s", "restart_gpu_wait_s"):
            value = getattr(self, name)
            if not 0 <= value <= 3600:
                raise ValueError(f"{name} must be within 0..3600 seconds, got {value!r}")
