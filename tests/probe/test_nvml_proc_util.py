"""Per-process SM % of a shared GPU (gpu_proc_util.py) through a real libnvidia-ml.so.1 ABI: the stand-in built
from tests/support/fake_nvml.c answers nvmlDeviceGetProcessUtilization as an H200 did (the busy process at
96-98 % SM, an idle context holder left out). Only GPUs with more than one process are read, spaced by the
reads' cost; a GPU alone keeps its process entries without a figure."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.fake_nvml import fake_nvml_env

from .test_nvml_direct import nvml_folder  # noqa: F401  (the fixture)

# Run in a child (the library is found through LD_LIBRARY_PATH); the probe's clock is stepped by hand.
SAMPLES = r"""
import json, sys
import pynvml
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
probe = LoadedProbe()
gpu_nvml, pu = probe.module("gpu_nvml"), probe.module("gpu_proc_util")
clock = [1000.0]
gpu_nvml.time.monotonic = lambda: clock[0]
source = gpu_nvml.NvmlSource(pynvml)
frames = []
for k in range(int(sys.argv[1])):
    frames.append(source.sample())
    clock[0] += 1.0
r = source.proc_util
print(json.dumps({"frames": frames, "reads": r.reads, "read_at": r.read_at, "cost": r.cost}))
"""


def run(nvml_folder, pids, samples, gpus=2, **extra):  # noqa: F811
    env = fake_nvml_env(nvml_folder, gpus, pids)
    env.update(extra)
    out = subprocess.run([sys.executable, "-c", SAMPLES, str(samples)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def sm_of(frame, gpu):
    return {p["pid"]: p["sm_pct"] for p in frame[gpu]["processes"]}


def test_a_shared_gpu_names_the_busy_process_and_the_idle_one_reads_zero(nvml_folder):  # noqa: F811
    # GPU 0: pids 101, 103, 105 (a matmul, two idle holders); GPU 1: 102 alone
    got = run(nvml_folder, [101, 102, 103, 104, 105], samples=6, GPUWATCH_FAKE_NVML_PROC_SM="101:97,103:0")
    first, last = got["frames"][0], got["frames"][-1]
    # the first sample knows no process list yet: nothing read
    assert set(sm_of(first, 0).values()) == {None}
    assert sm_of(last, 0) == {101: 97, 103: 0, 105: 0}
    # GPU 1 holds 102 and 104, neither reported: both 0 %
    assert sm_of(last, 1) == {102: 0, 104: 0}
    assert got["reads"] >= 2


def test_a_gpu_alone_is_never_read(nvml_folder):  # noqa: F811
    got = run(nvml_folder, [201, 202], samples=5)
    assert got["reads"] == 0
    for frame in got["frames"]:
        assert sm_of(frame, 0) == {201: None} and sm_of(frame, 1) == {202: None}


def test_reads_are_spaced_by_their_cost_and_each_gpu_at_most_every_min_interval(nvml_folder):  # noqa: F811
    # 4 GPUs, each shared by two processes, 20 one-second samples
    pids = list(range(300, 308))
    got = run(nvml_folder, pids, samples=20, gpus=4)
    # the default replay: the first pid of each GPU busy at 96-98 %, the other left out (0 %)
    last = got["frames"][-1]
    for gpu in range(4):
        sm = sm_of(last, gpu)
        busy, idle = pids[gpu], pids[gpu + 4]
        assert 96 <= sm[busy] <= 98 and sm[idle] == 0
    # a cheap call (the stand-in): every shared GPU read, none more often than every MIN_EVERY_S (2 s):
    # at most one read a second in all, at most 19 samples x 4 GPUs / 2 s
    assert 4 <= got["reads"] <= 19
    assert all(at is not None for at in got["read_at"])


def test_a_dear_call_is_read_seldom(nvml_folder):  # noqa: F811
    # each read made to cost the H200's worst (4.6 ms, the reader's own clock): at BUDGET_S_PER_S on average,
    # one read per 4.6 ms / budget (~31 s) over 100 one-second samples
    script = SAMPLES.replace("source = gpu_nvml", (
        "import types\nticks = [0.0]\n"
        "def perf_counter():\n    ticks[0] += 0.0046\n    return ticks[0]\n"
        "pu.time = types.SimpleNamespace(perf_counter=perf_counter)\nsource = gpu_nvml")).replace(
        '"cost": r.cost}', '"cost": r.cost, "budget": pu.BUDGET_S_PER_S}')
    env = fake_nvml_env(nvml_folder, 1, [1, 2])
    out = subprocess.run([sys.executable, "-c", script, "100"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert abs(got["cost"] - 0.0046) < 1e-6
    gap = got["cost"] / got["budget"]
    assert gap > 5  # (not one a second, nor every MIN_EVERY_S)
    assert abs(got["reads"] - 99 / gap) <= 1.5, (got["reads"], gap)
    # between reads the figures stay: the busy process reads 96-98 % in every frame after the first read
    seen = [sm_of(f, 0)[1] for f in got["frames"]]
    first = next(k for k, v in enumerate(seen) if v is not None)
    assert all(96 <= v <= 98 for v in seen[first:])


def test_a_process_that_joins_a_shared_gpu_gets_its_share_without_waiting_for_the_pace(nvml_folder):  # noqa: F811
    # a dear call (one read per ~31 s), GPU 0 shared by pids 1 and 2; pid 3 joins at the 10th sample
    script = SAMPLES.replace("source = gpu_nvml", (
        "import types\nticks = [0.0]\n"
        "def perf_counter():\n    ticks[0] += 0.0046\n    return ticks[0]\n"
        "pu.time = types.SimpleNamespace(perf_counter=perf_counter)\nsource = gpu_nvml")).replace(
        "    frames.append(source.sample())",
        "    if k == 10:  # (the kept list, as if read again: its memory unchanged, so kept)\n"
        "        kept = source.gpu_procs[0]\n"
        "        source.gpu_procs[0] = (kept[0], clock[0], kept[2] + [{'pid': 3, 'mem_used_mib': 1.0, 'sm_pct': None}])\n"
        "    frames.append(source.sample())")
    env = fake_nvml_env(nvml_folder, 1, [1, 2])
    out = subprocess.run([sys.executable, "-c", script, "20"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    seen = [sm_of(f, 0) for f in got["frames"]]
    assert seen[5] == {1: 97, 2: 0} or 96 <= seen[5][1] <= 98
    # the newcomer: unknown for the sample that lists it first, read at the next (past MIN_EVERY_S)
    joined = [s.get(3, "absent") for s in seen]
    assert joined[:10] == ["absent"] * 10
    assert joined[10] == 0, joined  # read at once (its own sample here: the list was kept before it)
    assert got["reads"] == 2  # the first read and the newcomer's: the pace (31 s) let no other through
