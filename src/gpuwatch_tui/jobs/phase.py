"""The phase engine: from a window of observations of one job to a verdict with evidence.

Pure: no I/O, no clock. The caller passes `now` and the previous verdict (to keep `since`
stable while the phase holds). Numbers that matter come from real H200 measurements (see
DESIGN.md): a CUDA context doing nothing sits at 0% util and ~17% of the power limit; training
runs ~98-100% util near the limit; a spinning NCCL collective shows ~100% util at idle power.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..vocab import fmt_duration
from .hysteresis import settle
from .interpret import PhaseHint, signal_name
from .verdict import Verdict
from .activity import (
    Activity, CPU_BUSY_CORES, CPU_FLAT_CORES, GPM_SPIN_STALL_S, GPU_SPIN_UTIL, GPU_WORKING_POWER_FRACTION, MID_RUN_S, RATE_WINDOW_S, YOUNG_S, bar_full, buffering_of, cpu_evidence, cpu_rate_line, cpu_rates, gpm_spin_line, gpm_waiting, gpu_busy_facts, gpu_evidence, gpu_reading_lines, is_computing, measure_activity, phase_progress_evidence, progress_evidence, samples_window,
)
from .observation import GpuReading, JobObservation, LogFacts, ResourceSample


# Actions the advice may name (actions/registry.py): the UI shows their keys, the CLI their verbs.
KILL, RESTART, DUMP, DISMISS = "kill", "restart_unbuffered", "dump_stack", "dismiss"
BUFFERED_ADVICE = "output is sitting in the process's stdout buffer: restart it with -u to see it"
UNFLUSHED_ADVICE = "stdout is block-buffered: restart it with -u to see its output as it is written"

@dataclass(slots=True)
class DecisionContext:
    """The facts derived from one observation that the engine's rules read (built by `_context`).
    Made once per judgment and read only: slots, not frozen (a frozen __init__ sets each of its 27
    fields through object.__setattr__, a third of the cost of building the context)."""

    obs: JobObservation
    now: float
    act: Activity  # CPU / GPU rates over the recent window
    log: LogFacts
    hint: PhaseHint | None  # the phase the log last announced
    started: float  # the job's start (or first sight)
    age: float  # seconds since `started`
    log_known: bool  # no log to follow, or the probe has read it at least once
    last_log: float | None  # when the log last grew (or was last written, before we looked)
    quiet_from: float  # since when nothing was logged
    quiet_s: float
    threshold: float  # the job's stall_after
    quiet_limit: float  # the job's rhythm's limit on a quiet log (<= threshold)
    gpu_busy: bool
    gpu_idle: bool
    gpu_spin: bool  # ~100% util at idle power: a kernel waiting (a collective), not computing
    spin_idx: tuple[int, ...]
    cpu_busy: bool
    cpu_flat: bool
    buffered: bool  # Python stdout block-buffered into a file or pipe
    stdout_line: str | None  # evidence lines, ready to show
    gpu_lines: tuple[str, ...]
    cpu_line: str | None
    progress_line: str | None
    log_line: str
    live_phase: str | None = None  # the last phase shown while the processes were alive


@dataclass(slots=True)
class Decision:
    """What the rules concluded; `infer_phase` turns it into a Verdict (keeping `since` stable)."""

    phase: str
    detail: str | None
    confidence: float
    evidence: Sequence[str | None]  # None entries are facts that did not apply; dropped
    advice: str
    since: float
    actions: tuple[str, ...] = ()
    # Evidence that may change the shown phase at once (a process gone, a traceback, a log line saying
    # so); anything else must hold for a few samples first (jobs/hysteresis.py).
    decisive: bool = False


# ----------------------------------------------------------------------------- the engine
def infer_phase(obs: JobObservation, now: float, previous: Verdict | None = None) -> Verdict:
    d = _decide(_context(obs, now, previous.memory.live_phase if previous is not None else None))
    d, since_note = _first_seen_mid_run(obs, now, previous, d)
    # `since` holds while the phase does; a new phase starts at its own natural time, but never before
    # the phase it follows began (history never goes back in time) nor after now.
    if previous is not None and previous.phase == d.phase:
        since = previous.since
    else:
        since = min(now, d.since)
        if previous is not None:
            since = max(since, previous.since)
    evidence = tuple(dict.fromkeys(e for e in d.evidence if e))
    candidate = Verdict(d.phase, since, max(0.0, min(1.0, d.confidence)), d.detail, evidence, d.advice, d.actions)
    return settle(previous, candidate, d.decisive or obs.exit is not None, alive=obs.exit is None,
                  since_note=since_note)


def _first_seen_mid_run(obs: JobObservation, now: float, previous: Verdict | None,
                        d: Decision) -> tuple[Decision, str | None]:
    """A job first seen long after it started: its first known phase did not begin when gpuwatch started
    looking. Date it from what is known (the process start) and say so in the evidence, for as long as
    that phase holds."""
    if previous is not None and previous.memory.since_note and previous.phase == d.phase:
        note = previous.memory.since_note
        return _with(d, d.since, [*d.evidence, note]), note
    if obs.exit is not None or not obs.samples or obs.started_at is None or d.phase == "unknown":
        return d, None
    if previous is not None and previous.memory.known:
        return d, None  # a later phase change: its own time is known
    first = obs.samples[0].time
    if first - obs.started_at < MID_RUN_S or d.since < first - 0.5:
        return d, None  # seen from its start, or the decision already dates itself (the log's own times)
    note = f"since: process start {fmt_duration(now - obs.started_at)} ago (first seen mid-run)"
    return _with(d, obs.started_at, [*d.evidence, note]), note


def _with(d: Decision, since: float, evidence: list) -> Decision:
    """`d` with another start and evidence (built directly: dataclasses.replace costs ~10x more)."""
    return Decision(d.phase, d.detail, d.confidence, evidence, d.advice, since, d.actions, d.decisive)


def _context(obs: JobObservation, now: float, live_phase: str | None = None) -> DecisionContext:
    """The facts every rule of the engine reads, derived once from the observation."""
    log = obs.log
    act = measure_activity(obs.samples, now, extremes=False)
    first_seen = obs.samples[0].time if obs.samples else now
    started = obs.started_at if obs.started_at is not None else first_seen
    age = max(0.0, now - started)
    last_log = log.last_growth_at
    log_known = log.path is None or log.observed  # no log to follow, or the probe has read it
    if last_log is None and log.path and log.observed and log.mtime is not None and (log.size or 0) > 0:
        last_log = min(now, log.mtime)  # bytes written before we looked: silent since the last write
    if last_log is not None:
        quiet_from = last_log
    elif log.path and log.observed and log.mtime is not None:
        quiet_from = min(now, max(started, log.mtime))  # empty since it was created or truncated
    else:
        quiet_from = started
    quiet_s = max(0.0, now - quiet_from) if log_known else 0.0
    threshold = obs.stall_after_s
    buffered, stdout_line = buffering_of(obs)
    # The quiet period starts after the sample that saw the log's last growth: that sample still shows
    # the work that wrote the line (a rank's last all-reduce at full power), not the silence.
    # Only a GPU at spin util and below working power now can be spinning over the quiet period
    # (the period's minimum util and peak power include this sample): else skip that second look.
    quiet_act = act
    if any(g.util_pct is not None and g.util_pct >= GPU_SPIN_UTIL
           and (g.power_fraction is None or g.power_fraction < GPU_WORKING_POWER_FRACTION or gpm_waiting(g))
           for g in act.gpus.values()):
        quiet_act = measure_activity(obs.samples, now, window=max(1.0, min(RATE_WINDOW_S, quiet_s) - 0.05))
    gpu_busy, gpu_idle, gpu_spin, spin_idx = gpu_busy_facts(act, quiet_act)
    gpu_lines = gpu_evidence(act)
    cpu_line = cpu_evidence(act)
    progress_line = progress_evidence(log.progress)
    log_name = f" ({log.path.rsplit('/', 1)[-1]})" if log.path else ""
    if not log_known:
        log_line = f"log not read yet{log_name}"
    elif last_log is not None:
        log_line = f"log silent {fmt_duration(quiet_s)}"
    elif log.path is None:
        log_line = f"no log file to follow (stdout -> {obs.stdout.kind})" if obs.stdout else "no log file to follow"
    elif log.size == 0:
        log_line = f"log empty after {fmt_duration(quiet_s)}{log_name}"
    else:
        log_line = f"no log output seen in {fmt_duration(quiet_s)}{log_name}"
    if log.error:
        log_line += f" (log unreadable: {log.error})"

    return DecisionContext(
        obs=obs, now=now, act=act, log=log, hint=log.hint, started=started, age=age, log_known=log_known,
        last_log=last_log, quiet_from=quiet_from, quiet_s=quiet_s, threshold=threshold,
        quiet_limit=_quiet_limit(obs, threshold, act, spin_idx),
        gpu_busy=gpu_busy, gpu_idle=gpu_idle, gpu_spin=gpu_spin, spin_idx=tuple(spin_idx),
        cpu_busy=act.cpu_cores is not None and act.cpu_cores >= CPU_BUSY_CORES,
        cpu_flat=act.cpu_cores is not None and act.cpu_cores < CPU_FLAT_CORES,
        buffered=buffered, stdout_line=stdout_line, gpu_lines=tuple(gpu_lines), cpu_line=cpu_line,
        progress_line=progress_line, log_line=log_line, live_phase=live_phase,
    )


def _quiet_limit(obs: JobObservation, threshold: float, act: Activity, spin_idx: list[int]) -> float:
    """How long the log may be quiet: the job's rhythm's limit (at most stall_after), and at most
    GPM_SPIN_STALL_S where GPM confirms a GPU of the job spins."""
    limit = threshold if obs.quiet_limit_s is None else min(threshold, obs.quiet_limit_s)
    if spin_idx and any(gpm_waiting(act.gpus[i]) for i in spin_idx if i in act.gpus):
        limit = min(limit, GPM_SPIN_STALL_S)
    return limit


def _decide(ctx: DecisionContext) -> Decision:
    """The verdict's content, rule by rule, worst news first."""
    obs, now, act, log, hint = ctx.obs, ctx.now, ctx.act, ctx.log, ctx.hint
    if obs.exit is not None:
        return _ended(ctx)

    failure = log.failure
    if failure is not None:
        where = f" (rank {failure.rank})" if failure.rank is not None else ""
        ev = [f"log: {failure.summary}{where}", f"{log.failures} error line(s) since the last progress"
              if log.failures > 1 else None, *ctx.gpu_lines[:2], ctx.cpu_line, "processes still running"]
        advice, actions = {
            "oom": ("out of GPU memory: kill the survivors, then lower the batch size", (KILL,)),
            "nccl-timeout": ("a collective timed out: dump the stacks to find the rank that stopped", (DUMP,)),
        }.get(failure.detail, ("processes are still running: dump their stacks first, then kill them", (DUMP, KILL)))
        return Decision("crashed", failure.detail, 0.85, ev, advice, failure.time, actions, decisive=True)

    compilers = act.compilers_recent
    workers_new = obs.compile_worker_since is not None and (
        log.last_progress_at is None or obs.compile_worker_since > log.last_progress_at
    )
    # Training progress logged after the last compiler process was seen: the compile is over, even
    # where the GPU does not show it (CPU training, or a GPU reading a frame behind).
    trained_since = (log.last_progress_at is not None and act.compilers_last_at is not None
                     and log.last_progress_at > act.compilers_last_at)
    compiling = bool(compilers) and not ctx.gpu_busy and not trained_since
    if not compiling and act.compile_workers and not ctx.gpu_busy and ctx.cpu_busy and workers_new:
        compiling = True  # the worker pool just appeared and nothing has trained since
    if not compiling and hint is not None and hint.phase == "compiling" and ctx.cpu_busy and not ctx.gpu_busy:
        compiling = True  # dynamo tracing in the main process, before any compiler child
    if compiling:
        ev = [
            f"compiler processes: {', '.join(compilers)}" if compilers else None,
            f"inductor compile workers: {act.compile_workers}" if act.compile_workers else None,
            ctx.cpu_line, *ctx.gpu_lines[:2],
            f"log: {hint.text[:120]}" if hint is not None and hint.phase == "compiling" else None,
            ctx.log_line if ctx.quiet_s >= 60 else None,
        ]
        since = hint.since if hint is not None and hint.phase == "compiling" else (obs.compile_worker_since or now)
        detail = hint.detail if hint is not None and hint.phase == "compiling" else "torch.compile"
        return Decision("compiling", detail, 0.8 if compilers else 0.65, ev, "first compile can take minutes; wait",
                        since)

    states = act.states
    if states and all(s == "T" for s in states):
        return Decision("stalled", "stopped", 0.9, ["process stopped (state T)", ctx.log_line, *ctx.gpu_lines[:2]],
                        "the process is stopped (SIGSTOP / ^Z): send it SIGCONT, or kill it", now, (KILL,))

    if not ctx.log_known and hint is None and not ctx.gpu_busy:
        # First sight: the log has not been read yet. Say so rather than guess.
        if ctx.age < min(ctx.threshold, YOUNG_S):
            ev = [f"started {fmt_duration(ctx.age)} ago", ctx.log_line, ctx.cpu_line, *ctx.gpu_lines[:2]]
            return Decision("starting", None, 0.5, ev, "", ctx.started)
        ev = [f"first seen, started {fmt_duration(ctx.age)} ago", ctx.log_line,
              ctx.cpu_line or "CPU rate not measured yet", *ctx.gpu_lines[:2]]
        return Decision("unknown", "observing", 0.2, ev, "", ctx.started)  # not known since it started
    if ctx.quiet_s < ctx.quiet_limit:
        return _active(ctx)
    if ctx.quiet_s < ctx.threshold and not ctx.gpu_spin and not (
            ctx.cpu_flat and not ctx.gpu_busy and (ctx.gpu_idle or not act.gpus)):
        # Past the rhythm's limit, not the ceiling: only a job with nothing moving (CPU flat, its GPUs
        # idle) or a spinning GPU is judged on its silence this early; anything else still works.
        return _active(ctx)

    # ---- the log has been quiet past the threshold
    quiet_since = ctx.quiet_from
    progress_line = progress_evidence(log.progress, with_eta=False)  # an ETA from before the silence is stale
    out = obs.output
    if ctx.gpu_spin:
        spin_gpus = ", ".join(f"GPU{i}" for i in ctx.spin_idx)
        gpm = [gpm_spin_line(act.gpus[i]) for i in ctx.spin_idx if i in act.gpus and gpm_waiting(act.gpus[i])]
        ev = [ctx.log_line, obs.rhythm_line, *gpm, *ctx.gpu_lines,
              None if gpm else f"{spin_gpus}: ~100% util at idle power: a kernel waiting, not computing",
              f"one rank spins {act.max_rank_cores:.1f} cores" if act.max_rank_cores else ctx.cpu_line,
              "GPU memory flat" if all(abs(d) < 64 for d in act.gpu_mem_delta.values()) else None]
        return Decision("stalled", "nccl-spin", 0.8, ev,
                        "a collective is waiting for a rank that stopped: dump the stacks of every rank to find it",
                        quiet_since, (DUMP,))
    if ctx.gpu_busy:
        detail = "buffered-stdout" if ctx.buffered else "not-logging"
        ev = [ctx.log_line, *ctx.gpu_lines, ctx.cpu_line, ctx.stdout_line, progress_line]
        advice, actions = ((BUFFERED_ADVICE, (RESTART,)) if ctx.buffered
                           else ("working but not logging: dump the stacks to see where", (DUMP,)))
        return Decision("silent", detail, 0.8 if ctx.buffered else 0.6, ev, advice, quiet_since, actions)
    if ctx.cpu_busy:
        if hint is not None and hint.phase == "loading":
            ev = [ctx.log_line, ctx.cpu_line, f"log: {hint.text[:120]}", *ctx.gpu_lines[:2]]
            return Decision("loading", hint.detail, 0.6, ev, "", hint.since)
        detail = "buffered-stdout" if ctx.buffered else "cpu-busy"
        ev = [ctx.log_line, ctx.cpu_line, *ctx.gpu_lines[:2], ctx.stdout_line, progress_line]
        advice, actions = ((BUFFERED_ADVICE, (RESTART,)) if ctx.buffered
                           else ("busy on CPU without logging: dump the stacks to see where", (DUMP,)))
        return Decision("silent", detail, 0.7 if ctx.buffered else 0.55, ev, advice, quiet_since, actions)
    if out is not None and out.newest_mtime is not None and now - out.newest_mtime < ctx.quiet_limit:
        ev = [f"output dir written {fmt_duration(now - out.newest_mtime)} ago"
              + (f" ({out.newest_name})" if out.newest_name else ""), ctx.log_line, ctx.cpu_line, *ctx.gpu_lines[:2]]
        return Decision("checkpointing", "output-dir", 0.5, ev, "", out.newest_mtime)
    if act.cpu_cores is None:
        # One sample: no CPU rate yet. A job is never called stalled on a single look.
        ev = [ctx.log_line, "CPU rate not measured yet (one sample)", *ctx.gpu_lines[:2]]
        return Decision("unknown", "observing", 0.2, ev, "", now)
    if states and any(s == "D" for s in states):
        if hint is None or hint.phase in ("loading", "starting", "checkpointing"):
            phase = hint.phase if hint is not None and hint.phase != "starting" else "loading"
            return Decision(phase, "io-wait", 0.5, ["process in disk wait (state D)", ctx.log_line, ctx.cpu_line], "",
                            hint.since if hint is not None else ctx.started)
        ev = ["process in disk wait (state D)", ctx.log_line, ctx.cpu_line, *ctx.gpu_lines[:2]]
        return Decision("stalled", "io-wait", 0.6, ev,
                        "stuck on I/O: check the filesystem; dump the stacks to see which call waits",
                        quiet_since, (DUMP,))
    # Nothing moves: no log, no CPU, no GPU work.
    held = any((g.mem_used_mib or 0) > 0 for g in act.gpus.values())
    ev = [ctx.log_line, obs.rhythm_line, ctx.cpu_line or "CPU time unknown", *ctx.gpu_lines,
          "GPU memory held, no kernels running" if held and ctx.gpu_idle else None,
          f"last log phase: {hint.phase} ({fmt_duration(now - hint.time)} ago)" if hint is not None else None,
          progress_line]
    confidence = 0.85 if ctx.cpu_flat else 0.6
    return Decision("stalled", "no-progress", confidence, ev,
                    "no sign of progress: dump the stacks to see where it waits, or kill it", quiet_since,
                    (DUMP, KILL))


def _active(ctx: DecisionContext) -> Decision:
    """The log is not quiet past the threshold (or the job is young): trust the log, check resources."""
    obs, now, act, log, hint = ctx.obs, ctx.now, ctx.act, ctx.log, ctx.hint
    last_line = f"last log line {fmt_duration(ctx.quiet_s)} ago" if log.last_growth_at is not None else ctx.log_line
    warn_buffer = ctx.stdout_line if ctx.buffered and log.total_bytes == 0 else None
    spin_warning = "GPU ~100% util at idle power: may be waiting in a collective" if ctx.gpu_spin else None
    if hint is not None and hint.phase == "starting" and ctx.cpu_busy:
        # The last phase line is a start-up banner (torchrun's), but since it the GPUs have computed (high
        # util at well above held-idle power) and the CPU works: training, though no rule matched the
        # job's own lines. Once so, it stays training until the log's silence says otherwise.
        computed = [s.time for s in obs.samples if s.time >= hint.time and is_computing(s)]
        if computed:
            now_computing = bool(obs.samples) and is_computing(obs.samples[-1])
            ev = [*ctx.gpu_lines[:4], ctx.cpu_line,
                  f"GPUs computing since {fmt_duration(now - computed[0])} ago" if now_computing
                  else f"GPUs last computed {fmt_duration(now - computed[-1])} ago",
                  f"last phase line: {hint.text[:120]}", last_line, warn_buffer, spin_warning]
            advice, actions = (UNFLUSHED_ADVICE, (RESTART,)) if warn_buffer else ("", ())
            return Decision("training", None, 0.55 if now_computing else 0.45, ev, advice, computed[0], actions)
    if hint is not None and hint.phase == "loading" and bar_full(log) and obs.samples and is_computing(obs.samples[-1]):
        # The loading bar reached its total and since then the GPUs compute (high util, well above
        # held-idle power): the load is over and the job trains, though no line of its own said so yet.
        computed = [s.time for s in obs.samples if s.time >= hint.time and is_computing(s)]
        if computed:
            ev = [f"log: {phase_progress_evidence(log)} (done)", *ctx.gpu_lines[:4],
                  f"GPUs computing since {fmt_duration(now - computed[0])} ago", ctx.cpu_line, last_line]
            return Decision("training", None, 0.6, ev, "", computed[0])
    if hint is not None:
        phase = hint.phase
        ev = [f"log: {hint.text[:120]}", last_line]
        if phase == "training":
            ev.append(ctx.progress_line)
        else:
            ev.append(phase_progress_evidence(log))
        ev += [*ctx.gpu_lines[:4], ctx.cpu_line, spin_warning]
        confidence = 0.9 if ctx.quiet_s < min(60.0, ctx.threshold / 2) else 0.7
        if phase == "training" and ctx.gpu_idle and obs.has_gpus and act.gpus and ctx.quiet_s >= 60:
            confidence = 0.5  # the log says training but the GPUs have gone idle
        return Decision(phase, hint.detail, confidence, ev, "", hint.since, decisive=True)  # the log says so
    # No rule has matched yet: judge from the resources.
    if ctx.gpu_busy:
        ev = [*ctx.gpu_lines, ctx.cpu_line, last_line, warn_buffer]
        advice, actions = (UNFLUSHED_ADVICE, (RESTART,)) if warn_buffer else ("", ())
        return Decision("training", None, 0.55, ev, advice, obs.samples[0].time if obs.samples else now, actions)
    if ctx.age < ctx.threshold:
        ev = [f"started {fmt_duration(ctx.age)} ago", last_line, ctx.cpu_line, *ctx.gpu_lines[:2], warn_buffer]
        return Decision("starting", None, 0.7, ev, "", obs.started_at if obs.started_at is not None else now)
    if log.last_growth_at is not None:
        ev = [last_line, ctx.cpu_line, *ctx.gpu_lines[:2]]
        return Decision("unknown", "no-rule-matched", 0.3, ev, "add a [[rules]] pattern for this job's log lines", now)
    ev = [ctx.log_line, ctx.cpu_line, *ctx.gpu_lines[:2], warn_buffer]
    return Decision("unknown", None, 0.3, ev, "", now)


def log_phase_evidence(log_lines: tuple, samples: Sequence[ResourceSample], now: float,
                       since_note: str | None) -> tuple[str, ...]:
    """The evidence `infer_phase` writes at `now` for a live job whose log announced its phase and
    whose GPUs cannot be spinning (`_active`, then the mid-run note), made from its values alone:
    `log_lines` (`log_evidence`: the phase line, the last line's age, the progress), the latest GPU
    readings, the CPU rate over the window. For a verdict judged again whose every deciding fact is
    where it was (judging.py says when): nothing else of the engine would come out otherwise."""
    last = samples[-1]
    gpus: dict[int, GpuReading] = {}
    for g in last.gpus:
        gpus[g.index] = g
    _, _, first = samples_window(samples, now, RATE_WINDOW_S)
    span = last.time - first.time
    cpu_line = None
    if span > 0:
        _, child_cores, cpu_cores = cpu_rates(first, last, span)
        cpu_line = cpu_rate_line(cpu_cores, child_cores, span)
    ev = [*log_lines, *gpu_reading_lines(gpus)[:4], cpu_line]
    if since_note:
        ev.append(since_note)
    return tuple(dict.fromkeys(e for e in ev if e))


def _ended(ctx: DecisionContext) -> Decision:
    """Every main process is gone: how it ended, from the exit status where known, else from the log."""
    obs, log = ctx.obs, ctx.log
    progress_line = progress_evidence(log.progress, with_eta=False)  # no ETA for a job that has ended
    ex = obs.exit
    assert ex is not None
    ended = ex.ended_at
    failure = log.failure
    code = ex.exit_code
    sig = ex.signal
    if sig is None and code is not None and code < 0:
        sig, code = -code, None  # subprocess convention: -9 is SIGKILL
    ev: list[str | None] = []
    fail_line = None
    if failure is not None:
        where = f" (rank {failure.rank})" if failure.rank is not None else ""
        fail_line = f"log: {failure.summary}{where}"
    tail_advice = "read the end of the log; dismiss the job when done"
    if obs.killed_by is not None:
        status = (f"exit: {signal_name(sig)} ({sig})" if sig is not None
                  else f"exit code {code}" if code is not None else "exit status unknown")
        ev = [obs.killed_by, status, ctx.live_phase and f"was {ctx.live_phase} when killed", progress_line]
        return Decision("crashed", "killed", 0.99, ev, tail_advice, ended, (DISMISS,))
    if sig is not None:
        ev = [f"killed by {signal_name(sig)} ({sig})", fail_line, progress_line,
              ctx.stdout_line if ctx.buffered else None]
        if ctx.buffered:
            ev.append("buffered stdout was lost with the process")
        advice = ("SIGKILL: check `dmesg` for the OOM killer; dismiss the job when done" if sig == 9 else tail_advice)
        return Decision("crashed", "signal", 0.95, ev, advice, ended, (DISMISS,))
    if code is not None:
        if code == 0:
            ev = ["exit code 0", progress_line, fail_line]
            return Decision("finished", None, 0.95, ev, "", ended)
        detail = failure.detail if failure is not None else "exit-code"
        extra = None
        if code > 128 and code - 128 < 65:
            extra = f"exit code {code} = 128 + {signal_name(code - 128)}"
            if failure is None:
                detail = "signal"
        ev = [f"exit code {code}", extra, fail_line, progress_line]
        return Decision("crashed", detail, 0.95, ev, tail_advice, ended, (DISMISS,))
    # Exit status unknown (the probe did not start the process): read the log's last word.
    ev_unknown = "process gone, exit status unknown (not started by gpuwatch)"
    p = log.progress
    if log.finished_at is not None and (failure is None or (log.finished_seq or 0) > failure.seq):
        # The run's own completion summary, after any error it survived: a clean finish.
        ev = [f"log: {log.finished_text}" if log.finished_text else "log: training finished", ev_unknown,
              progress_line]
        return Decision("finished", None, 0.8, ev, "", ended)
    if failure is not None:
        return Decision("crashed", failure.detail, 0.85, [fail_line, ev_unknown, progress_line], tail_advice,
                        failure.time, (DISMISS,))
    if log.exit_code is not None and log.exit_code != 0:
        # A launcher (torchrun, deepspeed, accelerate) reported its child's failing exit code.
        return Decision("crashed", "child-failed", 0.85, [f"log: exit code {log.exit_code}", ev_unknown, progress_line],
                        tail_advice, ended, (DISMISS,))
    hint = ctx.hint
    if hint is not None and hint.phase == "checkpointing" and ctx.live_phase != "stalled":
        # The last thing the run said was a save, and then it ended: its final save.
        ev = [f"log ends with a save: {hint.text[:120]}", ev_unknown, progress_line]
        return Decision("finished", None, 0.6, ev, "", ended)
    # We did not start it, so its exit status and any signal are unknowable: say so, then the usual causes.
    gone = "process gone without a completion line or a traceback; exit status unknown (not started by gpuwatch)"
    causes = "likely causes: a signal (SIGTERM or SIGKILL: kill, a scheduler, the OOM killer) or a segfault"
    check = "check `dmesg` (OOM killer, segfault) and whether something killed it; "
    if ctx.live_phase == "stalled":
        # A hung job that then vanished was ended from outside: being at (or near) its total is no
        # completion line. Killed if a buffered stdout was lost with it, else just gone.
        flushed = log.last_growth_at is not None and ended - log.last_growth_at <= 15.0
        detail = "killed" if ctx.buffered and not flushed else "vanished"
        at = f"stopped at step {p.step:g}/{p.total:g}" if p is not None and p.step is not None and p.total else None
        ev = [gone, "it was stalled (no progress) before it vanished", at, causes, progress_line]
        return Decision("crashed", detail, 0.7, ev, check + tail_advice, ended, (DISMISS,))
    complete = p is not None and p.step is not None and p.total is not None and p.step >= p.total
    last_epoch = (p is not None and p.epoch is not None and p.epochs is not None and p.epochs > 0
                  and p.epoch >= p.epochs)
    if last_epoch and not complete:
        ev = [f"it was in its last epoch ({p.epoch:g}/{p.epochs:g}) when it ended; no completion line",
              ev_unknown, progress_line]
        return Decision("finished", None, 0.55, ev, "", ended)
    if complete:
        # Not a completion line, but the job was working right up to its last step: most likely done.
        ev = [f"progress reached its total ({p.step:g}/{p.total:g}) while working; no completion line",
              ev_unknown, progress_line]
        return Decision("finished", None, 0.6, ev, "", ended)
    if p is not None and p.step is not None and p.total is not None:
        ev = [gone, f"stopped at step {p.step:g}/{p.total:g}", causes]
        return Decision("crashed", "vanished", 0.65, ev, check + tail_advice, ended, (DISMISS,))
    flushed_at_exit = log.last_growth_at is not None and ended - log.last_growth_at <= 15.0
    if ctx.buffered and not flushed_at_exit:
        ev = [gone, "nothing flushed at exit: a clean exit would have written the stdout buffer",
              ctx.stdout_line, causes, progress_line]
        return Decision("crashed", "killed", 0.65, ev, check + tail_advice, ended, (DISMISS,))
    if ctx.buffered and flushed_at_exit:
        ev = [ev_unknown, "stdout buffer flushed at exit (a normal exit)", progress_line]
        return Decision("finished", None, 0.55, ev, "", ended)
    ev = [gone, progress_line, causes]
    return Decision("crashed", "vanished", 0.5, ev, check + tail_advice, ended, (DISMISS,))
