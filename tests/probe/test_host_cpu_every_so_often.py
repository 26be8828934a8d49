"""The host's CPU busy % is a HOST_SLOW_READ_S average (as `vmstat 5`), repeated by the frames in between:
real /proc/stat, real samples."""

from __future__ import annotations

import time


def test_host_cpu_is_read_once_per_interval_and_repeated_in_between(probe_ns, probe_mod):
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    shared, reads = probe_mod("host_facts").PROC_STAT, []
    kept = shared.read
    shared.read = lambda: reads.append(1) or kept()
    assert probe.sample()["cpu_pct"] is None  # a first read has nothing to compare with ...
    time.sleep(0.2)
    second = probe.sample()["cpu_pct"]
    assert isinstance(second, float) and 0.0 <= second <= 100.0  # ... the next sample gives a figure
    assert len(reads) == 2
    for _ in range(3):
        assert probe.sample()["cpu_pct"] == second  # repeated, not read again
    assert len(reads) == 2
    probe.host.cpu_pct.every = 0.2  # the interval's role, in a test of a second
    time.sleep(0.25)
    probe.sample()
    assert len(reads) == 3  # read again once the interval has passed
    assert probe_mod("host_facts").HOST_SLOW_READ_S == 5.0 and probe.host.cpu_pct.read is not None
