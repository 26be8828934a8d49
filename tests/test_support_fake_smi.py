"""Tests of the fake nvidia-smi (tests/support/fake_nvidia_smi.py), run as a real process."""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from tests.support.fake_nvidia_smi import DEFAULT_DATA_DIR, DRIVER_FAILURE, install_fake_nvidia_smi
from tests.support.fake_smi_scenario import ScenarioFile, gpu_uuid, write_placeholder_recordings

GPU_FIELDS = "index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm"
GPU_Q = [f"--query-gpu={GPU_FIELDS}", "--format=csv,noheader,nounits"]
APPS_Q = ["--query-compute-apps=timestamp,gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]


@pytest.fixture
def smi(tmp_path):
    """(nvidia-smi path, ScenarioFile, env) using placeholder recordings in tmp_path."""
    data = write_placeholder_recordings(tmp_path / "data")
    exe = install_fake_nvidia_smi(tmp_path / "bin")
    scen = ScenarioFile(tmp_path / "scenario.json").write(gpus=1, phase="idle", uuid_prefix="GPU-t", data_dir=str(data))
    env = dict(os.environ, GPUWATCH_FAKE_SMI=str(scen.path))
    return exe, scen, env


def run(smi, *args, timeout=10):
    exe, _, env = smi
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout)


class Stream:
    """A streaming nvidia-smi process whose stdout lines we read with a deadline."""

    def __init__(self, smi, *args):
        exe, _, env = smi
        self.p = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.buf = b""

    def lines(self, n, timeout=5.0):
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            while b"\n" in self.buf and len(out) < n:
                line, self.buf = self.buf.split(b"\n", 1)
                out.append(line.decode())
            if len(out) >= n:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"got {out}")
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError(f"exited {self.p.wait()}: {out} {self.p.stderr.read()!r}")
                self.buf += chunk
        return out

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.p.stderr.close()


def test_one_batch_and_exit(smi):
    r = run(smi, *GPU_Q)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.splitlines()
    cells = line.split(", ")
    assert cells[:3] == ["0", gpu_uuid("GPU-t", 0), "NVIDIA H200"]
    assert len(cells) == 10 and cells[5] == "143771"


def test_fields_in_requested_order_with_units_and_header(smi):
    _, scen, _ = smi
    scen.update(gpus=2)
    r = run(smi, "--query-gpu=power.limit,gpu_uuid,index,clocks.current.sm,memory.free", "--format=csv")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header == "power.limit [W], uuid, index, clocks.current.sm [MHz], memory.free [MiB]"
    assert rows == [
        f"700.00 W, {gpu_uuid('GPU-t', 0)}, 0, 1980 MHz, 143771 MiB",
        f"700.00 W, {gpu_uuid('GPU-t', 1)}, 1, 1980 MHz, 143771 MiB",
    ]


def test_a_field_the_recording_lacks_is_not_available_unless_the_scenario_sets_it(smi):
    _, scen, _ = smi
    r = run(smi, "--query-gpu=index,clocks.mem,clocks.current.memory", "--format=csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["index, clocks.current.memory [MHz], clocks.current.memory [MHz]",
                                     "0, [N/A], [N/A]"]  # as nvidia-smi prints it: no unit after [N/A]
    scen.update(fields={"clocks.mem": 3201})
    r = run(smi, "--query-gpu=index,clocks.mem", "--format=csv,noheader,nounits")
    assert r.stdout.splitlines() == ["0, 3201"]


def test_more_gpus_than_recorded_and_per_gpu(smi):
    _, scen, _ = smi
    scen.update(gpus=4, phase="training")
    scen.set_gpu(1, phase="idle")
    scen.set_gpu(2, fields={"utilization.gpu": 42, "temperature.gpu": 77})
    r = run(smi, "--query-gpu=index,uuid,utilization.gpu,temperature.gpu", "--format=csv,noheader,nounits")
    assert r.stdout.splitlines() == [
        "0, GPU-t-0, 97, 30",
        "1, GPU-t-1, 0, 30",
        "2, GPU-t-2, 42, 77",
        "3, GPU-t-3, 97, 30",
    ]


def test_lms_streams_and_follows_scenario_live(smi):
    _, scen, _ = smi
    s = Stream(smi, "--query-gpu=index,utilization.gpu,temperature.gpu", "--format=csv,noheader,nounits", "-lms", "200")
    try:
        t0 = time.monotonic()
        first = s.lines(3)
        assert first == ["0, 0, 30", "0, 0, 31", "0, 0, 32"]  # idle, cycling through recorded rows
        assert 0.3 < time.monotonic() - t0 < 2.0
        scen.update(gpus=2, phase="training")
        got = s.lines(8)
        two = [line for line in got if line.startswith("1, ")]
        assert two and all(int(line.split(", ")[1]) >= 97 for line in two)
        scen.fail()
        assert s.p.wait(timeout=5) == 9
        assert DRIVER_FAILURE in s.p.stderr.read().decode()
    finally:
        s.close()


def test_compute_apps(smi):
    _, scen, _ = smi
    assert run(smi, *APPS_Q).stdout == ""  # no processes: nothing at all
    scen.update(gpus=2, processes=[{"gpu": 1, "pid": os.getpid(), "used_memory_mib": 80000}, {"gpu": 5, "pid": 1}])
    r = run(smi, *APPS_Q)
    (line,) = r.stdout.splitlines()
    ts, uuid, pid, mem = line.split(", ")
    assert (uuid, pid, mem) == (gpu_uuid("GPU-t", 1), str(os.getpid()), "80000")
    assert len(ts) == len("2026/11/30 03:39:45.650") and ts[4] == "/"
    r = run(smi, "--query-compute-apps=pid,process_name,used_memory", "--format=csv")
    assert r.stdout.splitlines()[0] == "pid, process_name, used_gpu_memory [MiB]"
    assert r.stdout.splitlines()[1].endswith(" MiB")
    scen.update(processes=[{"gpu": 0, "pid": 11, "used_memory_mib": 1}, {"gpu": 1, "pid": 12, "used_memory_mib": 2}])
    stamps = {ln.split(", ")[0] for ln in run(smi, *APPS_Q).stdout.splitlines()}
    assert len(stamps) == 1  # all lines of one tick share the timestamp (the probe groups ticks by it)
    scen.update(processes="recorded", phase="training")
    r = run(smi, *APPS_Q)
    assert [ln.split(", ")[1:] for ln in r.stdout.splitlines()] == [
        [gpu_uuid("GPU-t", 0), "4242", "81234"],
        [gpu_uuid("GPU-t", 1), "4242", "81234"],
    ]


def test_compute_apps_stream_prints_nothing_without_processes(smi):
    _, scen, _ = smi
    s = Stream(smi, *APPS_Q, "-lms", "100")
    try:
        with pytest.raises(TimeoutError):
            s.lines(1, timeout=0.5)
        scen.update(processes=[{"gpu": 0, "pid": 4321, "used_memory_mib": 512}])
        assert s.lines(2)[1].split(", ")[2:] == ["4321", "512"]
    finally:
        s.close()


def test_errors_like_the_real_tool(smi):
    _, scen, _ = smi
    r = run(smi, "--bogus")
    assert r.returncode == 255 and "Option --bogus is not recognized" in r.stderr
    r = run(smi, "--query-gpu=index,nope", "--format=csv")
    assert r.returncode == 2 and 'Field "nope" is not a valid field to query.' in r.stderr
    r = run(smi, "--query-gpu=index", "--format=xml")
    assert r.returncode == 2 and "Format modifier is not recognized." in r.stderr
    scen.update(fail="custom driver failure")
    r = run(smi, *GPU_Q)
    assert (r.returncode, r.stdout, r.stderr.strip()) == (9, "", "custom driver failure")
    scen.update(fail=None, gpus=0)
    r = run(smi, *GPU_Q)
    assert (r.returncode, r.stderr.strip()) == (6, "No devices were found")
    r = run(smi, *APPS_Q)
    assert r.returncode == 6


def test_hang_then_recover(smi):
    _, scen, _ = smi
    scen.hang()
    s = Stream(smi, *GPU_Q)
    try:
        with pytest.raises(TimeoutError):
            s.lines(1, timeout=0.6)
        scen.recover()
        assert s.lines(1)[0].startswith("0, GPU-t-0")
        assert s.p.wait(timeout=5) == 0
    finally:
        s.close()


def test_exit_after_ticks_and_sigpipe(smi):
    _, scen, _ = smi
    scen.update(exit_after_ticks=2, exit_code=3)
    s = Stream(smi, *GPU_Q, "-lms", "50")
    try:
        assert len(s.lines(2)) == 2
        assert s.p.wait(timeout=5) == 3
    finally:
        s.close()
    scen.update(exit_after_ticks=None)
    s = Stream(smi, *GPU_Q, "-lms", "50")
    s.lines(1)
    s.p.stdout.close()  # the reader goes away: like the real tool, it dies of SIGPIPE
    assert s.p.wait(timeout=5) == -13
    s.p.stderr.close()


def test_missing_env_uses_default_scenario(tmp_path):
    exe = install_fake_nvidia_smi(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if k != "GPUWATCH_FAKE_SMI"}
    data = write_placeholder_recordings(tmp_path / "data")
    env["GPUWATCH_FAKE_SMI_DATA"] = str(data)
    r = subprocess.run([str(exe), "-L"], capture_output=True, text=True, env=env, timeout=10)
    assert r.returncode == 0
    assert r.stdout == "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"


@pytest.mark.skipif(
    not (DEFAULT_DATA_DIR / "h200-idle.gpu.csv").exists(), reason="H200 recordings not in tests/data/nvidia-smi yet"
)
@pytest.mark.parametrize("phase", ["idle", "held", "training"])
def test_real_recordings(tmp_path, phase):
    if not (DEFAULT_DATA_DIR / f"h200-{phase}.gpu.csv").exists():
        pytest.skip(f"no h200-{phase}.gpu.csv")
    exe = install_fake_nvidia_smi(tmp_path / "bin")
    scen = ScenarioFile(tmp_path / "s.json").write(gpus=2, phase=phase, uuid_prefix="GPU-r")
    env = dict(os.environ, GPUWATCH_FAKE_SMI=str(scen.path))
    r = subprocess.run([str(exe), *GPU_Q], capture_output=True, text=True, env=env, timeout=10)
    assert r.returncode == 0, r.stderr
    rows = [line.split(", ") for line in r.stdout.splitlines()]
    assert [row[:2] for row in rows] == [["0", "GPU-r-0"], ["1", "GPU-r-1"]]
    assert all(len(row) == 10 and "H200" in row[2] for row in rows)
