"""Nothing a host controls reaches the terminal raw from the headless verbs.

A real job on a real sshd host: its script is named with OSC 2 and its argv holds OSC 52, OSC 8, DCS,
C1, RLO, a zalgo run and a byte that is not UTF-8; the fake nvidia-smi names the GPU with escapes. The
CLI runs as a subprocess on a strict UTF-8 stdout (PYTHONIOENCODING=utf-8:strict): `status`, the kill
plan (refused without a terminal, and done with --yes), and the restart plan (refused without --yes).
Every byte on stdout and stderr is checked; the hostile text is shown (as `␛]2;PWNED␇`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

from tests.actions.test_cli_actions_sshd import audit, env_for, gpuwatch, write_config  # noqa: E402
from tests.core.helpers import host_entry, settings_for, write_toml  # noqa: E402

from .hostile_strings import C1, DCS, OSC2, OSC8, OSC52, RLO, ZALGO, raw_bytes_found  # noqa: E402

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def run_strict(args, tmp_path, timeout=90):
    env = env_for(tmp_path)
    env["PYTHONIOENCODING"] = "utf-8:strict"
    return subprocess.run(gpuwatch(*args), capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=timeout)


def check(result, what: str) -> str:
    for name, data in (("stdout", result.stdout), ("stderr", result.stderr)):
        found = raw_bytes_found(data)
        assert not found, f"{what}: raw {found[:5]} on {name}: {data[:600]!r}"
        assert b"Traceback" not in data, f"{what}: {data.decode(errors='replace')[-1500:]}"
    return result.stdout.decode() + result.stderr.decode()


@pytest.fixture
def hostile_job(tmp_path):
    script = Path(os.fsencode(str(tmp_path)) .decode() + "/t" + OSC2 + ".py")
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    argv = [PY, str(script), "hostile-marker", OSC52, OSC8, DCS, C1, RLO, ZALGO]
    argv_bytes = [os.fsencode(a) for a in argv] + [b"bad\xffbyte"]
    p = subprocess.Popen(argv_bytes, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    yield p
    if p.poll() is None:
        p.kill()
    p.wait(5)


@pytest.mark.ssh
def test_status_and_plans_show_hostile_text_visibly_on_a_strict_utf8_terminal(sshd_factory, ssh_env, tmp_path,
                                                                              hostile_job):
    (host,) = sshd_factory(1)
    host.set_scenario(gpus=1, phase="training", fields={"name": "NVIDIA \x1b]2;GPU\x07 H200 \u202eX"},
                      processes=[{"gpu": 0, "pid": hostile_job.pid, "used_memory_mib": 1000}])
    cfg = str(write_config(tmp_path / "hosts.toml", ssh_env, host, "hostile-marker"))

    out = check(run_strict(["status", "--config", cfg], tmp_path), "status")
    assert "sleeper" in out and "␛]2;GPU␇" in out, out

    refused = run_strict(["kill", host.name, "sleeper", "--config", cfg], tmp_path)
    check(refused, "kill plan")
    assert refused.returncode == 2 and hostile_job.poll() is None

    refused = run_strict(["restart", host.name, "sleeper", "--config", cfg], tmp_path)
    out = check(refused, "restart plan")
    assert refused.returncode == 2 and hostile_job.poll() is None, out

    done = run_strict(["kill", host.name, "sleeper", "--yes", "--config", cfg], tmp_path)
    out = check(done, "kill --yes")
    assert done.returncode == 0, out
    # The plan shows the argv with the hostile words visible (the plan cuts a long command line).
    assert "t␛]2;PWNED␇.py" in out and "␛]52;c;cHduZWQ=␇" in out, out
    assert hostile_job.wait(10) is not None
    assert audit(tmp_path)[-1]["result"] == "done"


@pytest.mark.ssh
def test_the_restart_plan_of_a_non_utf8_argv_prints_on_a_strict_terminal_and_asks(sshd_factory, ssh_env, tmp_path):
    """The plan is printed (the bad byte as \\xff, the escapes visible) and the prompt is reached; declined."""
    import pty

    script = tmp_path / "plain_job.py"
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    job = subprocess.Popen([os.fsencode(PY), os.fsencode(str(script)), b"bad\xffbyte", os.fsencode(OSC52),
                            b"utf8-marker"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           start_new_session=True)
    master, slave = pty.openpty()
    try:
        (host,) = sshd_factory(1)
        cfg = str(write_config(tmp_path / "hosts.toml", ssh_env, host, "utf8-marker"))
        os.write(master, b"n\n")  # waits in the pty until the prompt reads it
        env = env_for(tmp_path)
        env["PYTHONIOENCODING"] = "utf-8:strict"
        r = subprocess.run(gpuwatch("restart", host.name, "sleeper", "--config", cfg), capture_output=True, env=env,
                           stdin=slave, timeout=90)
        out = check(r, "restart plan")
        assert "Proceed? [y/N]" in out and "not confirmed" in out, out
        assert r.returncode == 2 and job.poll() is None
        assert "bad\\xffbyte" in out and "␛]52;c;cHduZWQ=␇" in out, out
    finally:
        os.close(master)
        os.close(slave)
        job.kill()
        job.wait(5)


@pytest.mark.ssh
def test_a_probe_stderr_with_escapes_is_shown_visibly_as_the_host_error(sshd_factory, ssh_env, tmp_path):
    (host,) = sshd_factory(1)
    python = tmp_path / "bad-python"
    python.write_text("#!/bin/sh\nprintf 'boom \\033]2;PWNED\\007 \\342\\200\\256evil\\n' >&2\nexit 1\n")
    python.chmod(0o755)
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), [host_entry(host, python=str(python))])
    r = run_strict(["status", "--config", str(cfg)], tmp_path)
    out = check(r, "status with a failing probe")
    assert r.returncode == 3 and "boom ␛]2;PWNED␇ <U+202E>evil" in out, out
