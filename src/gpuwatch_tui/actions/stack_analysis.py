"""What a job's Python stacks say it is doing, and which rank holds up the others. Pure functions.

Each process's main thread is classified:
  compiling   torch.compile at work (dynamo tracing, inductor codegen, triton compiling)
  data        waiting on (or inside) a DataLoader
  collective  inside a torch.distributed collective or barrier, or - in a collective hang - busy in
              the torch op that syncs on the stream (launches are asynchronous, so the waiting
              rank's stack shows the *next* op, e.g. an optimizer step, not `all_reduce`)
  lock        blocked on a lock, Event, Condition, queue, join or future
  sleep       in time.sleep
  torch       inside torch work, nothing more to say (normal training looks like this)
  running     active in other Python code;  idle: idle elsewhere
  launcher    a torchrun / accelerate / deepspeed agent (never a suspect: it only supervises)
  stopped     state T (SIGSTOP, a debugger)   gone: exited   error: no dump (permission, ...)

The rank diff: in a collective hang the ranks inside torch wait for the one that is not; that one
(idle elsewhere, stopped, or gone) is the suspect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch_tui.actions.stack_groups import StackGroup, group_stacks, groups_summary
from gpuwatch_tui.actions.stacks import Frame, ProcessDump, ThreadStack

# torch.compile's compile-time code; its run-time wrappers (eval_frame, inductor/runtime) are
# on the stack of every step of a compiled model, so they do not count.
COMPILE_PATHS = (
    "torch/_dynamo/convert_frame.py", "torch/_dynamo/symbolic_convert.py", "torch/_dynamo/output_graph.py",
    "torch/_dynamo/variables/", "torch/_dynamo/backends/", "torch/_inductor/compile_fx.py",
    "torch/_inductor/graph.py", "torch/_inductor/scheduler.py", "torch/_inductor/codegen/",
    "torch/_inductor/codecache.py", "torch/_inductor/async_compile.py", "torch/_inductor/select_algorithm.py",
    "torch/_inductor/lowering.py", "torch/_inductor/fx_passes/", "torch/_functorch/aot_autograd.py",
    "torch/_functorch/_aot_autograd/dispatch_and_compile_graph.py", "triton/compiler/",
    "torch/fx/experimental/symbolic_shapes.py",
)
LAUNCHER_PATHS = (
    "torch/distributed/elastic/agent/", "torch/distributed/run.py", "torch/distributed/launch.py",
    "accelerate/commands/launch.py", "deepspeed/launcher/",
)
DATA_PATHS = ("torch/utils/data/",)
COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py")
COLLECTIVE_NAMES = {
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier", "monitored_barrier",
    "_store_based_barrier", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter", "send",
    "recv", "isend", "irecv", "wait", "batch_isend_irecv",
}
LOCK_FRAMES = {
    ("threading.py", "Condition.wait"), ("threading.py", "Event.wait"), ("threading.py", "Semaphore.acquire"),
    ("threading.py", "Thread.join"), ("threading.py", "Thread._wait_for_tstate_lock"),
    ("threading.py", "Barrier.wait"), ("threading.py", "Condition.wait_for"), ("queue.py", "Queue.get"),
    ("queue.py", "Queue.put"), ("_base.py", "Future.result"), ("_base.py", "wait"),
    ("synchronize.py", "SemLock.__enter__"), ("synchronize.py", "Condition.wait"), ("synchronize.py", "Event.wait"),
    ("connection.py", "Connection.recv"), ("connection.py", "_recv_bytes"), ("popen_fork.py", "Popen.wait"),
}
# an idle frame whose line calls one of these is blocked in C (no Python frame of its own)
LOCK_CALL = re.compile(r"\.(acquire|wait|join|get|put|result|recv)\(|\bwith\s+\w*lock\b", re.IGNORECASE)
SLEEP_CALL = re.compile(r"\bsleep\(")
# with --native, CPython's own C functions say what an idle line is blocked in
NATIVE_SLEEP = {"time_sleep", "pysleep"}
NATIVE_LOCK = {"lock_PyThread_acquire_lock", "rlock_acquire", "acquire_timed", "PyThread_acquire_lock_timed",
               "_queue_SimpleQueue_get_impl", "_thread_lock_acquire", "_thread_RLock_acquire"}

IN_TORCH_KINDS = ("collective", "torch", "compiling")
OUTSIDE_KINDS = ("idle", "sleep", "lock", "running", "data", "stopped", "gone")
JOB_KIND_ORDER = ("collective-hang", "compiling", "collective", "data", "lock", "sleep", "torch", "running",
                  "idle", "stopped", "gone", "launcher", "error")


def _path(frame: Frame) -> str:
    return "/" + frame.filename.replace("\\", "/")


def _in(frame: Frame, parts: Sequence[str]) -> bool:
    p = _path(frame)
    return any("/" + part in p for part in parts)


def _base(frame: Frame) -> str:
    return frame.filename.replace("\\", "/").rsplit("/", 1)[-1]


def is_torch_frame(frame: Frame) -> bool:
    return "/torch/" in _path(frame)


def is_collective_frame(frame: Frame) -> bool:
    if not _in(frame, ("torch/distributed/",)) or _in(frame, LAUNCHER_PATHS):
        return False
    short = frame.name.rsplit(".", 1)[-1]
    return short in COLLECTIVE_NAMES or _in(frame, COLLECTIVE_FILES)


def is_lock_frame(frame: Frame) -> bool:
    return (_base(frame), frame.name) in LOCK_FRAMES


@dataclass(frozen=True)
class ProcessVerdict:
    pid: int
    rank: int | None
    label: str  # "rank 1 (pid 1085)" or "pid 1085"
    kind: str
    why: str  # words, with the frame that decided it
    frame: Frame | None = None
    active: bool | None = None  # the main thread's py-spy flag; None without a stack
    differs: tuple[bool, ...] = ()  # per main-thread frame: not shared by every rank

    @property
    def in_torch(self) -> bool:
        return self.kind in IN_TORCH_KINDS


@dataclass(frozen=True)
class StackAnalysis:
    processes: tuple[ProcessVerdict, ...]
    job_kind: str  # one of JOB_KIND_ORDER; "unknown" with nothing to go on
    suspects: tuple[ProcessVerdict, ...]
    summary: str  # what the stacks say, in words
    groups: tuple[StackGroup, ...] = ()  # ranks at the same frames, largest group first

    @property
    def grouped(self) -> str:
        """One line per group of ranks, or "" for a single process."""
        return groups_summary(self.groups) if len(self.groups) > 1 or sum(g.size for g in self.groups) > 1 else ""

    def of(self, pid: int) -> ProcessVerdict | None:
        return next((p for p in self.processes if p.pid == pid), None)


def _first(frames: Sequence[Frame], test) -> Frame | None:
    return next((f for f in frames if test(f)), None)


def _state(active: bool) -> str:
    return "active" if active else "idle"


def classify_process(dump: ProcessDump) -> ProcessVerdict:
    """One process on its own (the job-level pass may upgrade `torch` to `collective`)."""
    def verdict(kind: str, why: str, frame: Frame | None = None, active: bool | None = None) -> ProcessVerdict:
        return ProcessVerdict(dump.pid, dump.rank, dump.label, kind, why, frame, active)

    if not dump.ok:
        if dump.error_code == "stopped" or dump.state_before == "T":
            return verdict("stopped", dump.message or "stopped (state T)")
        if dump.error_code in ("gone", "reused"):
            return verdict("gone", dump.message or "exited")
        return verdict("error", dump.message or "no dump")
    main = dump.main_thread
    if dump.stopped:
        top = main.frames[0] if main and main.frames else None
        at = f" at {top.where}" if top else ""
        return verdict("stopped", f"stopped (state T: SIGSTOP or a debugger){at}", top, main.active if main else None)
    if main is None or not main.frames:
        return verdict("idle", "no Python frame on the main thread", None, main.active if main else None)
    frames = tuple(f for f in main.frames if not f.native) or main.frames
    native = {f.name for f in main.frames if f.native}
    active = main.active
    state = _state(active)
    if (f := _first(frames, lambda f: _in(f, LAUNCHER_PATHS))) is not None:
        return verdict("launcher", f"a launcher agent supervising its workers ({f.where})", f, active)
    if (f := _first(frames, lambda f: _in(f, COMPILE_PATHS))) is not None:
        return verdict("compiling", f"{state} in torch.compile: {f.where}", f, active)
    if (f := _first(frames, lambda f: _in(f, DATA_PATHS))) is not None:
        return verdict("data", f"{state} in the DataLoader: {f.where}", f, active)
    if (f := _first(frames, is_collective_frame)) is not None:
        return verdict("collective", f"{state} in a collective: {f.where}", f, active)
    top = frames[0]
    if (f := _first(frames[:3], is_lock_frame)) is not None:
        f = _outermost_lock_frame(frames, f)
        return verdict("lock", f"{state}, blocked in {f.where}, called from {_caller(frames, f)}", f, active)
    code = f": `{top.source}`" if top.source else ""
    if not active and (native & NATIVE_SLEEP or (top.source and SLEEP_CALL.search(top.source))):
        return verdict("sleep", f"idle in time.sleep at {top.where}{code}", top, active)
    if not active and (native & NATIVE_LOCK or (top.source and LOCK_CALL.search(top.source))):
        return verdict("lock", f"idle, blocked at {top.where}{code}", top, active)
    if (f := _first(frames, is_torch_frame)) is not None:
        return verdict("torch", f"{state} inside torch: {f.where}", f, active)
    return verdict("running" if active else "idle", f"{state} at {top.where}{code}, no torch frame", top, active)


def _outermost_lock_frame(frames: Sequence[Frame], first: Frame) -> Frame:
    """Event.wait says more than the Condition.wait it calls: the last of the run of lock frames."""
    i = frames.index(first)
    while i + 1 < len(frames) and is_lock_frame(frames[i + 1]):
        i += 1
    return frames[i]


def _caller(frames: Sequence[Frame], frame: Frame) -> str:
    """The first frame below `frame` that is not the standard library's own plumbing."""
    i = frames.index(frame)
    for f in frames[i + 1:]:
        if not is_lock_frame(f) and _base(f) not in ("threading.py", "queue.py"):
            return f.where
    return frames[-1].where


def _frame_key(f: Frame) -> tuple[str, str, int]:
    return (f.name, f.short_filename or _base(f), f.line)


def _rank_diff(dumps: Sequence[ProcessDump]) -> dict[tuple[int, int | None], tuple[bool, ...]]:
    # Keyed by (pid, rank): ranks on different hosts may share a pid.
    stacks = {(d.pid, d.rank): d.main_thread.frames for d in dumps if d.ok and d.main_thread is not None}
    if len(stacks) < 2:
        return {pid: tuple(False for _ in frames) for pid, frames in stacks.items()}
    keysets = {pid: {_frame_key(f) for f in frames} for pid, frames in stacks.items()}
    shared = set.intersection(*keysets.values())
    return {pid: tuple(_frame_key(f) not in shared for f in frames) for pid, frames in stacks.items()}


def _sort_key(d: ProcessDump) -> tuple[int, int]:
    return (d.rank if d.rank is not None else 1 << 30, d.pid)


def analyse(dumps: Sequence[ProcessDump]) -> StackAnalysis:
    """Classify every process of one job, mark the frames that differ between ranks, name the suspect."""
    dumps = sorted(dumps, key=_sort_key)
    verdicts = [classify_process(d) for d in dumps]
    launchers = [v for v in verdicts if v.kind == "launcher"]
    diff = _rank_diff([d for d, v in zip(dumps, verdicts) if v.kind != "launcher"])
    verdicts = [_with_diff(v, diff.get((v.pid, v.rank), ())) for v in verdicts]
    ranks = [v for v in verdicts if v.kind != "launcher"]
    waiting = [v for v in ranks if v.kind in ("collective", "torch")]
    outside = [v for v in ranks if v.kind in OUTSIDE_KINDS]
    if len(ranks) >= 2 and waiting and outside and not any(v.kind == "compiling" for v in ranks):
        waiting_pids = {(v.pid, v.rank) for v in waiting}
        verdicts = [_as_waiting(v) if (v.pid, v.rank) in waiting_pids else v for v in verdicts]
        waiting = [v for v in verdicts if (v.pid, v.rank) in waiting_pids]
        summary = _hang_summary(outside, waiting)
        groups = group_stacks(dumps, [v.kind for v in verdicts], [(v.pid, v.rank) for v in outside])
        return StackAnalysis(tuple(verdicts), "collective-hang", tuple(outside), summary, groups)
    kinds = {v.kind for v in ranks} or {v.kind for v in launchers}
    job_kind = next((k for k in JOB_KIND_ORDER if k in kinds), "unknown")
    summary = _plain_summary(job_kind, ranks or launchers)
    groups = group_stacks(dumps, [v.kind for v in verdicts])
    return StackAnalysis(tuple(verdicts), job_kind, (), summary, groups)


def _with_diff(v: ProcessVerdict, differs: tuple[bool, ...]) -> ProcessVerdict:
    return ProcessVerdict(v.pid, v.rank, v.label, v.kind, v.why, v.frame, v.active, differs)


def _as_waiting(v: ProcessVerdict) -> ProcessVerdict:
    why = v.why if v.kind == "collective" else f"{v.why}: the torch op syncs on a collective that never completes"
    return ProcessVerdict(v.pid, v.rank, v.label, "collective", why, v.frame, v.active, v.differs)


def _names(vs: Sequence[ProcessVerdict]) -> str:
    return ", ".join(v.label for v in vs)


def _hang_summary(outside: Sequence[ProcessVerdict], waiting: Sequence[ProcessVerdict]) -> str:
    who = "; ".join(f"{v.label}: {v.why}" for v in outside)
    verb = "is" if len(outside) == 1 else "are"
    return (
        f"Collective hang: suspect {_names(outside)}. {who}. Meanwhile {_names(waiting)} "
        f"{'is' if len(waiting) == 1 else 'are'} inside torch ({waiting[0].why}), waiting for the "
        f"rank{'s' if len(outside) > 1 else ''} that {verb} not."
    )


def _plain_summary(job_kind: str, vs: Sequence[ProcessVerdict]) -> str:
    if not vs:
        return "No Python stack to judge."
    lines = "; ".join(f"{v.label}: {v.kind}, {v.why}" for v in vs)
    if job_kind == "collective" and all(v.kind == "collective" for v in vs):
        return f"Every rank here waits in a collective ({lines}): the missing rank is elsewhere (another host?)."
    return lines


def phase_hint(analysis: StackAnalysis) -> tuple[str, str | None, str] | None:
    """(phase, detail, evidence line) for the phase engine, or None when the stacks decide nothing.

    A dump is one moment: ranks of a healthy job can be caught in different places too. Weigh a
    `stalled` hint only for a job that already shows no progress (no log lines, flat counters).
    """
    kind = analysis.job_kind
    if kind == "collective-hang":
        s = analysis.suspects[0]
        return ("stalled", "nccl-spin", f"py-spy: ranks wait in a collective; suspect {s.label}: {s.why}")
    pick = next((v for v in analysis.processes if v.kind == kind), None)
    if pick is None:
        return None
    evidence = f"py-spy: {pick.label} {pick.why}"
    return {
        "compiling": ("compiling", None, evidence),
        "collective": ("stalled", "nccl-spin", evidence),
        "data": ("stalled", "data", evidence),
        "lock": ("stalled", "no-progress", evidence),
        "sleep": ("stalled", "sleep", evidence),
    }.get(kind)


def frames_text(thread: ThreadStack, differs: Sequence[bool] = ()) -> list[str]:
    """A thread's frames as lines, innermost first, frames that differ between ranks marked with '*'."""
    out = []
    for i, f in enumerate(thread.frames):
        mark = "*" if i < len(differs) and differs[i] else " "
        out.append(f"{mark} {f.where}" + (f"  `{f.source}`" if f.source else ""))
    return out
