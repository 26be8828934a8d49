"""The probe's /proc facts, read from real processes: children, zombies, stdout targets, -u."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv


def _sample_for(probe, pid):
    frame = probe.sample()
    return next((p for p in frame["procs"] if p["pid"] == pid), None), frame


def test_short_lived_children_of_a_worker_thread_are_seen(probe_ns, spawn):
    # Like an inductor compile worker: compilers run briefly, started from a non-main thread.
    worker = spawn(
        "import subprocess,threading,time\n"
        "def run():\n"
        "    while True: subprocess.run(['sleep', '0.3'])\n"
        "threading.Thread(target=run, daemon=True).start(); time.sleep(60)"
    )
    time.sleep(0.3)
    probe = probe_ns["Probe"]({"interval": 1})
    probe.wants.pids = {worker.pid}
    probe.walk.scan(time.time())
    seen = 0
    for _ in range(5):
        info, _ = _sample_for(probe, worker.pid)
        seen += any(c["name"] == "sleep" for c in info["children"])
        time.sleep(0.2)
    assert seen >= 4  # a 5 s /proc scan alone would see it at most once


def test_a_zombie_is_reported_gone(probe_ns, spawn):
    # The parent never reaps its child: the child stays a zombie.
    parent = spawn("import os,time\npid=os.fork()\nif pid==0: os._exit(3)\nprint(pid,flush=True); time.sleep(60)",
                   stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(0.2)
    assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    probe = probe_ns["Probe"]({"interval": 1})
    probe.wants.pids = {child, parent.pid}
    info, frame = _sample_for(probe, child)
    assert info is None
    parent_info = next(p for p in frame["procs"] if p["pid"] == parent.pid)
    assert all(c["pid"] != child for c in parent_info["children"])


def test_stdout_target_and_buffering(probe_ns, spawn, tmp_path):
    log = tmp_path / "train.log"
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(log, "ab") as out:
        buffered = spawn("import time; time.sleep(60)", stdout=out, stderr=subprocess.STDOUT, env=plain)
        dash_u = spawn("import time; time.sleep(60)", "-u", stdout=out, env=plain)
        env = dict(plain, PYTHONUNBUFFERED="1")
        by_env = spawn("import time; time.sleep(60)", stdout=subprocess.PIPE, env=env)
    time.sleep(0.3)
    probe = probe_ns["Probe"]({"interval": 1})
    probe.wants.pids = {buffered.pid, dash_u.pid, by_env.pid}
    frame = probe.sample()
    procs = {p["pid"]: p for p in frame["procs"]}
    b = procs[buffered.pid]
    assert b["stdout"]["kind"] == "file" and b["stdout"]["path"] == str(log)
    assert b["stdout"]["append"] is True
    assert b["unbuffered"] is False and b["is_python"] is True
    assert procs[dash_u.pid]["unbuffered"] is True and procs[dash_u.pid]["unbuffered_reason"] == "-u"
    assert procs[by_env.pid]["stdout"]["kind"] == "pipe"
    assert procs[by_env.pid]["unbuffered_reason"] == "PYTHONUNBUFFERED=1"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["python3", "train.py", "-u"], False),  # -u after the script belongs to the script
        (["python3", "-u", "train.py"], True),
        (["python3", "-Bu", "train.py"], True),
        (["python3", "-W", "ignore", "-u", "train.py"], True),
        (["python3", "-m", "torch.distributed.run", "-u"], False),
        (["python3", "-c", "print(1)", "-u"], False),
    ],
)
def test_dash_u_is_read_like_python_reads_it(probe_ns, argv, expected, probe_mod):
    assert probe_mod("process_facts").python_unbuffered(argv, {})[0] is expected


def test_nvidia_smi_streams_die_with_a_killed_probe(tmp_path):
    from tests.support.fake_nvidia_smi import install_fake_nvidia_smi

    bindir = tmp_path / "bin"
    bindir.mkdir()
    install_fake_nvidia_smi(bindir)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    env.pop("GPUWATCH_FAKE_SMI", None)
    probe = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        probe.stdin.write(build_payload({"interval": 0.2, "gpu_source": "nvidia-smi"}))
        probe.stdin.flush()
        hello = json.loads(probe.stdout.readline())
        assert hello["gpu_source"] == "nvidia-smi"
        streams = psutil.Process(probe.pid).children()
        assert len(streams) == 2
    finally:
        probe.send_signal(signal.SIGKILL)  # no chance to clean up
        probe.wait()
    gone, alive = psutil.wait_procs(streams, timeout=5)
    for proc in alive:
        proc.kill()
    assert alive == []
