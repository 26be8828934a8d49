"""Four jobs on one GPU, each judged by its own processes' SM share (the probe's per-process figures), as
four jobs on an H200 were: a first torch.compile, a hang, a buffered job and a training one. With only
the whole GPU's utilisation (97 %, a neighbour training) the compile read training and the hang never
stalled; a job alone on its GPU is read exactly as before."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs.gpu_share import shared_reading
from gpuwatch_tui.jobs.observation import GpuReading
from gpuwatch_tui.jobs.settings import JobSettings
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ChildProc, FdTarget, GpuProcess, GpuSample, TailChunk

from .procs import proc, sample

HOST = "h200"
# pid -> (name, the job's SM % of the GPU while it does its thing): two matmul loops split the GPU's time
JOBS = {201: ("compile", 0.0), 202: ("hang", 0.0), 203: ("buffered", 48.0), 204: ("train", 49.0)}
STALL = 30.0


def log_of(pid: int) -> FdTarget:
    return FdTarget(f"/work/{JOBS[pid][0]}/train.log", "file", append=False, size=0)


def frame(t: float, with_shares: bool):
    """The four jobs at `t` s: the compile job's CPU busy with gcc below it, the hang's CPU flat after 20 s,
    the buffered job busy with an empty log, the trainer busy and logging."""
    procs = {}
    for pid, (name, _) in JOBS.items():
        busy = name != "hang" or t < 20.0
        cpu = 5.0 + (t if busy else 20.0)
        kids = (ChildProc(pid + 1000, "cc1plus", ("cc1plus",), "R", t),) if name == "compile" else ()
        procs[pid] = proc(pid, 1, ["python", "train.py"], cpu=cpu, cwd=f"/work/{name}", stdout=log_of(pid),
                          state="R" if busy else "S", children=kids, unbuffered=name != "buffered", start=0.0)
    shares = {pid: (sm if (JOBS[pid][0] != "hang" or t < 20.0) else 0.0) for pid, (_, sm) in JOBS.items()}
    shares[202] = 30.0 if t < 20.0 else 0.0
    gpu = GpuSample(0, "GPU-0", "NVIDIA H200", 97.0, 120_000.0, 143_771.0, 50.0, 690.0, 700.0, 1980.0,
                    processes=tuple(GpuProcess(pid, 30_000.0, shares[pid] if with_shares else None) for pid in JOBS))
    return procs, [gpu]


def run(with_shares: bool) -> dict[str, dict]:
    """Each job's JSON after 90 s, by its name in JOBS."""
    tr = JobTracker(JobSettings(stall_after_s=STALL))
    t = 0.0
    while t <= 90.0:
        procs, gpus = frame(t, with_shares)
        tails = []
        for key, path in tr.wanted(HOST).tails.items():
            logging = path.startswith("/work/train/") or (path.startswith("/work/hang/") and t < 20.0)
            tails.append(TailChunk(key, path, b"step %d loss 1.0\n" % int(t) if logging else b"", False, 0,
                                   None, None, None))
        tr.update(HOST, sample(t, procs, gpus, tails=tails), now=t)
        t += 2.0
    return {JOBS[job["pids"][0]][0]: job for job in tr.to_json()}


def test_each_job_on_a_shared_gpu_is_judged_by_its_own_share():
    jobs = run(with_shares=True)
    assert jobs["compile"]["phase"] == "compiling", jobs["compile"]
    assert jobs["hang"]["phase"] == "stalled", jobs["hang"]
    assert jobs["buffered"]["phase"] == "silent", jobs["buffered"]
    assert jobs["train"]["phase"] == "training", jobs["train"]
    # the evidence says the GPU is shared and what this job's own share is
    hang = next(e for e in jobs["hang"]["evidence"] if e.startswith("GPU0 shared"))
    assert hang.startswith("GPU0 shared with 3 other jobs: this job 0% SM of the GPU's 97%"), hang
    train = next(e for e in jobs["train"]["evidence"] if e.startswith("GPU0 shared"))
    assert "this job 49% SM of the GPU's 97%" in train, train


def test_without_per_process_figures_the_whole_gpu_misleads_and_the_evidence_says_why():
    jobs = run(with_shares=False)
    # the whole GPU's 97 % at 690 W: the hang reads as working, the compile as training
    assert jobs["hang"]["phase"] != "stalled", jobs["hang"]
    assert jobs["compile"]["phase"] != "compiling", jobs["compile"]
    line = next(e for e in jobs["hang"]["evidence"] if e.startswith("GPU0 shared"))
    assert "share not read yet" in line and "97% util" in line, line


READING = GpuReading(0, 97.0, 120_000.0, 690.0, 700.0, 94.0, 90.0, 16.0)


@pytest.mark.parametrize("processes", [
    (GpuProcess(11, 30_000.0, 0.0),),  # alone
    (GpuProcess(11, 30_000.0, 0.0), GpuProcess(12, 30_000.0, 97.0)),  # two processes, both the job's
])
def test_a_job_alone_on_its_gpu_keeps_the_whole_gpus_reading(processes):
    gpu = GpuSample(0, "GPU-0", "NVIDIA H200", 97.0, 120_000.0, 143_771.0, processes=processes)
    assert shared_reading(READING, gpu, {11}, {12}, None) is READING


def test_the_job_reads_its_own_processes_summed_and_counts_other_jobs_once():
    procs = (GpuProcess(11, 10_000.0, 40.0), GpuProcess(12, 20_000.0, 30.0),  # the job: a rank and a child
             GpuProcess(21, 1.0, 20.0), GpuProcess(22, 1.0, 10.0),  # another job's two processes
             GpuProcess(31, 1.0, 0.0))  # a process of no known job
    gpu = GpuSample(0, "GPU-0", "NVIDIA H200", 97.0, 120_000.0, 143_771.0, processes=procs)
    r = shared_reading(READING, gpu, {11}, {12}, {21: 5, 22: 5, 11: 1})
    assert (r.own_sm_pct, r.gpu_util_pct, r.mem_used_mib, r.shared_with) == (70.0, 97.0, 30_000.0, 2)
    assert r.util_pct == 97.0  # 70 % next to another job working (30 %): as busy as the GPU
    # the GPU's power and GPM counters stay the whole GPU's
    assert (r.power_w, r.sm_active_pct) == (READING.power_w, READING.sm_active_pct)


def test_jobs_computing_side_by_side_each_read_as_busy_and_a_held_context_as_idle():
    from gpuwatch_tui.jobs.gpu_share import share_as_util
    assert share_as_util(48.0, 97.0, [49.0]) == 96.0  # two matmul loops split the GPU
    assert share_as_util(32.0, 97.0, [32.0, 33.0, 0.0]) == 96.0  # three, and an idle holder
    assert share_as_util(60.0, 70.0, [30.0]) == 70.0  # never above the GPU's own util
    assert share_as_util(0.0, 97.0, [97.0]) == 0.0 and share_as_util(4.0, 97.0, [93.0]) == 4.0
