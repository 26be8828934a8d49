"""NCCL's RAS verdict on a job, per rank: behind, not answering, dead, or in error.

NCCL >= 2.24 runs a RAS thread in every process with a communicator; any of them answers for the whole
job (the probe's `nccl_ras` op asks the one on a node, probe/ops_ncclras.py). NCCL 2.28 can answer in
JSON (`SET FORMAT json`); older ones in text only, whose Errors and Warnings sections are read here.
Shapes seen on a real GPU are in tests/data/nccl_capture/. Pure functions.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

BEHIND, NOT_ANSWERING, DEAD, ERROR, OK = "behind", "not answering", "dead", "error", "ok"
SEVERITY = {DEAD: 4, NOT_ANSWERING: 3, ERROR: 2, BEHIND: 1, OK: 0}


@dataclass(frozen=True)
class RankRas:
    rank: int
    verdict: str  # one of BEHIND, NOT_ANSWERING, DEAD, ERROR, OK
    evidence: str  # "AllReduce count 6, the others 7"
    pid: int | None = None
    node: str = ""


@dataclass(frozen=True)
class RasReport:
    ranks: tuple[RankRas, ...]
    nccl_version: str
    problems: tuple[str, ...]  # the report's own words for each problem
    raw: str  # the report as sent (kept for the bundle)
    fmt: str  # "json" or "text"

    def of(self, rank: int) -> RankRas | None:
        return next((r for r in self.ranks if r.rank == rank), None)

    @property
    def flagged(self) -> tuple[RankRas, ...]:
        return tuple(r for r in self.ranks if r.verdict != OK)

    @property
    def summary(self) -> str:
        if not self.flagged:
            return f"NCCL RAS ({self.nccl_version or '?'}): every rank answers, counts agree"
        parts = "; ".join(f"rank {r.rank} {r.verdict} ({r.evidence})" for r in self.flagged)
        return f"NCCL RAS ({self.nccl_version or '?'}): {parts}"

    def to_json(self) -> dict:
        return asdict(self)


def _worst(verdicts: dict[int, RankRas], new: RankRas) -> None:
    old = verdicts.get(new.rank)
    if old is None or SEVERITY[new.verdict] > SEVERITY[old.verdict]:
        verdicts[new.rank] = new


def parse_json(text: str) -> RasReport:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the RAS JSON report is not an object")
    verdicts: dict[int, RankRas] = {}
    problems = []
    for comm in data.get("communicators") or []:
        if not isinstance(comm, dict):
            continue
        ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict) and isinstance(r.get("rank"), int)]
        counts = {r["rank"]: {k: v for k, v in (r.get("collective_counts") or {}).items() if isinstance(v, int)}
                  for r in ranks}
        ops = sorted({op for c in counts.values() for op in c})
        for r in ranks:
            rank, pid, node = r["rank"], r.get("pid"), str(r.get("host") or "")
            status = r.get("status") if isinstance(r.get("status"), dict) else {}
            behind = [(op, counts[rank].get(op, 0), max(c.get(op, 0) for c in counts.values())) for op in ops]
            behind = [(op, mine, top) for op, mine, top in behind if mine < top]
            if status.get("async_error") or status.get("abort_flag"):
                what = f"async error {status.get('async_error')}" if status.get("async_error") else "aborted"
                _worst(verdicts, RankRas(rank, ERROR, what, pid, node))
            elif behind:
                text = ", ".join(f"{op} count {mine}, the most {top}" for op, mine, top in behind)
                _worst(verdicts, RankRas(rank, BEHIND, text, pid, node))
                problems.append(f"rank {rank} behind: {text}")
            else:
                _worst(verdicts, RankRas(rank, OK, "counts agree", pid, node))
        for m in comm.get("missing_ranks") or []:
            if not isinstance(m, dict) or not isinstance(m.get("rank"), int):
                continue
            st = m.get("status") if isinstance(m.get("status"), dict) else {}
            verdict = DEAD if st.get("considered_dead") else NOT_ANSWERING
            why = "considered dead by RAS" if verdict == DEAD else "no communicator data from it"
            _worst(verdicts, RankRas(m["rank"], verdict, why, m.get("pid"), str(m.get("host") or "")))
            problems.append(f"rank {m['rank']} {verdict}")
    return RasReport(tuple(sorted(verdicts.values(), key=lambda r: r.rank)), str(data.get("nccl_version") or ""),
                     tuple(problems), text, "json")


RANK_LINE = re.compile(r"^\s*Rank (\d+)(.*?)(?:--\s*GPU \S+ managed by process (\d+) on node (\S+))?\s*$")
LAUNCHED = re.compile(r"has launched up to operation (\d+)")
REPORTED = re.compile(r"reported (.+?)\s*$")
HEADER = re.compile(r"^(#\S+ \(\w+\) )?([A-Z][A-Z,]+)\s*$")
VERSION = re.compile(r"^NCCL version (\S+)")


def parse_text(text: str) -> RasReport:
    """The text report: its Errors and Warnings sections are blocks headed `#0-0 (hash) MISMATCH` (or
    `INCOMPLETE`, `ERROR`, `DEAD`...) and a line per rank."""
    verdicts: dict[int, RankRas] = {}
    problems = []
    version = ""
    block = ""
    launched: dict[int, tuple[int, int | None, str]] = {}
    for line in text.splitlines():
        if (m := VERSION.match(line)) and not version:
            version = m.group(1)
        if (h := HEADER.match(line)) and h.group(1):
            block = h.group(2)
            continue
        if line.strip() and not line.startswith(" "):
            block = "" if not line.startswith("#") else block
            continue
        if not block or not (m := RANK_LINE.match(line)):
            if block and line.strip():
                problems.append(f"{block}: {line.strip()}")
            continue
        rank, rest = int(m.group(1)), m.group(2)
        pid = int(m.group(3)) if m.group(3) else None
        node = m.group(4) or ""
        problems.append(f"{block}: {line.strip()}")
        if "MISMATCH" in block and (n := LAUNCHED.search(rest)):
            launched[rank] = (int(n.group(1)), pid, node)
        elif "DEAD" in block or "dead" in rest:
            _worst(verdicts, RankRas(rank, DEAD, "considered dead by RAS", pid, node))
        elif "INCOMPLETE" in block:
            _worst(verdicts, RankRas(rank, NOT_ANSWERING, "no communicator data from it", pid, node))
        elif "ERROR" in block and (e := REPORTED.search(rest)):
            _worst(verdicts, RankRas(rank, ERROR, f"reported {e.group(1).rstrip(' -')}", pid, node))
    if launched:
        top = max(n for n, _, _ in launched.values())
        for rank, (n, pid, node) in launched.items():
            verdict = BEHIND if n < top else OK
            _worst(verdicts, RankRas(rank, verdict, f"launched up to operation {n}, the most {top}", pid, node))
    return RasReport(tuple(sorted(verdicts.values(), key=lambda r: r.rank)), version, tuple(problems), text, "text")


def parse_reply(reply: dict) -> RasReport:
    """The probe's nccl_ras answer; a JSON report that does not parse is read as text."""
    text = str(reply.get("report") or "")
    if reply.get("format") == "json":
        try:
            return parse_json(text)
        except (ValueError, TypeError, KeyError):
            pass
    return parse_text(text)
