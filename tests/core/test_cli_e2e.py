"""`gpuwatch status` / `gpuwatch watch --json` as real subprocesses against real sshd hosts."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time

import psutil
import pytest

from .helpers import host_entry, probes_on, settings_for, write_toml

HOST_KEYS = {"name", "state", "error", "gpu_source", "last_sample_age_s", "gpus"}
GPU_KEYS = {"index", "uuid", "name", "util_pct", "mem_used_mib", "mem_total_mib", "temp_c", "power_w",
            "power_limit_w", "sm_clock_mhz", "processes"}
PROC_KEYS = {"pid", "mem_used_mib"}


def cli_env(tmp_path) -> dict:
    env = dict(os.environ)
    env.pop("GPUWATCH_CONFIG", None)
    env.pop("SSH_AUTH_SOCK", None)
    home = tmp_path / "clihome"
    home.mkdir(exist_ok=True)
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return env


def gpuwatch(*args):
    return [sys.executable, "-m", "gpuwatch_tui.cli", *args]


def check_schema(snap: dict) -> None:
    """Fails if any key of the documented schema disappears (new keys are fine)."""
    assert snap["version"] == 1
    assert isinstance(snap["time"], (int, float)) and abs(snap["time"] - time.time()) < 120
    assert isinstance(snap["jobs"], list)
    assert snap["hosts"], "no hosts"
    for h in snap["hosts"]:
        assert HOST_KEYS <= set(h), HOST_KEYS - set(h)
        assert isinstance(h["gpus"], list)
        for g in h["gpus"]:
            assert GPU_KEYS <= set(g), GPU_KEYS - set(g)
            assert isinstance(g["index"], int) and isinstance(g["uuid"], str) and isinstance(g["name"], str)
            for k in GPU_KEYS - {"index", "uuid", "name", "processes"}:
                assert g[k] is None or isinstance(g[k], (int, float)), (k, g[k])
            for p in g["processes"]:
                assert PROC_KEYS <= set(p), PROC_KEYS - set(p)
                assert isinstance(p["pid"], int)


def test_status_json_schema_and_no_probe_left(sshd_factory, ssh_env, tmp_path, ssh_keys):
    a, b = sshd_factory(2)
    a.set_scenario(gpus=2, phase="training", uuid_prefix="GPU-a",
                   processes=[{"gpu": 0, "pid": 31337, "used_memory_mib": 80000}])
    hosts = [host_entry(a), host_entry(b),
             {"name": "denied", "ssh": f"{a.user}@{a.address}:{a.port}", "identity_file": str(ssh_keys.wrong_private_key)},
             {"name": "me", "local": True}]
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), hosts)
    t0 = time.monotonic()
    r = subprocess.run(gpuwatch("status", "--json", "--config", str(cfg)), capture_output=True, text=True,
                       env=cli_env(tmp_path), timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 3, r.stderr  # "denied" is not connected
    # status returned: no probe (nor its nvidia-smi) is left on any host
    for h in (a, b):
        assert not probes_on(h), probes_on(h)
        assert not [p for p in h.user_processes() if p.name() != "sshd"], h.user_processes()
    assert "Traceback" not in r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1
    snap = json.loads(lines[0])
    check_schema(snap)
    by = {h["name"]: h for h in snap["hosts"]}
    assert [h["name"] for h in snap["hosts"]] == ["host2", "host3", "denied", "me"]
    assert by["host2"]["state"] == "connected" and len(by["host2"]["gpus"]) == 2
    assert by["host2"]["gpus"][0]["processes"] == [{"pid": 31337, "mem_used_mib": 80000}]
    assert by["host2"]["gpus"][0]["util_pct"] >= 90
    assert by["host3"]["state"] == "connected" and len(by["host3"]["gpus"]) == 1
    assert by["denied"]["state"] == "auth-failed" and by["denied"]["gpus"] == []
    assert by["denied"]["last_sample_age_s"] is None
    assert by["me"]["state"] == "connected"
    assert took < 15


def test_status_table_says_why(sshd_factory, ssh_env, tmp_path, ssh_keys):
    (a,) = sshd_factory(1)
    hosts = [host_entry(a),
             {"name": "denied", "ssh": f"{a.user}@{a.address}:{a.port}", "identity_file": str(ssh_keys.wrong_private_key)}]
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), hosts)
    r = subprocess.run(gpuwatch("status", "--config", str(cfg)), capture_output=True, text=True,
                       env=cli_env(tmp_path), timeout=60)
    assert r.returncode == 3, r.stderr  # "denied" is not connected
    out = r.stdout
    assert "HOST" in out and "STATE" in out
    host_line = next(line for line in out.splitlines() if line.startswith("host2 "))
    assert "connected" in host_line and "nvidia-smi" in host_line
    denied = next(line for line in out.splitlines() if line.startswith("denied "))
    assert "auth-failed" in denied and "authentication" in denied
    assert "NVIDIA H200" in out
    assert not probes_on(a)


def test_status_without_config_reports_this_machine(tmp_path):
    r = subprocess.run(gpuwatch("status", "--json"), capture_output=True, text=True, env=cli_env(tmp_path),
                       timeout=60)
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    check_schema(snap)
    (host,) = snap["hosts"]
    assert host["state"] == "connected"
    assert host["name"] == os.uname().nodename or host["name"]
    assert host["last_sample_age_s"] is not None and host["last_sample_age_s"] < 5


def test_watch_json_one_object_per_interval_stops_on_sigint(sshd_factory, ssh_env, tmp_path):
    (a,) = sshd_factory(1)
    interval = 0.3
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env, sample_interval=interval), [host_entry(a)])
    proc = subprocess.Popen(gpuwatch("watch", "--json", "--config", str(cfg)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(tmp_path))
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        lines, stamps, buf = [], [], b""
        deadline = time.monotonic() + 20
        while len(lines) < 8 and time.monotonic() < deadline:
            if not sel.select(timeout=1):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, proc.stderr.read()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                lines.append(json.loads(line))
                stamps.append(time.monotonic())
        assert len(lines) >= 8
        assert probes_on(a)  # streaming while watch runs
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(10)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    for snap in lines:
        check_schema(snap)
    connected = [s for s in lines if s["hosts"][0]["state"] == "connected"]
    assert len(connected) >= 6
    assert all(s["hosts"][0]["gpus"] for s in connected)
    # one object per interval: steady spacing once running, and sample times move on
    gaps = sorted(b - a_ for a_, b in zip(stamps[2:], stamps[3:]))
    assert 0.7 * interval < gaps[len(gaps) // 2] < 1.5 * interval, gaps
    assert gaps[-1] < 4 * interval, gaps
    times = [s["time"] for s in lines]
    assert times == sorted(times) and len(set(times)) == len(times)
    ages = [s["hosts"][0]["last_sample_age_s"] for s in connected]
    assert max(ages) < 3 * interval
    # nothing left behind on the host after SIGINT
    deadline = time.monotonic() + 5
    while probes_on(a) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not probes_on(a)


def test_watch_killed_outright_leaves_no_probe(sshd_factory, ssh_env, tmp_path):
    """SIGKILL gives gpuwatch no chance to clean up: the probes must notice on their own."""
    (a,) = sshd_factory(1)
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), [host_entry(a), {"name": "me", "local": True}])
    proc = subprocess.Popen(gpuwatch("watch", "--json", "--config", str(cfg)), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=cli_env(tmp_path))
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            snap = json.loads(proc.stdout.readline())
            if all(h["state"] == "connected" for h in snap["hosts"]):
                break
        assert all(h["state"] == "connected" for h in snap["hosts"]), snap
        local_probes = [p for p in psutil.Process(proc.pid).children(recursive=True)
                        if "zlib.decompress" in " ".join(p.cmdline())]
        assert len(local_probes) == 1 and probes_on(a)
        remote = probes_on(a)
    finally:
        proc.kill()
        proc.wait(5)
    gone, alive = psutil.wait_procs(local_probes + remote, timeout=5)
    assert not alive, alive
    deadline = time.monotonic() + 5
    while probes_on(a) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not probes_on(a)


def test_status_warns_about_unknown_keys_and_runs(tmp_path):
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[settings]\nsample_interval = 0.2\nsampel_interval = 5\n\n[[hosts]]\nname = "me"\nlocal = true\ncolour = "red"\n')
    r = subprocess.run(gpuwatch("status", "--json", "--config", str(cfg)), capture_output=True, text=True,
                       env=cli_env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"gpuwatch: warning: {cfg}: settings.sampel_interval: unknown key, ignored" in r.stderr
    assert f"gpuwatch: warning: {cfg}: hosts[0].colour: unknown key, ignored" in r.stderr
    snap = json.loads(r.stdout)
    assert [h["name"] for h in snap["hosts"]] == ["me"] and snap["hosts"][0]["state"] == "connected"


def test_status_interrupted_exits_quietly_and_cleans_up(sshd_factory, ssh_env, tmp_path):
    a, frozen = sshd_factory(2)
    frozen.freeze()  # keeps status waiting in its window
    try:
        cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env, connect_timeout=20),
                         [host_entry(a), host_entry(frozen)])
        # Ctrl-C as a terminal sends it: a suite started in the background of a non-interactive shell
        # has SIGINT ignored, and a child would inherit that (Python then never raises KeyboardInterrupt).
        proc = subprocess.Popen(gpuwatch("status", "--json", "--config", str(cfg)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(tmp_path),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 15
            while not probes_on(a) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert probes_on(a)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        assert b"Traceback" not in err and out == b""
        deadline = time.monotonic() + 5
        while probes_on(a) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not probes_on(a)
    finally:
        frozen.thaw()


# ---- exit codes and the command line a newcomer types


def _run(tmp_path, *args, timeout=60):
    return subprocess.run(gpuwatch(*args), capture_output=True, text=True, env=cli_env(tmp_path), timeout=timeout)


def test_status_exits_3_when_every_host_is_unreachable_and_0_when_all_connect(sshd_factory, ssh_env, tmp_path):
    (a,) = sshd_factory(1)
    a.stop()  # nothing listens on its port any more: connection refused
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env, connect_timeout=3), [host_entry(a)])
    r = _run(tmp_path, "status", "--json", "--config", str(cfg))
    assert r.returncode == 3, r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    assert host["state"] != "connected"
    r = _run(tmp_path, "status", "--config", str(cfg))
    assert r.returncode == 3 and host["name"] in r.stdout
    local = write_toml(tmp_path / "local.toml", settings_for(ssh_env), [{"name": "me", "local": True}])
    assert _run(tmp_path, "status", "--json", "--config", str(local)).returncode == 0


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "-inf", "86400", "soon"])
def test_status_window_rejects_values_that_mean_nothing(tmp_path, value):
    r = _run(tmp_path, "status", f"--window={value}")
    assert r.returncode == 2 and r.stdout == ""
    assert "argument --window: expected seconds" in r.stderr and "Traceback" not in r.stderr


def test_watch_count_zero_is_an_error_and_json_flag_is_optional(tmp_path):
    r = _run(tmp_path, "watch", "--count", "0")
    assert r.returncode == 2 and "argument --count: expected 1 or more" in r.stderr
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[settings]\nsample_interval = 0.2\n\n[[hosts]]\nname = "me"\nlocal = true\n')
    for extra in ([], ["--json"]):
        r = _run(tmp_path, "watch", *extra, "--count", "2", "--config", str(cfg))
        assert r.returncode == 0, r.stderr
        lines = r.stdout.strip().splitlines()
        assert len(lines) == 2 and all(json.loads(line)["hosts"][0]["name"] == "me" for line in lines)


def test_every_verb_has_a_description_and_the_exit_codes(tmp_path):
    top = _run(tmp_path, "--help")
    assert top.returncode == 0 and "exit codes:" in top.stdout and "3    status: at least one host" in top.stdout
    for verb, words in (("status", "print one snapshot"), ("watch", "JSON lines is the only format")):
        r = _run(tmp_path, verb, "--help")
        assert r.returncode == 0 and words in " ".join(r.stdout.split()), r.stdout
        assert "exit codes:" in r.stdout


def test_short_version_flag(tmp_path):
    r = _run(tmp_path, "-V")
    assert r.returncode == 0 and r.stdout.startswith("gpuwatch ")
    assert r.stdout == _run(tmp_path, "--version").stdout


@pytest.mark.parametrize("args", [["--theme", "nope"], ["--theme", "nope", "status"], ["status", "--theme", "nope"],
                                  ["watch", "--theme", "nope"], ["--theme", "nope", "watch", "--count", "1"]])
def test_unknown_theme_is_an_error_in_every_verb_before_anything_starts(tmp_path, args):
    # The config does not exist: the theme is checked first, so that is the error reported.
    r = _run(tmp_path, *args, "--config" if "status" in args or "watch" in args else "--readonly",
             *([str(tmp_path / "missing.toml")] if "status" in args or "watch" in args else []))
    assert r.returncode == 2, r
    assert r.stdout == ""
    assert r.stderr.strip() == ("gpuwatch: unknown theme 'nope'; available: "
                                "gpuwatch-dark, gpuwatch-high-contrast, gpuwatch-light")


def test_a_known_theme_is_accepted_by_the_headless_verbs(tmp_path):
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[settings]\nsample_interval = 0.2\n\n[[hosts]]\nname = "me"\nlocal = true\n')
    r = _run(tmp_path, "status", "--theme", "gpuwatch-light", "--json", "--config", str(cfg))
    assert r.returncode == 0, r.stderr


def test_status_shows_a_match_that_takes_other_sessions_processes(tmp_path):
    marker = f"gpuwatch-broad-{os.getpid()}-{time.monotonic_ns()}"
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker], start_new_session=True)
             for _ in range(2)]
    deadline = time.monotonic() + 10
    while not all(marker.encode() in open(f"/proc/{p.pid}/cmdline", "rb").read() for p in procs):
        assert time.monotonic() < deadline  # exec'd: a probe must not see the pre-exec fork first
        time.sleep(0.02)
    try:
        cfg = tmp_path / "hosts.toml"
        cfg.write_text('[settings]\nsample_interval = 0.2\n\n[[hosts]]\nname = "me"\nlocal = true\n\n'
                       f'[[jobs]]\nname = "mine"\nhost = "me"\nmatch = "{marker}"\n')
        r = _run(tmp_path, "status", "--json", "--config", str(cfg))
        assert r.returncode == 0, r.stderr
        jobs = [j for j in json.loads(r.stdout)["jobs"] if j["configured"]]
        assert jobs, r.stdout
        for job in jobs:  # each separate tree is a job (mine, mine#2): each says why
            assert job["evidence"][0].startswith(f"match '{marker}' is too broad: it matches 2 process trees in 2 sessions")
            assert all(f"{p.pid} (" in job["evidence"][0] for p in procs)
        table = _run(tmp_path, "status", "--config", str(cfg)).stdout
        assert "is too broad" in table
    finally:
        for p in procs:
            p.kill()
            p.wait()
