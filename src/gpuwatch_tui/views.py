"""Typed views of a job: what the tracker exports and every reader (UI, CLI, JSON) consumes.

`JobView.to_json()` is the one serialisation behind `gpuwatch status --json` / `watch --json`;
`JobView.from_json()` reads it back (recordings, fixtures). The views are frozen: a reader can keep
one across refreshes without it changing underneath.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from .model import ProcessRef
from .quick_init import quick_init
from .short_id import multi_parts, run_parts, short_id
from .vocab import DEFAULT_STALL_AFTER_S


def _number(value) -> float | int | None:
    """A JSON number as it was written (ints stay ints); anything else is a clear error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number or null, got {value!r}")
    return value


def _need(data: dict, key: str, kind: type | tuple[type, ...], what: str):
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected an object, got {data!r}")
    if key not in data:
        raise ValueError(f"{what}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{what}: {key!r} should be {names}, got {value!r}")
    return value


@quick_init
@dataclass(frozen=True)
class ProgressView:
    """Training progress as the log shows it. Numbers are JSON-ready: whole values are ints,
    non-finite ones are None (a NaN/inf loss is kept in words in `loss_text`)."""

    step: float | int | None = None
    total: float | int | None = None
    rate: float | int | None = None
    unit: str | None = None
    loss: float | int | None = None
    epoch: float | int | None = None
    eta_s: float | int | None = None
    epochs: float | int | None = None
    lr: float | int | None = None
    desc: str | None = None
    updated_at: float | None = None
    loss_text: str | None = None

    @property
    def fraction(self) -> float | None:
        if self.step is None or not self.total:
            return None
        return max(0.0, min(1.0, self.step / self.total))

    def to_json(self) -> dict:
        out = {
            "step": self.step,
            "total": self.total,
            "rate": self.rate,
            "unit": self.unit,
            "loss": self.loss,
            "epoch": self.epoch,
            "eta_s": self.eta_s,
            "epochs": self.epochs,
            "lr": self.lr,
            "desc": self.desc,
            "updated_at": self.updated_at,
        }
        if self.loss_text is not None:
            out["loss_text"] = self.loss_text
        return out

    @classmethod
    def from_json(cls, data: dict | None) -> ProgressView:
        if not data:
            return cls()
        if not isinstance(data, dict):
            raise ValueError(f"progress should be an object, got {data!r}")
        return cls(
            step=_number(data.get("step")), total=_number(data.get("total")), rate=_number(data.get("rate")),
            unit=data.get("unit"), loss=_number(data.get("loss")), epoch=_number(data.get("epoch")),
            eta_s=_number(data.get("eta_s")), epochs=_number(data.get("epochs")), lr=_number(data.get("lr")),
            desc=data.get("desc"), updated_at=_number(data.get("updated_at")), loss_text=data.get("loss_text"),
        )


@quick_init
@dataclass(frozen=True)
class PhaseEntry:
    """One step of a job's phase history: the phase and when it began (unix seconds)."""

    phase: str
    since: float

    def to_json(self) -> dict:
        return {"phase": self.phase, "since": self.since}


class ProgressPointView(NamedTuple):
    """One point of the progress history (for charts): raw values, non-finite loss as None. A tuple,
    made by one C call: a view gets a new point on every frame that logs progress (a frozen
    dataclass set its five fields one by one, ~3x the instructions, and held them in more memory)."""

    time: float
    step: float | None
    total: float | None
    loss: float | None
    epoch: float | None

    def to_json(self) -> dict:
        return {"time": self.time, "step": self.step, "total": self.total, "loss": self.loss, "epoch": self.epoch}


def finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@quick_init
@dataclass(frozen=True)
class RankView:
    """One rank of a job that spans hosts: where it runs, what its process and GPU do, when its host's
    log last grew. `culprit` marks the rank that holds the others up, `note` says why."""

    host: str
    pid: int
    start_ticks: int = 0
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    node_rank: int | None = None  # GROUP_RANK / NODE_RANK / SLURM_NODEID
    gpus: tuple[int, ...] = ()
    util_pct: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    state: str = ""  # R, S, D, T, Z, or "gone"
    last_log_at: float | None = None
    culprit: bool = False
    note: str = ""
    job_id: str = ""  # the per-host job this rank belongs to

    @property
    def ref(self) -> ProcessRef:
        return ProcessRef(self.host, self.pid, self.start_ticks)

    def to_json(self) -> dict:
        return {"host": self.host, "pid": self.pid, "start_ticks": self.start_ticks, "rank": self.rank,
                "local_rank": self.local_rank, "world_size": self.world_size, "node_rank": self.node_rank,
                "gpus": list(self.gpus), "util_pct": self.util_pct, "power_w": self.power_w,
                "power_limit_w": self.power_limit_w, "state": self.state,
                "last_log_at": self.last_log_at, "culprit": self.culprit, "note": self.note, "job_id": self.job_id}

    @classmethod
    def from_json(cls, data: dict, what: str) -> RankView:
        def opt_int(key: str) -> int | None:
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{what}: rank {key!r} should be an integer or null, got {value!r}")
            return value

        return cls(
            host=_need(data, "host", str, what), pid=_need(data, "pid", int, what),
            start_ticks=int(data.get("start_ticks") or 0), rank=opt_int("rank"), local_rank=opt_int("local_rank"),
            world_size=opt_int("world_size"), node_rank=opt_int("node_rank"),
            gpus=tuple(int(g) for g in data.get("gpus") or ()), util_pct=_number(data.get("util_pct")),
            power_w=_number(data.get("power_w")), power_limit_w=_number(data.get("power_limit_w")), state=str(data.get("state") or ""),
            last_log_at=_number(data.get("last_log_at")), culprit=bool(data.get("culprit", False)),
            note=str(data.get("note") or ""), job_id=str(data.get("job_id") or ""),
        )


def _derived_short_id(data: dict, host: str) -> str:
    """A recording made before views carried the short id: derived as the tracker derives it (the root's
    start ticks; a run over several hosts by its run key)."""
    if data.get("run_key") and data.get("parts"):
        return short_id(multi_parts(str(data["run_key"])))
    root = data.get("root")
    if isinstance(root, dict) and isinstance(root.get("pid"), int) and isinstance(root.get("start_ticks"), int) \
            and root["start_ticks"]:
        return short_id(run_parts(host, root["pid"], root["start_ticks"]))
    return short_id(("id", str(data.get("id"))))  # its top process is not known: by the id it was recorded under


@quick_init
@dataclass(frozen=True)
class LeftoverProcess:
    """One process a job left behind: still running after the job's main process or launcher went."""

    pid: int
    start_ticks: int
    name: str = ""
    cmdline: tuple[str, ...] = ()
    user: str | None = None
    state: str = ""
    gpus: tuple[int, ...] = ()
    gpu_memory_bytes: int = 0

    def to_json(self) -> dict:
        return {"pid": self.pid, "start_ticks": self.start_ticks, "name": self.name, "cmdline": list(self.cmdline),
                "user": self.user, "state": self.state, "gpus": list(self.gpus),
                "gpu_memory_bytes": self.gpu_memory_bytes}

    @classmethod
    def from_json(cls, data: dict, what: str) -> LeftoverProcess:
        return cls(pid=_need(data, "pid", int, what), start_ticks=int(data.get("start_ticks") or 0),
                   name=str(data.get("name") or ""), cmdline=tuple(str(a) for a in data.get("cmdline") or ()),
                   user=data.get("user"), state=str(data.get("state") or ""),
                   gpus=tuple(int(g) for g in data.get("gpus") or ()),
                   gpu_memory_bytes=int(data.get("gpu_memory_bytes") or 0))


@quick_init
@dataclass(frozen=True)
class LeftoverView:
    """A job's leftovers: the processes still running (many holding GPU memory) after its main process
    or launcher is gone, since `since` (when the top process was seen gone, local clock)."""

    processes: tuple[LeftoverProcess, ...]
    since: float
    root_pid: int | None = None  # the top process that went

    @property
    def count(self) -> int:
        return len(self.processes)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.processes)

    @property
    def gpu_memory_bytes(self) -> int:
        return sum(p.gpu_memory_bytes for p in self.processes)

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(sorted({g for p in self.processes for g in p.gpus}))

    def to_json(self) -> dict:
        return {"count": self.count, "pids": list(self.pids), "gpu_memory_bytes": self.gpu_memory_bytes,
                "gpus": list(self.gpus), "since": self.since, "root_pid": self.root_pid,
                "processes": [p.to_json() for p in self.processes]}

    @classmethod
    def from_json(cls, data: dict | None, what: str) -> LeftoverView | None:
        if not data:
            return None
        return cls(processes=tuple(LeftoverProcess.from_json(p, what) for p in data.get("processes") or ()),
                   since=_number(data.get("since")) or 0.0, root_pid=data.get("root_pid"))


@quick_init
@dataclass(frozen=True)
class JobView:
    """One job as every reader sees it. `processes` are the job's main processes as
    (host, pid, start ticks): what an action must name, never a bare pid."""

    id: str
    name: str
    host: str
    phase: str = "unknown"
    detail: str | None = None
    since: float = 0.0
    confidence: float = 0.0
    evidence: tuple[str, ...] = ()
    advice: str = ""
    actions: tuple[str, ...] = ()  # names of the actions that help (the verdict's)
    pids: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()  # GPU indices on `host`
    log: str | None = None  # the primary log
    logs: tuple[str, ...] = ()
    exit_code: int | None = None
    exit_signal: int | None = None
    progress: ProgressView = ProgressView()
    history: tuple[PhaseEntry, ...] = ()
    configured: bool = False
    launcher: str | None = None
    alive: bool = True
    ended_at: float | None = None
    output_dir: str | None = None
    log_lines: int = 0
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    progress_history: tuple[ProgressPointView, ...] = ()
    history_text: str = ""
    processes: tuple[ProcessRef, ...] = ()
    root: ProcessRef | None = None  # the top of the tree (a launcher when there is one)
    events: tuple[str, ...] = ()  # what gpuwatch did to the job, oldest first ("killed by ana via gpuwatch at ...")
    # Why the verdict rests on too little history to be final (jobs/provisional.py), or None.
    provisional: str | None = None
    # A job over several hosts (jobs/multinode.py): every host, every rank, the per-host jobs it joins
    # (their ids, for actions and logs) and what ties them together ("slurm job 42"). Empty otherwise.
    hosts: tuple[str, ...] = ()
    ranks: tuple[RankView, ...] = ()
    parts: tuple[str, ...] = ()
    run_key: str | None = None
    # Processes left running after the job's main process or launcher went (jobs/leftovers.py); None: none.
    leftovers: LeftoverView | None = None
    # The short id people read and type (jobs/short_id.py): the same on every gpuwatch watching the host.
    short_id: str = ""

    @property
    def label(self) -> str:
        """`id name` as tables, plans and file names show a job (the name alone is rarely unique)."""
        return f"{self.short_id} {self.name}" if self.short_id else self.name

    @property
    def multi_node(self) -> bool:
        return len(self.hosts) > 1

    @property
    def gpu_slots(self) -> tuple[tuple[str, int], ...]:
        """Every (host, GPU index) the job uses: its ranks' on every host, or its GPUs on its host."""
        slots = [(self.host, g) for g in self.gpus] + [(r.host, g) for r in self.ranks for g in r.gpus]
        return tuple(dict.fromkeys(slots))

    @property
    def pid_slots(self) -> tuple[tuple[str, int], ...]:
        """Every (host, pid) of the job's main processes: its ranks' on every host, or its pids on its host."""
        return tuple(dict.fromkeys([(self.host, p) for p in self.pids] + [(r.host, r.pid) for r in self.ranks]))

    def to_json(self) -> dict:
        out = self._base_json()
        if self.parts:  # additive: a single-host job's JSON is unchanged
            out.update(hosts=list(self.hosts), ranks=[r.to_json() for r in self.ranks], parts=list(self.parts),
                       run_key=self.run_key)
        elif self.ranks:  # a job of several ranks on one host: its ranks, additive too
            out["ranks"] = [r.to_json() for r in self.ranks]
        if self.leftovers is not None:  # additive: only a job that left processes behind has the key
            out["leftovers"] = self.leftovers.to_json()
        return out

    def _base_json(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "host": self.host,
            "pids": list(self.pids),
            "gpus": list(self.gpus),
            "phase": self.phase,
            "detail": self.detail,
            "since": self.since,
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "advice": self.advice,
            "log": self.log,
            "logs": list(self.logs),
            "exit_code": self.exit_code,
            "exit_signal": self.exit_signal,
            "progress": self.progress.to_json(),
            "history": [entry.to_json() for entry in self.history],
            "configured": self.configured,
            "launcher": self.launcher,
            "alive": self.alive,
            "ended_at": self.ended_at,
            "output_dir": self.output_dir,
            "log_lines": self.log_lines,
            "stall_after_s": self.stall_after_s,
            "progress_history": [point.to_json() for point in self.progress_history],
            "history_text": self.history_text,
            "actions": list(self.actions),
            "processes": [{"pid": p.pid, "start_ticks": p.start_ticks} for p in self.processes],
            "root": None if self.root is None else {"pid": self.root.pid, "start_ticks": self.root.start_ticks},
            "events": list(self.events),
            "short_id": self.short_id,
            "provisional": self.provisional is not None,
            "provisional_why": self.provisional,
        }

    @classmethod
    def from_json(cls, data: dict) -> JobView:
        """Read one job back from its JSON. Keys that older recordings lack take their defaults;
        id, name and host are required, and a value of the wrong shape is a clear error."""
        if not isinstance(data, dict):
            raise ValueError(f"a job should be an object, got {data!r}")
        job_id = _need(data, "id", str, "job")
        what = f"job {job_id!r}"
        host = _need(data, "host", str, what)

        def ref(d: dict) -> ProcessRef:
            return ProcessRef(host, int(_need(d, "pid", int, what)), int(_need(d, "start_ticks", int, what)))

        def ints(key: str) -> tuple[int, ...]:
            values = data.get(key) or ()
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                raise ValueError(f"{what}: {key!r} should be a list of integers, got {values!r}")
            return tuple(values)

        return cls(
            id=job_id,
            name=_need(data, "name", str, what),
            host=host,
            phase=data.get("phase") or "unknown",
            detail=data.get("detail"),
            since=_number(data.get("since")) or 0.0,
            confidence=_number(data.get("confidence")) or 0.0,
            evidence=tuple(str(e) for e in data.get("evidence") or ()),
            advice=data.get("advice") or "",
            actions=tuple(str(a) for a in data.get("actions") or ()),
            pids=ints("pids"),
            gpus=ints("gpus"),
            log=data.get("log"),
            logs=tuple(str(p) for p in data.get("logs") or ()),
            exit_code=data.get("exit_code"),
            exit_signal=data.get("exit_signal"),
            progress=ProgressView.from_json(data.get("progress")),
            history=tuple(PhaseEntry(str(_need(e, "phase", str, what)), _need(e, "since", (int, float), what))
                          for e in data.get("history") or ()),
            configured=bool(data.get("configured", False)),
            launcher=data.get("launcher"),
            alive=bool(data.get("alive", True)),
            ended_at=_number(data.get("ended_at")),
            output_dir=data.get("output_dir"),
            log_lines=int(data.get("log_lines") or 0),
            stall_after_s=_number(data.get("stall_after_s")) or DEFAULT_STALL_AFTER_S,
            progress_history=tuple(
                ProgressPointView(p["time"], _number(p.get("step")), _number(p.get("total")),
                                  _number(p.get("loss")), _number(p.get("epoch")))
                for p in data.get("progress_history") or ()
            ),
            history_text=data.get("history_text") or "",
            processes=tuple(ref(p) for p in data.get("processes") or ()),
            root=ref(data["root"]) if data.get("root") else None,
            events=tuple(str(e) for e in data.get("events") or ()),
            provisional=str(data["provisional_why"]) if data.get("provisional_why") else None,
            hosts=tuple(str(h) for h in data.get("hosts") or ()),
            ranks=tuple(RankView.from_json(r, what) for r in data.get("ranks") or ()),
            parts=tuple(str(p) for p in data.get("parts") or ()),
            run_key=data.get("run_key"),
            leftovers=LeftoverView.from_json(data.get("leftovers"), what),
            short_id=str(data.get("short_id") or "") or _derived_short_id(data, host),
        )
