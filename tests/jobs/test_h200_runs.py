"""The phase engine on GPU numbers recorded on a real 2x H200 machine.

tests/data/gpu_runs/h200_windows.json holds, per one-second snapshot of four real jobs, what
`gpuwatch watch --json` recorded there: the job's GPU util / memory / power, the CPU rates and
compile-worker count its evidence showed, and how many lines its log had (see the README there).
Each window is replayed into the engine as JobObservations; the log lines are the jobs' own
formats (the scripts in scripts/gpu_jobs/), fed through the real rules as the counts grew.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.observation import ExitFacts, GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase
from gpuwatch_tui.jobs.progress import ProgressTracker
from gpuwatch_tui.jobs.rules import RuleSet
from gpuwatch_tui.model import FdTarget

DATA = json.loads((Path(__file__).resolve().parent.parent / "data" / "gpu_runs" / "h200_windows.json").read_text())
T0 = 1_796_000_000.0

TORCHRUN_BANNER = [
    "W1130 04:37:44.028000 1357 torch/distributed/run.py:851] ",
    "W1130 04:37:44.028000 1357 torch/distributed/run.py:851] *****************************************",
    "W1130 04:37:44.028000 1357 torch/distributed/run.py:851] Setting OMP_NUM_THREADS environment variable for "
    "each process to be 1 in default, to avoid your system being overloaded, please further tune the variable "
    "for optimal performance in your application as needed.",
    "W1130 04:37:44.028000 1357 torch/distributed/run.py:851] *****************************************",
]


def flex_line(n: int) -> str:  # scripts/gpu_jobs/flex_train.py
    head = ["loading config and building model", "starting training (first step compiles)",
            "first step done in 14.3s"]
    if n <= len(head):
        return head[n - 1]
    return f"{{'loss': 0.0351, 'grad_norm': 1.0, 'learning_rate': 0.0003, 'epoch': {0.02 * (n - 3):.2f}}}"


def hang_line(n: int) -> str:  # scripts/gpu_jobs/hang_gpu.py
    return f"step {n}/100 loss {1.0 / n:.4f}"


def nccl_line(n: int) -> str:  # torchrun's banner, then scripts/gpu_jobs/nccl_hang.py, two ranks interleaved
    if n <= len(TORCHRUN_BANNER):
        return TORCHRUN_BANNER[n - 1]
    k = n - len(TORCHRUN_BANNER) - 1
    return f"[rank{k % 2}] step {20 * (k // 2 + 1)} allreduce ok"


def replay(name, line, unbuffered: bool, ended_after: float | None = None):
    """Feed one recorded window (by name, or the window itself) to the engine; returns
    [(relative time, verdict, recorded (phase, detail))]. With `ended_after`, every process of the job is
    then gone (exit status unknown) that many seconds after the last sample, judged twice more."""
    w = DATA["windows"][name] if isinstance(name, str) else name
    interp = LogInterpreter(RuleSet.with_user_rules(), ProgressTracker())
    samples: list[ResourceSample] = []
    cpu = kids = 0.0
    rate = (None, None)
    prev_t = None
    lines = size = 0
    last_growth = None
    worker_since = None
    verdict = None
    out = []
    for i, s in enumerate(w["samples"]):
        t = T0 + s["t"]
        if s["cpu_cores"] is not None:
            rate = (s["cpu_cores"], s["child_cores"] or 0.0)
        elif s["max_rank_cores"] is not None:
            rate = (s["max_rank_cores"], 0.0)  # stalled evidence shows the spinning rank instead
        if prev_t is not None and rate[0] is not None:
            cpu += rate[0] * (t - prev_t)
            kids += rate[1] * (t - prev_t)
        prev_t = t
        while lines < s["log_lines"]:
            lines += 1
            text = line(lines)
            size += len(text) + 1
            interp.feed_line(text, t)
            last_growth = t
        if s["compile_workers"] and worker_since is None:
            worker_since = t
        gpus = tuple(GpuReading(g[0], g[1], g[2], g[3], g[4]) for g in s["gpus"])
        samples.append(ResourceSample(time=t, cpu_s=cpu, children_cpu_s=kids, gpus=gpus,
                                      compile_workers=s["compile_workers"], log_bytes=size))
        started = T0 + w["started_at"]
        log = LogFacts(
            path=w["log"], total_bytes=size, last_growth_at=last_growth, hint=interp.hint,
            failure=interp.failure, failures=len(interp.failures), finished_at=interp.finished_at,
            progress=interp.progress.current if interp.progress.current.updated_at is not None else None,
            last_progress_at=interp.last_progress_at, observed=i > 0, size=size,
            mtime=last_growth if last_growth is not None else started,
        )
        stdout = FdTarget(w["log"], "file", append=False, size=size)
        obs = JobObservation(samples=list(samples), stall_after_s=w["stall_after_s"], started_at=started, log=log,
                             stdout=stdout, stderr=stdout, unbuffered=unbuffered,
                             unbuffered_reason="-u" if unbuffered else "", compile_worker_since=worker_since)
        verdict = infer_phase(obs, t, verdict)
        out.append((s["t"], verdict, tuple(s["recorded"])))
    if ended_after is not None:
        end = t + ended_after
        for extra in (0.0, 1.0):
            obs = dataclasses.replace(obs, exit=ExitFacts(end), samples=list(samples))
            verdict = infer_phase(obs, end + extra, verdict)
            out.append((end + extra - T0, verdict, ("ended", None)))
    return out


def phases(run, lo=float("-inf"), hi=float("inf")):
    return [(v.phase, v.detail) for t, v, _ in run if lo <= t <= hi]


def collapsed(run) -> list[str]:
    out: list[str] = []
    for _, v, _ in run:
        if not out or out[-1] != v.phase:
            out.append(v.phase)
    return out


def describe(run) -> str:
    return "\n".join(f"{t:6.1f} {v.phase}/{v.detail} (recorded {r[0]}/{r[1]}) {'; '.join(v.evidence)}"
                     for t, v, r in run)


def test_flex_attention_compile_window_is_compiling_never_stalled_then_training():
    run = replay("flex_compile", flex_line, unbuffered=True)
    report = describe(run)
    first_train = next(t for t, _, r in run if r[0] == "training")  # the first step finished (14.3 s)
    # GPU at 0% / 125 W (18% of limit) with the compile workers busy: compiling, through the whole compile.
    assert set(phases(run, 1.0, first_train - 1)) == {("compiling", "torch.compile")}, report
    assert not {p for p, _ in phases(run)} & {"stalled", "silent", "unknown", "crashed"}, report
    assert {p for p, _ in phases(run, first_train)} == {"training"}, report
    assert collapsed(run) == ["starting", "compiling", "training"], report


def test_buffered_quiet_window_is_silent_buffered_stdout():
    run = replay("buffered_quiet", lambda n: f"step {n} loss 0.0008", unbuffered=False)
    report = describe(run)
    # 99% util at ~693 W, one core busy, log empty: training at first, then silent once quiet past the threshold
    assert phases(run, 1.0, 15.0) == [("training", None)] * len(phases(run, 1.0, 15.0)), report
    late = phases(run, 20.0)
    assert late and set(late) == {("silent", "buffered-stdout")}, report
    assert any("no -u, no PYTHONUNBUFFERED" in e for e in run[-1][1].evidence), report
    assert run[-1][1].actions == ("restart_unbuffered",) and "restart it with -u" in run[-1][1].advice
    assert collapsed(run) == ["starting", "training", "silent"], report


def test_python_hang_window_is_stalled_no_progress():
    run = replay("hang", hang_line, unbuffered=True)
    report = describe(run)
    assert ("training", None) in phases(run, 1.0, 10.0), report
    last_line = max(t for t, v, _ in run if v.phase == "training")
    # 0% util at 128 W (18%), GPU memory held, CPU flat: stalled once the log is quiet past 30 s, and stays so.
    stalled = phases(run, last_line + 1)
    assert stalled and set(stalled) == {("stalled", "no-progress")}, report
    assert run[-1][0] - last_line >= 15, report
    ev = run[-1][1].evidence
    assert "GPU memory held, no kernels running" in ev and any(e.startswith("CPU flat") for e in ev), report
    assert "step 5/100, loss 0.2" in ev, report
    assert collapsed(run) == ["starting", "training", "stalled"], report


def test_nccl_window_is_training_while_steps_log_then_stalled_nccl_spin():
    run = replay("nccl_spin", nccl_line, unbuffered=True)
    report = describe(run)
    # Both GPUs at 90-95% util and ~275 W with "[rankN] step N allreduce ok" lines: training, not starting.
    steps = [(t, v) for t, v, r in run if 2.0 <= t <= 11.0]
    assert steps and all(v.phase == "training" for _, v in steps), report
    assert run[5][1].evidence[0].startswith("log: [rank") and any(e.startswith("step ") for e in run[5][1].evidence)
    # Rank 1 stopped: GPU0 100% util at 128 W (18%), GPU1 0%, nothing logged: stalled / nccl-spin.
    assert (run[-1][1].phase, run[-1][1].detail) == ("stalled", "nccl-spin"), report
    assert any("a kernel waiting, not computing" in e for e in run[-1][1].evidence), report
    after = [(v.phase, v.detail) for t, v, r in run if r[0] == "stalled"]
    assert after and set(after) == {("stalled", "nccl-spin")}, report
    assert collapsed(run) == ["starting", "training", "stalled"], report  # no flicker through silent


def test_nccl_window_without_a_matching_log_line_is_training_from_the_gpus_not_starting():
    # Only the torchrun banner matches a rule (phase "starting"); the ranks' lines match nothing.
    run = replay("nccl_spin", lambda n: nccl_line(n).replace(" step ", " round "), unbuffered=True)
    report = describe(run)
    busy = [v for t, v, _ in run if 2.0 <= t <= 11.0]  # 90-95% util at 255-282 W (36-40%), CPU busy
    assert busy and all(v.phase == "training" and v.confidence < 0.7 for v in busy), report
    assert any(e.startswith("GPUs computing since") for e in busy[-1].evidence), report
    assert any("Setting OMP_NUM_THREADS" in e for e in busy[-1].evidence), report
    assert (run[-1][1].phase, run[-1][1].detail) == ("stalled", "nccl-spin"), report


@pytest.mark.parametrize("name", sorted(DATA["windows"]))
def test_recorded_windows_are_small_and_one_second_apart(name):
    w = DATA["windows"][name]
    ts = [s["t"] for s in w["samples"]]
    assert 20 <= len(ts) <= 80 and all(0.9 <= b - a <= 1.1 for a, b in zip(ts, ts[1:]))
    assert all(s["gpus"] and all(g[4] == 700 for g in s["gpus"]) for s in w["samples"])
