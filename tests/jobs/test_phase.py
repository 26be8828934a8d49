"""The phase engine on synthetic observation series built from real H200 measurements (DESIGN.md).

H200: power limit 700 W. No process: 0% / 78 W. CUDA context doing nothing (start-up, loading,
compiling, Python hang): 0% / ~119 W. Training: 98-100% / ~690 W. NCCL collective spin on the
waiting rank: 100% / ~121 W, other rank 0%.
"""

from __future__ import annotations

import re

from gpuwatch_tui.actions import registry
from gpuwatch_tui.jobs.interpret import Failure, PhaseHint
from gpuwatch_tui.jobs.observation import ExitFacts, GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import Verdict, fmt_duration, infer_phase
from gpuwatch_tui.jobs.progress import Progress
from gpuwatch_tui.model import FdTarget

LIMIT = 700.0
T0 = 1_000_000.0
LOG_FILE = FdTarget("/work/run/train.log", "file", append=False, size=0)


def h200(index=0, util=0.0, power=119.0, mem=81_000.0):
    return GpuReading(index, util, mem, power, LIMIT)


def series(start, seconds, *, step=5.0, cores=1.0, child_cores=0.0, gpus=lambda t: (h200(),), states=("S",),
           compilers=lambda t: (), workers=0, log_bytes=lambda t: 0):
    out = []
    t = start
    while t <= start + seconds + 1e-9:
        dt = t - start
        out.append(ResourceSample(
            time=t, cpu_s=100.0 + cores * dt, children_cpu_s=child_cores * dt, gpus=tuple(gpus(t)),
            states=states, compilers=tuple(compilers(t)), compile_workers=workers,
            rank_cpu_s=((4242, 100.0 + cores * dt),), log_bytes=log_bytes(t)))
        t += step
    return out


def hint(phase, t, detail=None, text="..."):
    return PhaseHint(phase, detail, "rule", t, t, 1, text)


def obs(samples, *, log=None, stdout=LOG_FILE, unbuffered=False, started=T0, stall=300.0, **kw):
    return JobObservation(samples=samples, stall_after_s=stall, started_at=started, log=log or LogFacts(),
                          stdout=stdout, unbuffered=unbuffered, **kw)


# A key in advice text: "press u", "u to", "(k)". Advice names actions (Verdict.actions); the UI shows keys.
KEY_IN_TEXT = re.compile(r"\bpress\b|(?<![-\w])[a-z] to\b|\([a-z]\)", re.IGNORECASE)


def verdict_at(o, now, previous=None):
    v = infer_phase(o, now, previous)
    # Every verdict of every test here: advice names no key, and every action it names exists.
    assert not KEY_IN_TEXT.search(v.advice), v.advice
    assert all(registry.by_name(a).scope == "job" for a in v.actions), v.actions
    return v


# ------------------------------------------------------------------ start-up, loading, compiling
def test_healthy_startup_is_starting_never_stalled():
    # 8 s of imports + CUDA context: 0% util at held-idle power, one core busy, nothing logged.
    s = series(T0, 8, step=1, cores=1.0)
    v = verdict_at(obs(s), T0 + 8)
    assert v.phase == "starting"
    assert v.since == T0


def test_loading_with_a_slow_shard_is_not_stalled_even_past_the_threshold():
    # One huge shard: tqdm only redraws when a shard completes; the log is quiet for 7 minutes.
    s = series(T0, 480, step=10, cores=1.0, gpus=lambda t: (h200(util=0, power=119, mem=30_000),))
    log = LogFacts(path="/work/run/train.log", total_bytes=200, last_growth_at=T0 + 60,
                   hint=hint("loading", T0 + 60, "checkpoint-shards", "Loading checkpoint shards:  25%| 1/4"))
    v = verdict_at(obs(s, log=log), T0 + 480)
    assert v.phase == "loading"
    assert v.phase != "stalled"


def test_first_compile_is_compiling_not_a_hang():
    # GPU 0% util at ~119 W, main process ~1 core, compile worker pool, then gcc/cc1 bursts.
    def compilers(t):
        return ("cc1plus", "gcc") if int(t - T0) % 40 < 25 else ()
    s = series(T0, 420, step=5, cores=1.0, child_cores=1.5, compilers=compilers, workers=3,
               gpus=lambda t: (h200(util=0, power=119, mem=12_000),))
    log = LogFacts(path="/work/run/train.log", total_bytes=900, last_growth_at=T0 + 20)
    v = verdict_at(obs(s, log=log, compile_worker_since=T0 + 20), T0 + 420)
    assert v.phase == "compiling"
    assert any("cc1plus" in e for e in v.evidence)
    assert v.phase != "stalled"


def test_progress_after_the_last_compiler_ends_compiling_without_waiting_for_the_gpu():
    # Seen end to end (compile.py on CPU): g++ until T0+60, then loss dicts every 0.2 s with the GPU
    # held idle. The recent-compilers lookback must not keep calling it compiling.
    def compilers(t):
        return ("g++", "cc1plus") if t <= T0 + 60 else ()
    s = series(T0, 70, step=1, cores=1.0, compilers=compilers, gpus=lambda t: (h200(util=0, power=119),))
    log = LogFacts(path="/work/run/train.log", total_bytes=900, last_growth_at=T0 + 70,
                   hint=hint("training", T0 + 61, text="{'loss': 0.03, 'learning_rate': 0.01, 'epoch': 0.2}"),
                   last_progress_at=T0 + 70, progress=Progress(loss=0.03, epoch=0.2))
    v = verdict_at(obs(s, log=log, stall=6), T0 + 70)
    assert v.phase == "training", v
    # Still compiling while a compiler runs now, progress or not (a recompile).
    s2 = series(T0, 70, step=1, cores=1.0, compilers=lambda t: ("g++",), gpus=lambda t: (h200(util=0, power=119),))
    assert verdict_at(obs(s2, log=log, stall=6), T0 + 70).phase == "compiling"


def test_compile_before_compiler_children_from_worker_pool_and_busy_main():
    # The compile_worker helper appeared, main still busy, GPU idle: compiling (no gcc yet).
    s = series(T0, 60, step=5, cores=1.0, workers=1, gpus=lambda t: (h200(util=0, power=119),))
    v = verdict_at(obs(s, compile_worker_since=T0 + 30), T0 + 60)
    assert v.phase == "compiling"


def test_idle_compile_worker_pool_during_training_does_not_mean_compiling():
    # After compiling, the pool stays alive and idle through training.
    s = series(T0, 120, step=5, cores=1.0, workers=8, gpus=lambda t: (h200(util=99, power=690),),
               log_bytes=lambda t: int(t - T0) * 100)
    log = LogFacts(path="/work/run/train.log", total_bytes=12000, last_growth_at=T0 + 118,
                   hint=hint("training", T0 + 10, text="{'loss': 2.1}"), last_progress_at=T0 + 118,
                   progress=Progress(step=120, total=1000, loss=2.1))
    v = verdict_at(obs(s, log=log, compile_worker_since=T0), T0 + 120)
    assert v.phase == "training"


# ------------------------------------------------------------------ buffered stdout
def test_busy_but_silent_with_buffered_stdout_is_silent_not_stalled():
    # nohup python train.py > log: full util, full power, CPU rising, log 0 bytes.
    s = series(T0, 400, step=5, cores=1.2, gpus=lambda t: (h200(util=100, power=690),))
    v = verdict_at(obs(s, log=LogFacts(path="/work/run/train.log")), T0 + 400)
    assert (v.phase, v.detail) == ("silent", "buffered-stdout")
    assert any("no -u, no PYTHONUNBUFFERED" in e for e in v.evidence)
    assert any("GPU0 100% util, 79 GB, 690 W" in e for e in v.evidence)
    assert v.actions == ("restart_unbuffered",) and "restart it with -u" in v.advice


def test_buffered_job_before_threshold_is_training_with_a_warning():
    s = series(T0, 90, step=5, cores=1.2, gpus=lambda t: (h200(util=100, power=690),))
    v = verdict_at(obs(s, log=LogFacts(path="/work/run/train.log")), T0 + 90)
    assert v.phase == "training"
    assert any("no -u" in e for e in v.evidence)
    assert v.actions == ("restart_unbuffered",)


def test_busy_silent_but_unbuffered_is_silent_not_logging():
    s = series(T0, 400, step=5, cores=1.2, gpus=lambda t: (h200(util=100, power=690),))
    v = verdict_at(obs(s, unbuffered=True, unbuffered_reason="-u"), T0 + 400)
    assert (v.phase, v.detail) == ("silent", "not-logging")


def test_cpu_only_buffered_job_is_silent():
    # Machines without GPUs: CPU time, log and process facts alone.
    s = series(T0, 400, step=5, cores=1.0, gpus=lambda t: ())
    v = verdict_at(obs(s, has_gpus=False), T0 + 400)
    assert (v.phase, v.detail) == ("silent", "buffered-stdout")


# ------------------------------------------------------------------ stalls
def test_no_progress_past_threshold_is_stalled():
    # A Python-level hang: 0% util at ~119 W, memory held, CPU flat, state S, log silent 18m40s.
    s = series(T0, 1500, step=10, cores=0.0, gpus=lambda t: (h200(util=0, power=119, mem=81_000),))
    log = LogFacts(path="/work/run/train.log", total_bytes=5000, last_growth_at=T0 + 380,
                   hint=hint("training", T0 + 300, text="step 41"), progress=Progress(step=41, total=100))
    v = verdict_at(obs(s, log=log, unbuffered=True), T0 + 1500)
    assert v.phase == "stalled"
    assert "log silent 18m40s" in v.evidence
    assert any(e.startswith("CPU flat") for e in v.evidence)
    assert v.since == T0 + 380
    assert v.actions == ("dump_stack", "kill") and "dump the stacks" in v.advice


def test_cpu_only_hang_is_stalled():
    s = series(T0, 700, step=10, cores=0.0, gpus=lambda t: ())
    log = LogFacts(path="/work/run/train.log", total_bytes=300, last_growth_at=T0 + 20,
                   hint=hint("training", T0 + 20))
    v = verdict_at(obs(s, log=log, unbuffered=True, has_gpus=False), T0 + 700)
    assert v.phase == "stalled"


def test_quiet_below_threshold_is_not_stalled():
    s = series(T0, 700, step=10, cores=0.0, gpus=lambda t: (h200(util=0, power=119),))
    log = LogFacts(path="/work/run/train.log", total_bytes=300, last_growth_at=T0 + 500,
                   hint=hint("training", T0 + 20))
    v = verdict_at(obs(s, log=log, unbuffered=True), T0 + 700)
    assert v.phase == "training"


def test_stall_threshold_is_per_job():
    s = series(T0, 700, step=10, cores=0.0, gpus=lambda t: (h200(util=0, power=119),))
    log = LogFacts(path="/work/run/train.log", total_bytes=300, last_growth_at=T0 + 500,
                   hint=hint("training", T0 + 20))
    assert verdict_at(obs(s, log=log, unbuffered=True, stall=120), T0 + 700).phase == "stalled"


def test_nccl_spin_is_stalled_not_training():
    # Rank 0 waits in a collective: GPU0 100% util at ~121 W; GPU1 (stopped rank) 0%; one core spins.
    def gpus(t):
        return (h200(0, util=100, power=121, mem=70_000), h200(1, util=0, power=119, mem=70_000))
    s = series(T0, 900, step=5, cores=1.0, gpus=gpus)
    log = LogFacts(path="/work/run/train.log", total_bytes=9000, last_growth_at=T0 + 100,
                   hint=hint("training", T0 + 10))
    v = verdict_at(obs(s, log=log, unbuffered=True), T0 + 900)
    assert (v.phase, v.detail) == ("stalled", "nccl-spin")
    assert any("idle power" in e for e in v.evidence)
    assert any("one rank spins 1.0 cores" in e for e in v.evidence)
    assert v.actions == ("dump_stack",)


def test_spin_rule_uses_power_relative_to_limit():
    # A smaller GPU (300 W limit) training at 250 W is working, not spinning.
    def gpus(t):
        return (GpuReading(0, 100, 20_000, 250, 300),)
    s = series(T0, 900, step=5, cores=1.0, gpus=gpus)
    v = verdict_at(obs(s, log=LogFacts(last_growth_at=T0 + 100, total_bytes=10)), T0 + 900)
    assert v.phase == "silent"


def test_stopped_process_is_stalled_stopped():
    s = series(T0, 60, step=5, cores=0.0, states=("T",))
    v = verdict_at(obs(s), T0 + 60)
    assert (v.phase, v.detail) == ("stalled", "stopped")
    assert v.actions == ("kill",)


# ------------------------------------------------------------------ crashes and endings
def test_traceback_while_ranks_still_live_is_crashed():
    s = series(T0, 120, step=5, cores=1.0, gpus=lambda t: (h200(util=100, power=121),))
    failure = Failure("exception", "ValueError: boom", T0 + 100, 40, rank=1)
    log = LogFacts(total_bytes=100, last_growth_at=T0 + 100, failure=failure, failures=1,
                   hint=hint("training", T0 + 10))
    v = verdict_at(obs(s, log=log, unbuffered=True), T0 + 120)
    assert (v.phase, v.detail) == ("crashed", "exception")
    assert "log: ValueError: boom (rank 1)" in v.evidence
    assert v.since == T0 + 100


def test_oom_detail():
    s = series(T0, 30, step=5)
    log = LogFacts(failure=Failure("oom", "torch.OutOfMemoryError: CUDA out of memory.", T0 + 20, 3), failures=1)
    v = verdict_at(obs(s, log=log), T0 + 30)
    assert (v.phase, v.detail) == ("crashed", "oom")
    assert v.actions == ("kill",) and "kill the survivors" in v.advice


def test_gone_with_signal_is_crashed_with_signal_evidence():
    s = series(T0, 60, step=5)
    v = verdict_at(obs(s, exit=ExitFacts(T0 + 61, None, 9)), T0 + 62)
    assert (v.phase, v.detail) == ("crashed", "signal")
    assert v.actions == ("dismiss",)  # nothing left to kill or dump
    assert "killed by SIGKILL (9)" in v.evidence


def test_gone_with_exit_code():
    s = series(T0, 60, step=5)
    v = verdict_at(obs(s, exit=ExitFacts(T0 + 61, 137)), T0 + 62)
    assert v.phase == "crashed" and "exit code 137" in v.evidence
    assert any("SIGKILL" in e for e in v.evidence)
    assert verdict_at(obs(s, exit=ExitFacts(T0 + 61, 0)), T0 + 62).phase == "finished"


def test_buffered_job_vanishing_without_final_flush_is_crashed():
    # SIGKILL / segfault / OOM killer: the stdout buffer is lost, the log stays empty.
    s = series(T0, 60, step=5)
    v = verdict_at(obs(s, log=LogFacts(path="/work/run/train.log"), exit=ExitFacts(T0 + 61)), T0 + 62)
    assert (v.phase, v.detail) == ("crashed", "killed")


def test_buffered_job_flushing_at_exit_is_finished():
    s = series(T0, 60, step=5)
    log = LogFacts(path="/work/run/train.log", total_bytes=4096, last_growth_at=T0 + 61)
    v = verdict_at(obs(s, log=log, exit=ExitFacts(T0 + 61)), T0 + 62)
    assert v.phase == "finished"


def test_gone_after_completion_line_is_finished():
    s = series(T0, 60, step=5)
    log = LogFacts(total_bytes=4096, last_growth_at=T0 + 10, finished_at=T0 + 58,
                   progress=Progress(step=100, total=100))
    v = verdict_at(obs(s, log=log, unbuffered=True, exit=ExitFacts(T0 + 60)), T0 + 62)
    assert v.phase == "finished" and v.since == T0 + 60


def test_gone_mid_run_with_flushed_lines_is_crashed():
    # crash_sigkill.py / crash_segfault.py print with flush=True, then die: the log just stops.
    s = series(T0, 60, step=5)
    log = LogFacts(total_bytes=400, last_growth_at=T0 + 59, hint=hint("training", T0 + 5),
                   progress=Progress(step=3, total=30, loss=0.1, eta_s=13))
    v = verdict_at(obs(s, log=log, exit=ExitFacts(T0 + 60)), T0 + 62)
    assert (v.phase, v.detail) == ("crashed", "vanished")
    assert not any("ETA" in e for e in v.evidence)
    # We did not start it: the exit status and any signal are unknown, and the evidence says just that.
    assert v.evidence[0] == ("process gone without a completion line or a traceback; "
                             "exit status unknown (not started by gpuwatch)")
    assert "stopped at step 3/30" in v.evidence
    assert any(e.startswith("likely causes:") and "SIGTERM" in e and "SIGKILL" in e and "OOM killer" in e
               and "segfault" in e for e in v.evidence)
    assert not any(e.startswith("killed by") for e in v.evidence)  # never claims a signal it cannot know


def test_gone_after_traceback_without_exit_status_is_crashed():
    s = series(T0, 60, step=5)
    log = LogFacts(total_bytes=4096, last_growth_at=T0 + 59,
                   failure=Failure("exception", "RuntimeError: x", T0 + 59, 9), failures=1)
    v = verdict_at(obs(s, log=log, unbuffered=True, exit=ExitFacts(T0 + 60)), T0 + 62)
    assert (v.phase, v.detail) == ("crashed", "exception")


# ------------------------------------------------------------------ since and formatting
def test_since_is_stable_while_the_phase_holds():
    s = series(T0, 400, step=5, cores=1.2, gpus=lambda t: (h200(util=100, power=690),))
    first = verdict_at(obs(s[:-10]), T0 + 350)
    later = verdict_at(obs(s), T0 + 400, previous=first)
    assert first.phase == later.phase == "silent"
    assert later.since == first.since


def test_fmt_duration():
    assert fmt_duration(1120) == "18m40s"
    assert fmt_duration(3 * 3600 + 60) == "3h01m"
    assert fmt_duration(5) == "5s"


def test_verdict_json_shape():
    v = Verdict("stalled", T0, 0.8, "nccl-spin", ("a", "b"), "dump the stacks", ("dump_stack",))
    assert v.to_json() == {"phase": "stalled", "detail": "nccl-spin", "since": T0, "confidence": 0.8,
                           "evidence": ["a", "b"], "advice": "dump the stacks", "actions": ["dump_stack"]}
