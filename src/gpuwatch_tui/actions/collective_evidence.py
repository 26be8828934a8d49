"""NCCL's and torch's own view of a hang, gathered beside a py-spy dump: each rank's flight-recorder dump
(where the job turned the recorder and its pipe on) and the RAS service's verdict (where the job uses
NCCL >= 2.24). Either is best effort: a host or job without it costs one short request and says why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

from gpuwatch_tui.actions import flight_recorder, nccl_ras

Request = Callable[[str, dict, float], Awaitable[dict]]
FR_TIMEOUT_S = 15.0
RAS_TIMEOUT_S = 15.0
QUIET_RAS_CODES = ("not-nccl", "disabled", "no-service", "unknown-op")  # nothing to report, not a failure


@dataclass
class CollectiveEvidence:
    fr_records: list[dict] = field(default_factory=list)  # flight_recorder.RankRecord, as dicts
    ras: dict | None = None  # nccl_ras.RasReport as a dict
    notes: list[str] = field(default_factory=list)  # why something is missing, in words


def _code(exc: Exception) -> str:
    return str(getattr(exc, "code", "") or "")


def _message(exc: Exception) -> str:
    return str(getattr(exc, "message", "") or exc or type(exc).__name__)


async def gather(request: Request, targets: Sequence, host: str, *, ras: bool = True) -> CollectiveEvidence:
    """`targets` have pid and start_ticks. Never raises: what fails becomes a note."""
    refs = [{"pid": int(t.pid), "start_ticks": int(t.start_ticks)} for t in targets]
    out = CollectiveEvidence()
    try:
        reply = await request("fr_dump", {"targets": refs, "timeout_s": FR_TIMEOUT_S}, FR_TIMEOUT_S + 15)
        records = flight_recorder.records_from_reply(host, reply)
        if any(r.ok or r.code not in flight_recorder.QUIET_CODES for r in records):
            out.fr_records = [asdict(r) for r in records]
    except Exception as exc:  # an older probe without the op, a lost link: the dump stands without it
        out.notes.append(f"{host}: flight recorder not read ({_message(exc)})")
    if ras:
        try:
            reply = await request("nccl_ras", {"targets": refs, "timeout_s": RAS_TIMEOUT_S}, RAS_TIMEOUT_S + 15)
            out.ras = nccl_ras.parse_reply(reply).to_json()
            out.ras["node"] = host
        except Exception as exc:
            if _code(exc) not in QUIET_RAS_CODES:
                out.notes.append(f"{host}: NCCL RAS: {_message(exc)}")
    return out


def fr_analysis(records: Sequence[dict]) -> flight_recorder.FrAnalysis | None:
    typed = [flight_recorder.RankRecord(**{**r, "entries": tuple(r.get("entries") or ())}) for r in records]
    return flight_recorder.analyse(typed) if typed else None


def ras_report(raw: dict | None) -> nccl_ras.RasReport | None:
    if not raw:
        return None
    ranks = tuple(nccl_ras.RankRas(**r) for r in raw.get("ranks") or ())
    return nccl_ras.RasReport(ranks, raw.get("nccl_version", ""), tuple(raw.get("problems") or ()),
                              raw.get("raw", ""), raw.get("fmt", "text"))
