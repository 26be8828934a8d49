"""What PyTorch's flight recorder of every rank says about a hang: fr_trace's questions, answered.

Each rank records the collectives it enqueued (per process group, numbered by `collective_seq_id`) and
how far they got. Read together, the dumps name: the last collective each rank entered, the first
collective that did not complete everywhere and the ranks missing from it (they never entered it), and
sequence mismatches (the same number, a different collective or size: ranks out of step). The probe's
`fr_dump` op triggers and compacts the dumps (probe/ops_flightrec.py). Pure functions here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from .stack_groups import fold

PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"  # a restart sets these with [actions] flight_recorder = true
QUIET_CODES = ("not-enabled", "not-a-rank")  # no dump, and nothing wrong: no recorder, or a launcher


@dataclass(frozen=True)
class RankRecord:
    rank: int
    host: str
    pid: int
    ok: bool
    message: str = ""
    pg_status: dict = field(default_factory=dict)  # pg -> last_enqueued/started/completed
    entries: tuple = ()  # compact entries, oldest first
    code: str = ""  # why there is no dump: not-enabled, not-a-rank (nothing to say), timeout, ...

    def last(self, pg: str) -> dict | None:
        return next((e for e in reversed(self.entries) if e.get("pg") == pg and not e.get("p2p")), None)

    def enqueued(self, pg: str) -> int:
        s = self.pg_status.get(pg)
        if s and s.get("last_enqueued_collective", -1) >= 0:
            return s["last_enqueued_collective"]
        e = self.last(pg)
        return e["seq"] if e else 0

    def completed(self, pg: str) -> int:
        s = self.pg_status.get(pg)
        if s and s.get("last_completed_collective", -1) >= 0:
            return s["last_completed_collective"]
        done = [e["seq"] for e in self.entries if e.get("pg") == pg and e.get("state") == "completed"]
        return max(done, default=0)

    def entry(self, pg: str, seq: int) -> dict | None:
        return next((e for e in self.entries if e.get("pg") == pg and e.get("seq") == seq and not e.get("p2p")), None)


@dataclass(frozen=True)
class Stuck:
    pg: str
    seq: int
    op: str
    entered: tuple[int, ...]  # ranks that enqueued it
    missing: tuple[int, ...]  # ranks that never did
    where: str  # the Python line that enqueued it, on a rank that did

    @property
    def text(self) -> str:
        miss = f"; missing {_ranks(self.missing)}" if self.missing else "; every rank entered it"
        return f"first incomplete collective: #{self.seq} {self.op} (group {self.pg}) at {self.where}{miss}"


@dataclass(frozen=True)
class FrAnalysis:
    ranks: tuple[RankRecord, ...]
    last_entered: dict  # rank -> "#8 nccl:all_reduce (group 0)"
    stuck: tuple[Stuck, ...]
    mismatches: tuple[str, ...]
    not_enabled: tuple[int, ...]  # pids without the recorder
    failed: tuple[str, ...]  # per-rank failures, in words
    summary: str

    @property
    def suspects(self) -> tuple[int, ...]:
        return tuple(sorted({r for s in self.stuck for r in s.missing}))

    def to_json(self) -> dict:
        out = asdict(self)
        out["last_entered"] = {str(k): v for k, v in self.last_entered.items()}
        return out


def _ranks(nums: Sequence[int]) -> str:

    return fold(nums)


def records_from_reply(host: str, reply: dict) -> list[RankRecord]:
    """The probe's fr_dump answer, typed (what a host sent is bounded there; types are checked here)."""
    out = []
    for r in reply.get("ranks") or []:
        if not isinstance(r, dict):
            continue
        rank = r.get("rank") if isinstance(r.get("rank"), int) else -1
        entries = tuple(e for e in (r.get("entries") or []) if isinstance(e, dict) and isinstance(e.get("seq"), int))
        status = {str(k): v for k, v in (r.get("pg_status") or {}).items() if isinstance(v, dict)}
        out.append(RankRecord(rank, host, int(r.get("pid") or 0), bool(r.get("ok")),
                              str(r.get("message") or r.get("code") or ""), status, entries, str(r.get("code") or "")))
    return out


def _where(entry: dict) -> str:
    frames = entry.get("frames") or []
    own = next((f for f in frames if not re.search(r"torch/distributed/|site-packages/", str(f[1]))), None)
    f = own or (frames[0] if frames else None)
    if not f:
        return "?"
    return f"{f[0]} ({str(f[1]).rsplit('/', 1)[-1]}:{f[2]})"


def analyse(records: Sequence[RankRecord]) -> FrAnalysis | None:
    """None when no rank has the recorder on (nothing to say)."""
    have = [r for r in records if r.ok]
    not_enabled = tuple(r.pid for r in records if not r.ok and r.code in QUIET_CODES)
    failed = tuple(f"rank {r.rank} on {r.host}: {r.message}" for r in records
                   if not r.ok and r.code not in QUIET_CODES)
    if not have:
        return None if not failed else FrAnalysis(tuple(records), {}, (), (), not_enabled, failed,
                                                  "flight recorder: no dump; " + "; ".join(failed))
    pgs = sorted({pg for r in have for pg in r.pg_status} | {e["pg"] for r in have for e in r.entries if "pg" in e})
    last_entered = {}
    for r in have:
        best = max((r.last(pg) for pg in pgs if r.last(pg)), key=lambda e: e.get("created_ns", 0), default=None)
        if best:
            last_entered[r.rank] = f"#{best['seq']} {best['op']} (group {best['pg']}, {best['state']})"
    stuck, mismatches = [], []
    for pg in pgs:
        members = [r for r in have if pg in r.pg_status or r.last(pg)]
        if len(members) < 1:
            continue
        top = max(r.enqueued(pg) for r in members)
        low_done = min(r.completed(pg) for r in members)
        if top > low_done:
            seq = low_done + 1
            entered = tuple(sorted(r.rank for r in members if r.enqueued(pg) >= seq))
            missing = tuple(sorted(r.rank for r in members if r.enqueued(pg) < seq))
            ref = next((r.entry(pg, seq) for r in members if r.entry(pg, seq)), None)
            stuck.append(Stuck(pg, seq, ref["op"] if ref else "?", entered, missing, _where(ref) if ref else "?"))
        seqs = sorted({e["seq"] for r in members for e in r.entries if e.get("pg") == pg and not e.get("p2p")})
        for seq in seqs:
            seen = {}
            for r in members:
                e = r.entry(pg, seq)
                if e:
                    seen.setdefault((e.get("op"), e.get("sizes")), []).append(r.rank)
            if len(seen) > 1:
                parts = "; ".join(f"{_ranks(rs)}: {op} {sizes}" for (op, sizes), rs in seen.items())
                mismatches.append(f"#{seq} (group {pg}) differs between ranks: {parts}")
    lines = [s.text for s in stuck] or ["every recorded collective completed on every rank"]
    lines += mismatches[:3]
    if failed:
        lines.append("no dump from " + "; ".join(failed))
    return FrAnalysis(tuple(records), last_entered, tuple(stuck), tuple(mismatches), not_enabled, failed,
                      "flight recorder: " + "; ".join(lines))
