"""`[actions] flight_recorder = true`: a restart with -u turns torch's flight recorder and its dump pipe on (a
real process's captured facts, as the probe reads them), keeping what the job set itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpuwatch_tui.actions.restart import build_restart
from gpuwatch_tui.actions.settings import ActionSettings
from gpuwatch_tui.config import parse_config
from tests.actions.pyspy_helpers import PROBE_DIR, start_ticks

sys.path.insert(0, str(PROBE_DIR))
import ops_spawn  # noqa: E402  - the probe module, as shipped


def captured_of(env: dict) -> dict:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        # Popen may return while exec is still setting up the new image: its argv is empty until then.
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{p.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        return ops_spawn.op_capture({"pid": p.pid, "start_ticks": start_ticks(p.pid)})
    finally:
        p.kill()
        p.wait()


def test_restart_turns_the_recorder_on_and_keeps_the_jobs_own_values():
    captured = captured_of(dict(os.environ, TORCH_FR_BUFFER_SIZE="500"))
    plan = build_restart(captured, host="h", job="train.py", now=0.0, flight_recorder=True)
    assert plan.env["TORCH_FR_BUFFER_SIZE"] == "500"  # the job's own
    pipe, dump = plan.env["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"], plan.env["TORCH_FR_DUMP_TEMP_FILE"]
    assert pipe.startswith("/tmp/gpuwatch_fr_") and pipe.endswith("_pipe_") and dump.endswith("_dump_")
    off = build_restart(captured, host="h", job="train.py", now=0.0)
    assert "TORCH_NCCL_DEBUG_INFO_PIPE_FILE" not in off.env


def test_config_switch():
    cfg = parse_config({"hosts": [{"name": "a", "local": True}], "actions": {"flight_recorder": True}}, "x.toml")
    assert cfg.actions.flight_recorder is True and ActionSettings().flight_recorder is False
