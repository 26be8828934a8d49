"""py-spy dumps of real blocked processes through the probe's ops, run in a separate "host" process
with the real py-spy binary: from PATH, uploaded into an empty cache, and as an unprivileged user."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuwatch_tui.actions.dump import DumpFailed, DumpTarget, dump_job, upload_pyspy
from gpuwatch_tui.actions.pyspy_binary import local_pyspy
from gpuwatch_tui.actions.stack_analysis import phase_hint
from tests.support.procs import stop_and_wait
from tests.actions.pyspy_helpers import (
    AS_NOBODY,
    OpHost,
    OpRefused,
    env_without_pyspy,
    proc_state,
    spawn_blocked,
    start_ticks,
    stop,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def blocked(tmp_path):
    started: list[subprocess.Popen] = []

    def make(kind: str) -> subprocess.Popen:
        proc = spawn_blocked(kind, tmp_path)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        stop(proc)


def env_with_pyspy() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(local_pyspy().path.parent), env.get("PATH", "")])
    return env


def target(proc: subprocess.Popen) -> DumpTarget:
    return DumpTarget(proc.pid, start_ticks(proc.pid))


async def test_lock_and_event_waits_dumped_classified_and_not_left_stopped(blocked, tmp_path):
    on_lock, on_event = blocked("lock"), blocked("event")
    async with OpHost(env_with_pyspy()) as host:
        report = await dump_job(host.request, [target(on_lock), target(on_event)], timeout_s=20,
                                host="127.0.0.1", job="blocked job", save_dir=tmp_path / "dumps")
    assert report.pyspy_source == "host"
    lock_dump, event_dump = report.process(on_lock.pid), report.process(on_event.pid)
    assert lock_dump.ok and event_dump.ok, (lock_dump.message, event_dump.message)
    # the lock: acquire is C, so the frame is the script's line, and the probe read its text
    top = lock_dump.main_thread.frames[0]
    assert top.short_filename == "blocked_lock.py" and top.line == 5 and top.source == "lock.acquire()"
    assert not lock_dump.main_thread.active
    assert [f.name for f in event_dump.main_thread.frames[:3]] == ["Condition.wait", "Event.wait", "wait_here"]
    assert report.analysis.of(on_lock.pid).kind == "lock"
    assert report.analysis.of(on_event.pid).kind == "lock"
    assert "Event.wait" in report.analysis.of(on_event.pid).why
    for proc in (on_lock, on_event):
        assert report.process(proc.pid).state_after != "T"
        assert proc_state(proc.pid) == "S"  # blocked, running on: not left stopped
    saved = json.loads(report.saved_to.read_text())
    assert report.saved_to.parent == tmp_path / "dumps"
    assert report.saved_to.name.startswith("127.0.0.1_blocked_job_") and report.saved_to.suffix == ".json"
    assert saved["analysis"]["job_kind"] == "lock" and len(saved["processes"]) == 2


async def test_native_frames_on_request_still_classify(blocked):
    on_lock, sleeping = blocked("lock"), blocked("sleep")
    async with OpHost(env_with_pyspy()) as host:
        report = await dump_job(host.request, [target(on_lock), target(sleeping)], native=True, save=False)
    lock_main = report.process(on_lock.pid).main_thread
    assert lock_main.frames[0].native and any(not f.native for f in lock_main.frames)
    assert report.analysis.of(on_lock.pid).kind == "lock"
    assert report.analysis.of(sleeping.pid).kind == "sleep"
    assert "time.sleep(1)" in report.analysis.of(sleeping.pid).why
    assert proc_state(on_lock.pid) == "S" and proc_state(sleeping.pid) == "S"


async def test_a_process_py_spy_leaves_stopped_is_continued(blocked, tmp_path):
    """py-spy killed on its timeout while it holds the target stopped: the op must SIGCONT it."""
    proc = blocked("sleep")
    async with OpHost(env_with_pyspy()) as host:
        # A "py-spy" that stops its target and hangs, as a py-spy killed mid-attach leaves things.
        fake = tmp_path / "stopper"
        fake.write_text("#!/bin/sh\nkill -STOP \"$4\"\nexec sleep 30\n")
        fake.chmod(0o755)
        reply = await host.request("pyspy_dump", {
            "targets": [{"pid": proc.pid, "start_ticks": start_ticks(proc.pid)}],
            "timeout_s": 1, "pyspy": str(fake)})
    (entry,) = reply["processes"]
    assert entry["ok"] is False and entry["code"] == "timeout"
    assert entry["resumed"] is True and "SIGCONT" in entry["note"]
    assert proc_state(proc.pid) == "S"


async def test_an_already_stopped_process_stays_stopped(blocked):
    proc = blocked("sleep")
    stop_and_wait(proc.pid)  # the stop lands asynchronously: the dump must see state T
    try:
        async with OpHost(env_with_pyspy()) as host:
            report = await dump_job(host.request, [target(proc)], timeout_s=10, save=False)
        (dump,) = report.processes
        assert dump.state_before == "T" and not dump.resumed
        assert not dump.ok and dump.error_code == "stopped" and "left stopped" in dump.message
        assert proc_state(proc.pid) == "T"  # a stop someone chose is theirs to undo
        assert report.analysis.of(proc.pid).kind == "stopped"
    finally:
        os.kill(proc.pid, signal.SIGCONT)


async def test_py_spy_absent_on_host_is_uploaded_in_chunks_then_dumps(blocked, tmp_path):
    proc = blocked("event")
    binary = local_pyspy()
    cache_home = tmp_path / "cache"
    async with OpHost(env_without_pyspy(cache_home)) as host:
        located = await host.request("pyspy_locate", {"sha256": binary.sha256, "name": binary.cache_name})
        assert located["path"] is None and located["cached"] is None and located["pyspy"] is None
        report = await dump_job(host.request, [target(proc)], timeout_s=20, save=False)
        assert report.pyspy_source == "uploaded"
        cached = cache_home / "gpuwatch" / "bin" / binary.cache_name
        assert report.pyspy == str(cached)
        assert cached.stat().st_mode & 0o777 == 0o755
        assert cached.read_bytes() == binary.path.read_bytes()
        assert [p.name for p in cached.parent.iterdir()] == [binary.cache_name]  # no part file left
        assert report.processes[0].ok and report.analysis.job_kind == "lock"
        # next time the cached copy is found by its checksum: no second upload
        again = await dump_job(host.request, [target(proc)], timeout_s=20, save=False)
        assert again.pyspy_source == "cache" and again.processes[0].ok


async def test_upload_refuses_wrong_checksum_and_names_outside_the_cache(tmp_path):
    binary = local_pyspy()
    cache_home = tmp_path / "cache"
    async with OpHost(env_without_pyspy(cache_home)) as host:
        chunk = base64.b64encode(b"#!/bin/sh\necho not py-spy\n").decode()
        await host.request("upload", {"name": binary.cache_name, "offset": 0, "data": chunk})
        with pytest.raises(OpRefused) as refused:
            await host.request("upload", {"name": binary.cache_name, "finish": True,
                                          "sha256": binary.sha256, "size": binary.size})
        assert refused.value.code == "checksum" and binary.sha256 in refused.value.message
        assert list((cache_home / "gpuwatch" / "bin").iterdir()) == []  # the bad part is gone
        for bad in ("../evil", "a/b", "..", ".hidden", "", "x" * 200):
            with pytest.raises(OpRefused) as refused:
                await host.request("upload", {"name": bad, "offset": 0, "data": chunk})
            assert refused.value.code == "bad-name"
        with pytest.raises(OpRefused) as refused:  # a chunk that skips ahead
            await host.request("upload", {"name": "p", "offset": 4096, "data": chunk})
        assert refused.value.code == "bad-offset"
        assert not (tmp_path / "evil").exists()
        # the whole path through dump.py: a corrupted copy of the binary is refused the same way
        corrupt = tmp_path / "py-spy"
        data = bytearray(binary.path.read_bytes())
        data[len(data) // 2] ^= 0xFF  # one flipped byte
        corrupt.write_bytes(bytes(data))
        bad_binary = type(binary)(corrupt, binary.sha256, binary.size, binary.machine)
        with pytest.raises(DumpFailed, match="checksum"):
            await upload_pyspy(host.request, bad_binary, chunk_bytes=3 * 1024 * 1024)


async def test_dump_refuses_a_reused_pid(blocked):
    proc = blocked("sleep")
    async with OpHost(env_with_pyspy()) as host:
        report = await dump_job(host.request, [DumpTarget(proc.pid, start_ticks(proc.pid) + 1)], save=False)
    (dump,) = report.processes
    assert not dump.ok and dump.error_code == "reused" and "refused" in dump.message


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
async def test_permission_denied_is_explained_in_words(blocked, tmp_path):
    proc = blocked("lock")  # owned by root; the "host" runs as nobody
    with tempfile.TemporaryDirectory(prefix="gpuwatch-nobody-") as shared:
        os.chmod(shared, 0o755)  # nobody must reach the binary; pytest's own tmp dirs are private
        pyspy_copy = Path(shared) / "py-spy"
        shutil.copy(local_pyspy().path, pyspy_copy)
        pyspy_copy.chmod(0o755)
        await _dump_as_nobody(proc, pyspy_copy, Path(shared))


async def _dump_as_nobody(proc, pyspy_copy: Path, home: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_CACHE_HOME": str(home / "nobody-cache")}
    async with OpHost(env, prefix=AS_NOBODY) as host:
        facts = await host.request("pyspy_locate", {})
        assert facts["uid"] == 65534 and facts["root"] is False and facts["cap_sys_ptrace"] is False
        reply = await host.request("pyspy_dump", {
            "targets": [{"pid": proc.pid, "start_ticks": start_ticks(proc.pid)}],
            "timeout_s": 10, "pyspy": str(pyspy_copy)})
    (entry,) = reply["processes"]
    assert entry["ok"] is False and entry["code"] == "permission"
    message = entry["message"]
    assert "Permission Denied" in entry["stderr"]  # py-spy's own words travel along
    assert "ptrace_scope" in message  # its value (or that there is none)
    assert "uid 0" in message and "uid 65534" in message and "job's user" in message and "sudo" in message
    assert proc_state(proc.pid) == "S"


def test_local_pyspy_is_the_wheels_static_binary():
    binary = local_pyspy()
    assert binary.path.read_bytes()[:4] == b"\x7fELF" and binary.size > 1_000_000
    assert len(binary.sha256) == 64 and binary.cache_name == f"py-spy-{binary.sha256[:16]}"
    out = subprocess.run([str(binary.path), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("py-spy ")
    with pytest.raises(Exception, match="aarch64"):
        binary.check_runs_on("aarch64")
    assert sys.platform.startswith("linux")


GLOO_JOB = """
import os, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["JOB_PORT"],
                        rank=int(os.environ["RANK"]), world_size=2)
x = torch.ones(1024)
for _ in range(3):
    dist.all_reduce(x)
print("ready", flush=True)
if dist.get_rank() == 1:
    while True:
        time.sleep(0.5)  # wedged outside torch: rank 0 waits for it in the next collective
while True:
    dist.all_reduce(x)
"""


def _torch_importable() -> bool:
    # find_spec, not import: importing torch here would cost every run of this file seconds
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec("torch") is not None


@pytest.mark.torch
@pytest.mark.timeout(240)
@pytest.mark.skipif(not _torch_importable(), reason="torch with torch.distributed is not importable")
async def test_real_two_rank_gloo_hang_names_the_rank_outside_the_collective(tmp_path):
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "gloo_hang.py"
    script.write_text(GLOO_JOB)
    ranks = []
    try:
        for rank in (0, 1):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", JOB_PORT=str(port),
                       GLOO_SOCKET_IFNAME="lo")
            ranks.append(subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                                          stdin=subprocess.DEVNULL))
        for proc in ranks:
            assert proc.stdout.readline().strip() == b"ready"
        await asyncio.sleep(1.0)  # rank 0 is now blocked in its fourth all_reduce
        async with OpHost(env_with_pyspy()) as host:
            report = await dump_job(host.request, [target(p) for p in ranks], timeout_s=30, save=False)
    finally:
        for proc in ranks:
            stop(proc)
    assert all(p.ok for p in report.processes), [p.message for p in report.processes]
    assert [p.rank for p in report.processes] == [0, 1]  # read from each rank's environment on the host
    analysis = report.analysis
    assert analysis.job_kind == "collective-hang", analysis.summary
    assert [s.pid for s in analysis.suspects] == [ranks[1].pid]
    assert analysis.of(ranks[0].pid).kind == "collective" and "all_reduce" in analysis.of(ranks[0].pid).why
    assert analysis.suspects[0].kind == "sleep"  # the probe read the line: `time.sleep(0.5)`
    assert f"suspect rank 1 (pid {ranks[1].pid})" in analysis.summary
    phase, detail, evidence = phase_hint(analysis)
    assert (phase, detail) == ("stalled", "nccl-spin") and "rank 1" in evidence
