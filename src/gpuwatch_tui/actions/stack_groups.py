"""Every rank's main-thread stack, grouped: ranks that stand at the same frames form one group.

In a hang of N ranks the healthy ones stand at the same place (the same collective, the same step);
the one holding them up stands elsewhere. Groups are shown largest first, and the smallest group
that stands apart is the suspect (ByteRobust's idea). A second dump a few seconds later tells a
stuck rank (the very same frames) from a slow one (its frames moved). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwatch_tui.actions.stacks import Frame, ProcessDump

# Native frames carry addresses and offsets that differ between processes at the same place.
ADDRESS = re.compile(r"0x[0-9a-fA-F]+|\+\d+$")
LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python3", "torch/", "threading.py", "queue.py",
                 "<frozen ")
STOPPED_KINDS = {"stopped": "stopped (state T)", "gone": "gone (exited)", "error": "no stack (dump failed)"}


@dataclass(frozen=True)
class StackMember:
    pid: int
    rank: int | None
    start_ticks: int
    label: str  # "rank 3 (pid 1085)"


@dataclass(frozen=True)
class StackGroup:
    key: tuple  # the frames that define the group (addresses left out)
    where: str  # "all_reduce ← train_step (train.py:88)"
    kind: str  # the stack classifier's kind for its first member ("collective", "sleep", ...)
    members: tuple[StackMember, ...]
    suspect: bool = False
    motion: str | None = None  # after a second dump: "stuck", "moving" or "mixed"

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(m.rank for m in self.members if m.rank is not None))

    @property
    def text(self) -> str:
        """'7 ranks in all_reduce ← train_step (train.py:88): ranks 0-2,4-7' or 'rank 3 in ...'."""
        if self.size == 1:
            m = self.members[0]
            who = f"rank {m.rank}" if m.rank is not None else f"pid {m.pid}"
            head = f"{who} in {self.where}"
        else:
            head = f"{self.size} {'ranks' if self.ranks else 'processes'} in {self.where}: {fold(self.ranks) or ''}"
        tail = f" [{self.motion}]" if self.motion else ""
        return head.rstrip(": ") + tail + ("  <- suspect" if self.suspect else "")


def fold(numbers: Iterable[int]) -> str:
    """'ranks 0-2,4-7' (or 'rank 3'), runs folded."""
    nums = sorted(set(numbers))
    if not nums:
        return ""
    runs, start, prev = [], nums[0], nums[0]
    for n in nums[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ("ranks " if len(nums) > 1 else "rank ") + ",".join(runs)


def _frame_key(f: Frame) -> tuple:
    if f.native:
        return ("native", ADDRESS.sub("", f.name).strip(), (f.short_filename or f.filename).rsplit("/", 1)[-1])
    return (f.name, f.short_filename or f.filename.rsplit("/", 1)[-1], f.line)


def stack_key(dump: ProcessDump, kind: str) -> tuple:
    """What makes two ranks 'at the same place': their main thread's frames (addresses ignored); a rank
    without a stack is grouped by why (stopped, gone, no dump)."""
    main = dump.main_thread if dump.ok else None
    if main is None or not main.frames:
        return (("no-stack", kind if kind in STOPPED_KINDS else "idle"),)
    return tuple(_frame_key(f) for f in main.frames)


def _is_library(f: Frame) -> bool:
    path = "/" + (f.filename or "").replace("\\", "/")
    short = f.short_filename or ""
    return f.native or any(p in path for p in LIBRARY_PARTS) or short.startswith("torch/")


def where_text(dump: ProcessDump, kind: str) -> str:
    """The innermost frame, and the first frame of the job's own code that led there."""
    main = dump.main_thread if dump.ok else None
    if main is None or not main.frames:
        return STOPPED_KINDS.get(kind, "no Python frame")
    frames = [f for f in main.frames if not f.native] or list(main.frames)
    top = frames[0]
    own = next((f for f in frames if not _is_library(f)), None)
    if own is None or own is top:
        return top.where
    return f"{top.name} ← {own.where}"


def group_stacks(dumps: Sequence[ProcessDump], kinds: Sequence[str],
                 suspects: Iterable[tuple[int, int | None]] = ()) -> tuple[StackGroup, ...]:
    """Group the ranks (launcher agents left out) by stack; largest group first, then lowest rank.

    `kinds` are the classifier's kinds, one per dump. `suspects` are (pid, rank) the classifier already
    named (a rank outside torch while the rest wait in it): their groups are the suspects. Without one,
    the single smallest group, smaller than the largest, is."""
    by_key: dict[tuple, list] = {}
    for dump, kind in zip(dumps, kinds):
        if kind == "launcher":
            continue
        key = stack_key(dump, kind)
        member = StackMember(dump.pid, dump.rank, dump.start_ticks, dump.label)
        entry = by_key.setdefault(key, [where_text(dump, kind), kind, []])
        entry[2].append(member)
    groups = [StackGroup(k, w, kind, tuple(sorted(ms, key=_member_order))) for k, (w, kind, ms) in by_key.items()]
    groups.sort(key=lambda g: (-g.size, _member_order(g.members[0])))
    if len(groups) < 2:
        return tuple(groups)
    named = set(suspects)
    if named:
        flags = [any((m.pid, m.rank) in named for m in g.members) for g in groups]
    else:
        smallest = min(g.size for g in groups)
        odd = [g for g in groups if g.size == smallest]
        flags = [len(odd) == 1 and g is odd[0] and g.size < groups[0].size for g in groups]
    return tuple(StackGroup(g.key, g.where, g.kind, g.members, flag) for g, flag in zip(groups, flags))


def _member_order(m: StackMember) -> tuple[int, int]:
    return (m.rank if m.rank is not None else 1 << 30, m.pid)


def with_motion(groups: Sequence[StackGroup], earlier: Sequence[StackGroup]) -> tuple[StackGroup, ...]:
    """Mark each group stuck (every member at the very same frames as in the earlier dump), moving (none
    is) or mixed. A member absent from the earlier dump counts as neither."""
    before = {(m.pid, m.rank, m.start_ticks): g.key for g in earlier for m in g.members}
    out = []
    for g in groups:
        same = [before[(m.pid, m.rank, m.start_ticks)] == g.key
                for m in g.members if (m.pid, m.rank, m.start_ticks) in before]
        motion = None if not same else "stuck" if all(same) else "moving" if not any(same) else "mixed"
        out.append(StackGroup(g.key, g.where, g.kind, g.members, g.suspect, motion))
    return tuple(out)


def groups_summary(groups: Sequence[StackGroup]) -> str:
    """One line per group, largest first."""
    return "\n".join(g.text for g in groups)


def motion_summary(groups: Sequence[StackGroup]) -> str | None:
    """'stuck: the same frames in both dumps' style words for the whole job, or None without a comparison."""
    motions = [g.motion for g in groups if g.motion]
    if not motions:
        return None
    if all(m == "stuck" for m in motions):
        return "stuck: every rank stands at the same frames as in the dump before"
    if all(m == "moving" for m in motions):
        return "moving: every rank's frames changed since the dump before (slow, not hung)"
    stuck = [g for g in groups if g.motion == "stuck"]
    return "mixed: " + "; ".join(f"{fold(g.ranks) or g.where} stuck" for g in stuck) + ", the rest moved"
