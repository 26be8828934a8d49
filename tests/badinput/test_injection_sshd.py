"""Names, paths, regexes and env values carrying shell syntax reach a real sshd host as data.

Every payload tries to create the canary file (by `$()`, backticks, `;`, a newline, quotes
closing early...). Each is put in the config (host name, job name, `match` regex, log path,
output dir, env value) of a real Monitor watching a real sshd host, and in the spawn op's argv,
cwd and env (what a restart sends). The canary must never appear.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.monitor import Monitor
from tests.core.helpers import host_rec, settings_for, wait_for


WRAPPERS = ["$(touch {c})", "`touch {c}`", ";touch {c};", "\ntouch {c}\n", "'$(touch {c})'", "\"`touch {c}`\"",
            "'; touch {c}; '", "\"; touch {c}; \"", "| touch {c}", "&& touch {c}", "$({{touch,{c}}})", "\\$(touch {c})",
            "x' ; touch {c} #", "${{IFS}}touch${{IFS}}{c}"]


def payloads(canary: str) -> list[str]:
    fixed = [w.format(c=canary) for w in WRAPPERS]
    # shell openers and closers around the command, every pair of them (repeatable, unlike random draws)
    mixes = ["".join(p) + f"touch {canary}" + "".join(q)
             for p, q in itertools.islice(itertools.product(["'", '"', "`", "$(", ";", "\n"], repeat=2), 36)]
    return fixed + mixes


async def test_hostile_config_values_never_run_on_the_host(sshd_factory, ssh_env, tmp_path):
    (a,) = sshd_factory(1)
    canary = tmp_path / "canary"
    values = payloads(str(canary))
    jobs = []
    for i, v in enumerate(values):
        jobs.append({"name": f"job{i}{v}", "host": a.name, "match": f"nothing-runs-{i}|{re.escape(v)}",
                     "log": str(tmp_path / f"log{i}{v}"), "output_dir": str(tmp_path / f"out{i}{v}")})
    hosts = [{"name": a.name, "ssh": a.name, "gpu_source": "nvidia-smi",
              "env": {f"GPUWATCH_V{i}": v for i, v in enumerate(values) if "\n" not in v}}]
    try:
        cfg = parse_config({"settings": settings_for(ssh_env), "hosts": hosts, "jobs": jobs}, "t.toml")
    except ConfigError as exc:  # a regex that does not compile is refused with its key: try the rest
        pytest.fail(f"hostile but valid values were refused: {exc}")
    monitor = Monitor(cfg)
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, a.name).state == "connected", 15, what="connected")
        await asyncio.sleep(1.5)  # several samples with every want (tails, dirs, matches) in force
        refusals: list[str] = []
        started: list[tuple[str, dict]] = []  # (payload, spawn's reply)
        # the spawn op (what a restart sends): argv, cwd and env are data, never a shell line
        for i, v in enumerate(values):
            args = {"argv": ["/bin/echo", v], "cwd": str(tmp_path), "env": {"PATH": "/usr/bin:/bin", "X": v},
                    "stdout": str(tmp_path / f"spawn{i}.log"), "log_mode": "append", "marker": v[:40]}
            try:
                started.append((v, await monitor.request(a.name, "spawn", args, timeout=10)))
            except Exception as exc:  # refusing a value is fine; running it is not
                assert "Traceback" not in str(exc)
                refusals.append(str(exc))
        # spawn returns once the job started, not once it ended: read each file only after the
        # wrapper recorded its exit, from the path the reply names
        ended = [await wait_for_run_end(monitor, a.name, reply["status_file"]) for _, reply in started]
        assert host_rec(monitor, a.name).state == "connected"
    finally:
        await monitor.stop()
    assert not canary.exists(), f"an injected command ran: {canary}"
    assert not refusals or all("Traceback" not in r for r in refusals)
    assert len(started) == len(values), refusals  # every payload is valid data: none is refused
    wrong = []
    for (v, reply), record in zip(started, ended):
        # the wrapper's marker line (whitespace folded to one line), then echo's argv[1] as it was
        expected = (" ".join(v[:40].split()) + "\n" + v + "\n").encode()
        written = Path(reply["stdout"]).read_bytes()
        if record.get("exit_code") != 0 or written != expected:
            wrong.append((v, record.get("exit_code"), written))
    assert not wrong, f"{len(wrong)} of {len(started)} spawned echoes did not write their payload literally: {wrong[:3]}"
    print(f"\n{len(values)} payloads x (job name, match, log path, output dir, env, spawn argv/cwd/env): "
          f"no canary; {len(started)} spawned echoes wrote their payload literally")


async def wait_for_run_end(monitor, host: str, status_file: str, timeout: float = 10.0) -> dict:
    """The wrapper's run record once the job ended (run_status reports running=false)."""
    deadline = time.monotonic() + timeout
    while True:
        record = await monitor.request(host, "run_status", {"status_file": status_file}, timeout=10)
        if not record.get("running"):
            return record
        assert time.monotonic() < deadline, f"the spawned echo still runs after {timeout}s: {record}"
        await asyncio.sleep(0.05)
