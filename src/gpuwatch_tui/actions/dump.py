"""py-spy dump of every process of a job, on its host, uploading py-spy when the host lacks it.

`request` is a host's command path: `await request(op, args, timeout)` returns the op's result and
raises an exception carrying `.code` and `.message` when the probe refuses (see probe/ops_base.py).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from gpuwatch_tui.actions import collective_evidence
from gpuwatch_tui.actions.pyspy_binary import LocalPyspy, PyspyUnavailable, local_pyspy
from gpuwatch_tui.actions.stack_analysis import StackAnalysis, analyse
from gpuwatch_tui.actions.stack_groups import StackGroup, StackMember, motion_summary, with_motion
from gpuwatch_tui.actions.stacks import ProcessDump, process_from_reply
from gpuwatch_tui.errors import GpuwatchError

Request = Callable[[str, dict, float], Awaitable[dict]]

UPLOAD_CHUNK_BYTES = 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
DEFAULT_DUMP_TIMEOUT_S = 20.0
REDUMP_WINDOW_S = 300.0  # a dump this soon after the one before is compared with it (stuck or moving)


class DumpFailed(GpuwatchError):
    """No dump at all: py-spy cannot be found or put on the host, or the host refused."""


@dataclass(frozen=True)
class DumpTarget:
    """One process to dump: (pid, start_ticks) names it for good; rank when the caller knows it."""

    pid: int
    start_ticks: int
    rank: int | None = None


@dataclass
class DumpReport:
    host: str
    job: str
    taken_at: float  # unix time
    pyspy: str  # the path py-spy ran from on the host
    pyspy_source: str  # "host" (on PATH), "cache" (uploaded before), "uploaded" (now)
    processes: list[ProcessDump]
    analysis: StackAnalysis
    native: bool = False
    sudo: bool = False
    host_facts: dict = field(default_factory=dict)  # pyspy_locate's answer: ptrace_scope, root, ...
    saved_to: Path | None = None
    fr_records: list = field(default_factory=list)  # every rank's flight-recorder dump, compacted
    ras: dict | None = None  # NCCL RAS's report, parsed (nccl_ras.RasReport as a dict)
    collective_notes: list = field(default_factory=list)  # why the recorder or RAS said nothing
    motion: str | None = None  # against the dump before: stuck or moving
    job_id: str = ""  # the job's short id: its dumps are found by it (many jobs share a name)

    @property
    def label(self) -> str:
        """`id name` (the name alone for a dump made without the job's id)."""
        return f"{self.job_id} {self.job}" if self.job_id else self.job

    def process(self, pid: int) -> ProcessDump | None:
        return next((p for p in self.processes if p.pid == pid), None)

    def findings(self) -> list[str]:
        """The grouped stacks, stuck or moving, the flight recorder's and RAS's readings: one line each."""
        lines = [g.text for g in self.analysis.groups] if len(self.analysis.groups) > 1 else []
        if self.motion:
            lines.append(self.motion)
        fr = collective_evidence.fr_analysis(self.fr_records)
        if fr is not None:
            lines.append(fr.summary)
        ras = collective_evidence.ras_report(self.ras)
        if ras is not None:
            lines.append(ras.summary)
        return lines + list(self.collective_notes)

    def compare_with(self, earlier: DumpReport | None, window_s: float = REDUMP_WINDOW_S) -> None:
        """A dump taken soon after another of the same job: mark each group stuck or moving."""
        if earlier is not None:
            self.compare_with_groups(earlier.taken_at, earlier.analysis.groups, window_s)

    def compare_with_groups(self, taken_at: float, groups: Sequence[StackGroup],
                            window_s: float = REDUMP_WINDOW_S) -> None:
        if not 0 < self.taken_at - taken_at <= window_s:
            return
        groups = with_motion(self.analysis.groups, groups)
        self.analysis = replace(self.analysis, groups=groups)
        self.motion = motion_summary(groups)

    def to_json(self) -> dict:
        out = asdict(self)
        out["saved_to"] = str(self.saved_to) if self.saved_to else None
        return out


def _targets(targets: Sequence) -> list[DumpTarget]:
    out = []
    for t in targets:
        if isinstance(t, DumpTarget):
            out.append(t)
        else:  # a ProcessRef or anything with pid and start_ticks
            out.append(DumpTarget(int(t.pid), int(t.start_ticks), getattr(t, "rank", None)))
    if not out:
        raise DumpFailed("nothing to dump: the job has no live process")
    return out


async def _ask(request: Request, op: str, args: dict, timeout: float) -> dict:
    try:
        return await request(op, args, timeout)
    except GpuwatchError:
        raise
    except Exception as exc:  # the command path's own error type carries .code and .message
        code = getattr(exc, "code", None)
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise DumpFailed(f"{op} failed on the host: {message}" + (f" ({code})" if code else "")) from exc


async def upload_pyspy(request: Request, binary: LocalPyspy, chunk_bytes: int = UPLOAD_CHUNK_BYTES) -> str:
    """Copy the local binary into the host's cache dir in base64 chunks; returns its path there."""
    data = binary.path.read_bytes()
    for offset in range(0, len(data), chunk_bytes):
        chunk = base64.b64encode(data[offset:offset + chunk_bytes]).decode("ascii")
        await _ask(request, "upload", {"name": binary.cache_name, "offset": offset, "data": chunk}, REQUEST_TIMEOUT_S)
    done = await _ask(
        request, "upload",
        {"name": binary.cache_name, "finish": True, "sha256": binary.sha256, "size": len(data)},
        REQUEST_TIMEOUT_S,
    )
    return done["path"]


async def locate_or_upload(request: Request, check_sudo: bool = False) -> tuple[str, str, dict]:
    """(py-spy path on the host, where it came from, the host's ptrace facts)."""
    try:
        binary: LocalPyspy | None = local_pyspy()
    except PyspyUnavailable:
        binary = None
    args = {"check_sudo": check_sudo}
    if binary is not None:
        args.update(sha256=binary.sha256, name=binary.cache_name)
    facts = await _ask(request, "pyspy_locate", args, REQUEST_TIMEOUT_S)
    if facts.get("path"):
        return facts["path"], "host", facts
    if facts.get("cached"):
        return facts["cached"], "cache", facts
    if binary is None:
        raise DumpFailed("py-spy is neither on the host nor installed here to upload (pip install py-spy)")
    try:
        binary.check_runs_on(facts.get("machine", ""))
    except PyspyUnavailable as exc:
        raise DumpFailed(str(exc)) from exc
    return await upload_pyspy(request, binary), "uploaded", facts


async def dump_job(
    request: Request,
    targets: Sequence,
    native: bool = False,
    timeout_s: float = DEFAULT_DUMP_TIMEOUT_S,
    sudo: bool = False,
    *,
    host: str = "",
    job: str = "",
    job_id: str = "",
    with_locals: bool = False,
    save_dir: Path | None = None,
    save: bool = True,
    collectives: bool = True,
) -> DumpReport:
    """Dump every given process of a job (every rank) at once, analyse the stacks, save the report.

    `sudo` runs `sudo -n py-spy ...` on the host (configured per host). The report is saved as JSON
    under `save_dir` (default: the state dir's dumps/) unless `save` is False. With `collectives`, each
    rank's flight recorder (where the job turned it on) and NCCL's RAS service are read too.
    """
    wanted = _targets(targets)
    pyspy, source, facts = await locate_or_upload(request, check_sudo=sudo)
    reply = await _ask(
        request, "pyspy_dump",
        {
            "targets": [{"pid": t.pid, "start_ticks": t.start_ticks} for t in wanted],
            "native": native, "timeout_s": timeout_s, "sudo": sudo, "pyspy": pyspy, "locals": with_locals,
        },
        timeout_s + REQUEST_TIMEOUT_S,
    )
    ranks = {t.pid: t.rank for t in wanted}
    processes = [process_from_reply(p, ranks.get(int(p.get("pid") or 0))) for p in reply.get("processes", [])]
    report = DumpReport(
        host=host, job=job, taken_at=time.time(), pyspy=pyspy, pyspy_source=source, processes=processes,
        analysis=analyse(processes), native=native, sudo=sudo, host_facts=facts, job_id=job_id,
    )
    if collectives and len(wanted) > 0:
        found = await collective_evidence.gather(request, wanted, host)
        report.fr_records, report.ras, report.collective_notes = found.fr_records, found.ras, found.notes
    if save:
        report.saved_to = save_report(report, save_dir)
    return report


def dumps_dir() -> Path:
    from platformdirs import user_state_dir  # noqa: PLC0415 - only when saving

    return Path(user_state_dir("gpuwatch")) / "dumps"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "unnamed"


def dump_prefix(host: str, job_id: str, job: str = "") -> str:
    """The start of the file names of one job's dumps: `<host>_<short id>_` (the name follows it, for a
    person reading the directory). Without an id (a dump made by hand), `<host>_<name>_`."""
    return f"{_safe(host)}_{job_id}_" if job_id else f"{_safe(host)}_{_safe(job)}_"


def save_report(report: DumpReport, directory: Path | None = None) -> Path:
    """dumps/<host>_<short id>_<job>_<UTC time>.json; a second dump in the same second gets its own name."""
    directory = directory or dumps_dir()
    try:
        return _write_report_file(report, directory)
    except OSError as exc:
        # A full disk or an unwritable state dir: words for a person, not an OSError from a worker.
        raise DumpFailed(f"the stacks were taken but cannot be saved in {directory}: "
                         f"{exc.strerror or exc}") from None


def _write_report_file(report: DumpReport, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(report.taken_at))
    name = f"{_safe(report.job)}_" if report.job_id else ""  # (without an id the prefix holds the name)
    base = dump_prefix(report.host, report.job_id, report.job) + name + stamp
    path = directory / f"{base}.json"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{base}-{n}.json"
    payload = report.to_json()
    payload["saved_to"] = str(path)
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # no half-written file left on a full disk
        raise
    return path


def compare_with_saved(report: DumpReport, directory: Path, window_s: float = REDUMP_WINDOW_S) -> None:
    """Compare with the dump of the same job saved just before this one, by another gpuwatch or an earlier
    `gpuwatch dump`: a second dump from the CLI tells stuck from moving as the dashboard's second `d` does.
    Members are matched by pid, rank and start time, so a new run of the same script is never "stuck"."""
    middle = re.escape(f"{_safe(report.job)}_") if report.job_id else ""
    name = re.compile(re.escape(dump_prefix(report.host, report.job_id, report.job)) + middle
                      + r"(\d{8}T\d{6}Z)(-\d+)?\.json")
    oldest = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(report.taken_at - window_s - 1))
    try:
        # Newest first by the UTC stamp in the name; only those inside the window are read, and only
        # until one parses: a job dumped every day for months costs one read, not hundreds.
        found = sorted((path for path in directory.iterdir()
                        if (m := name.fullmatch(path.name)) and path != report.saved_to and m.group(1) >= oldest),
                       key=lambda path: path.name, reverse=True)
    except OSError:
        return
    best: tuple[float, list] | None = None
    for path in found:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            taken, groups = raw["taken_at"], raw["analysis"]["groups"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a dump of ours, or half of one
        if isinstance(taken, (int, float)) and taken < report.taken_at:
            best = (float(taken), groups)
            break
    if best is None:
        return
    try:
        groups = tuple(StackGroup(tuple(tuple(frame) for frame in g["key"]), g["where"], g["kind"],
                                  tuple(StackMember(**m) for m in g["members"]), g.get("suspect", False))
                       for g in best[1])
    except (KeyError, TypeError):
        return
    report.compare_with_groups(best[0], groups, window_s)
