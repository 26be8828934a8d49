"""A hang named by the job's own rhythm, at the default stall_after (5 minutes): a real job that printed a
step every 2 s and then blocked on a lock (CPU flat, its GPU held idle) is `stalled` about a minute after its
last line, with the rhythm in numbers as evidence; a job loading checkpoint shards beside it, quiet as long,
is never called stalled. Real sshd host, real processes, a real `gpuwatch watch --json`."""

from __future__ import annotations

import re
import time

import pytest

from .harness import Watch, launch, write_config
from .test_job_phases import gpu_scenario

pytestmark = [pytest.mark.ssh, pytest.mark.e2e, pytest.mark.slow]

RHYTHM = re.compile(r"^last step (.+) ago; usually every (\d+\.\d) s \(median of (\d+)\)$")


def test_a_fast_stepping_job_that_blocks_is_stalled_within_a_minute_or_so(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=2, phase="idle", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host], stall_after="5m", sample_interval=1.0)
    watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
    runs = {}
    try:
        watch.wait_for(lambda w: w.host(host.name).get("state") == "connected", "the host connected", 30)
        runs["hang"] = launch(ssh_env, host, tmp_path / "hang", "hang.py", "--steps", "14", "--step-time", "2")
        # Loading 2 shards, 80 s each: CPU busy and quiet between its bar's frames longer than the
        # hang's limit (a job with no rhythm of its own: the ceiling applies).
        runs["loading"] = launch(ssh_env, host, tmp_path / "loading", "loading.py", "--shards", "2",
                                 "--shard-mb", "4", "--steps", "4", "--step-time", "80")
        gpu_scenario(host, {0: ("held", runs["hang"].pid), 1: ("held", runs["loading"].pid)})

        def track(key):
            return watch.job_of(runs[key].pid)

        log = runs["hang"].log
        watch.wait_for(lambda w: log.exists() and b"step 14/" in log.read_bytes(), "the hang's last step", 120)
        last_line_at = time.monotonic()
        watch.wait_for(lambda w: track("hang") is not None and track("hang").phase == "stalled",
                       "the hang stalled", 150)
        took = time.monotonic() - last_line_at
        hang = track("hang")
        report = watch.describe()
        print(f"hang -> stalled {took:.0f}s after its last line\n{report}")
        assert hang.detail == "no-progress", report
        # max(60 s, 5 x 2 s) plus the settling samples, and far from the 5 minute ceiling
        assert 55 <= took <= 120, report
        rhythm = [m for m in (RHYTHM.match(e) for e in hang.last["evidence"]) if m]
        assert rhythm, report
        assert 1.5 <= float(rhythm[0].group(2)) <= 3.0 and int(rhythm[0].group(3)) >= 5, report
        assert runs["hang"].alive()
        assert not track("loading").has("stalled"), report
    finally:
        watch.stop()
        for r in runs.values():
            r.stop()
