"""A probe stream that breaks its contract gets a host state with a reason; the other host is unaffected.

Two real sshd hosts; the hostile one's configured `python` is a script that ignores the probe it is sent
and prints what a broken or hostile host would: a flood of lines that are not JSON, or a valid hello and
then only truncated frames. The good host keeps sampling throughout.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.transport.link import MAX_JUNK_LINES
from tests.core.helpers import host_entry, host_rec, make_config, wait_for

pytestmark = pytest.mark.ssh

HELLO = {"type": "hello", "v": 1, "pid": 1, "python": "3", "hostname": "h", "gpu_source": "none", "gpu_error": None,
         "cpu_count": 1, "boot_time": 0, "clk_tck": 100, "ops": [], "op_errors": {}, "fact_deltas": False}


def fake_python(path, body: str):
    """A `python` that reads nothing we send and prints `body`'s output (sh)."""
    path.write_text("#!/bin/sh\nexec 0</dev/null\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


async def run_pair(ssh_env, good, bad, python: str, predicate, what: str, timeout: float = 40):
    cfg = make_config(ssh_env, [host_entry(good), host_entry(bad, python=python)])
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, good.name).state == "connected", 20, what="good host connected")
        await wait_for(lambda: predicate(host_rec(monitor, bad.name)), timeout, what=what)
        rec = host_rec(monitor, bad.name)
        good_before = host_rec(monitor, good.name).last_sample_time
        await wait_for(lambda: host_rec(monitor, good.name).last_sample_time != good_before, 10,
                       what="the good host still sampling")
        assert host_rec(monitor, good.name).state == "connected"
        return rec.state, rec.error or ""
    finally:
        await monitor.stop()


async def test_a_garbage_flood_is_a_probe_failure_with_a_reason(sshd_factory, ssh_env, tmp_path):
    good, bad = sshd_factory(2)
    python = fake_python(tmp_path / "garbage-python", "while :; do echo 'not a frame \x1b]2;x\x07 garbage'; done\n")
    state, error = await run_pair(ssh_env, good, bad, python,
                                  lambda r: r.state == "probe-failed" and "not frames" in (r.error or ""),
                                  "probe-failed with a reason")
    assert state == "probe-failed"
    assert f"{MAX_JUNK_LINES + 1} lines" in error and "not JSON" in error, error


async def test_a_hello_then_only_truncated_frames_goes_stale_then_fails(sshd_factory, ssh_env, tmp_path):
    good, bad = sshd_factory(2)
    hello = json.dumps(HELLO)
    python = fake_python(tmp_path / "truncating-python",
                         f"echo '{hello}'\nwhile :; do echo '{{\"type\":\"sample\",\"t\":1'; sleep 0.02; done\n")
    state, error = await run_pair(ssh_env, good, bad, python,
                                  lambda r: r.state == "stale" and "hello" in (r.error or ""),
                                  "stale after the hello")
    assert "sent no sample" in error, error
    cfg_state = await run_pair(ssh_env, good, bad, python,
                               lambda r: r.state == "probe-failed" and "not frames" in (r.error or ""),
                               "probe-failed once the truncated frames pass the bound")
    assert cfg_state[0] == "probe-failed"
