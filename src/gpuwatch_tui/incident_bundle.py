"""An incident bundle: one zip file with everything about one job's incident, for a ticket or a colleague.

    manifest.json        what is inside, the job, the window
    report.md            the incident report (incident_report.render_report)
    recording.jsonl.gz   the recording of the window around the incident, a recording of its own
                         (`gpuwatch replay BUNDLE` opens it)
    dumps/*.json         every py-spy dump of the job taken in the window, with its grouping, flight-recorder
                         and NCCL RAS findings
    findings.json        the latest dump's findings, one line each, and their data

Secrets in environment values are redacted everywhere: a value whose variable's name says it is a secret
(TOKEN, SECRET, PASSWORD, API_KEY, ...) becomes "<redacted>", in JSON and in `NAME=value` text alike.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import tempfile
import time
import zipfile
from pathlib import Path

from .errors import GpuwatchError
from .actions import collective_evidence
from .actions.dump import dump_prefix, dumps_dir
from .incident_report import DEFAULT_LOG_LINES, find_job, job_file_stem, render_report, reports_dir
from .recording.format import RecordingError
from .recording.timeline import Timeline
from .recording.window import write_window

FORMAT = "gpuwatch-bundle"
VERSION = 1
DEFAULT_WINDOW_S = 600.0  # ten minutes before the bundle is written
RECORDING = "recording.jsonl.gz"
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|SESSION_?KEY"
                         r"|_PAT$|^PAT$|_KEY$)", re.IGNORECASE)
SECRET_ASSIGN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")
REDACTED = "<redacted>"


class BundleError(GpuwatchError):
    """The bundle could not be written or read; the words say why."""


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_text(text: str) -> str:
    """`WANDB_API_KEY=abc` -> `WANDB_API_KEY=<redacted>`; other assignments stay as they are."""
    return SECRET_ASSIGN.sub(lambda m: f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0), text)


def redact(value):
    """Any JSON value: secret-named keys lose their values; strings lose `SECRET=value` assignments."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and is_secret_name(k) and isinstance(v, (str, int, float))
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _dumps_of(view, since: float, directory: Path | None) -> list[Path]:
    """The dumps of this job (its host and short id; never another job's of the same name) since `since`."""
    if not view.short_id:
        return []
    directory = directory or dumps_dir()
    try:
        found = sorted(directory.glob(f"{dump_prefix(view.host, view.short_id)}*.json"),
                       key=lambda p: p.stat().st_mtime)
    except OSError:
        return []
    return [p for p in found if p.stat().st_mtime >= since]


def _findings(dump_json: dict) -> dict:
    """The findings lines of a saved dump (its groups, motion, flight recorder, RAS) and their data."""

    groups = (dump_json.get("analysis") or {}).get("groups") or []
    lines = [f"{len(g.get('members') or [])} in {g.get('where')}" + (" (suspect)" if g.get("suspect") else "")
             for g in groups]
    if dump_json.get("motion"):
        lines.append(dump_json["motion"])
    fr = collective_evidence.fr_analysis(dump_json.get("fr_records") or [])
    ras = collective_evidence.ras_report(dump_json.get("ras"))
    lines += [x.summary for x in (fr, ras) if x is not None]
    lines += list(dump_json.get("collective_notes") or [])
    return {"summary": (dump_json.get("analysis") or {}).get("summary"), "lines": lines,
            "flight_recorder": fr.to_json() if fr else None, "nccl_ras": ras.to_json() if ras else None}


def _redacted_recording(path: Path) -> bytes:
    out = io.BytesIO()
    with gzip.open(path, "rt", encoding="utf-8") as src, gzip.GzipFile(fileobj=out, mode="wb") as dst:
        for line in src:
            if line.strip():
                dst.write((json.dumps(redact(json.loads(line)), separators=(",", ":")) + "\n").encode())
    return out.getvalue()


def window_recording(recordings: list[Path], start: float, end: float) -> tuple[bytes | None, str]:
    """The window [start, end] out of the newest recording that reaches into it: (gzip bytes, note)."""

    for path in sorted(recordings, reverse=True):
        try:
            timeline = Timeline.open(path)
        except (RecordingError, OSError) as exc:
            return None, f"recording {path.name} not read: {exc}"
        if not timeline.ticks or timeline.end < start or timeline.start > end:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cut = Path(tmp) / RECORDING
            ticks = write_window(timeline, start, end, cut)
            note = f"{ticks} ticks from {path.name}, {max(start, timeline.start):.0f} to {min(end, timeline.end):.0f}"
            return _redacted_recording(cut), note
    return None, "no recording covers the window (set [settings] record = DIR to keep one)"


def write_bundle(monitor, host: str, job: str, directory: Path | str | None = None, *,
                 recordings: list[Path] = (), window_s: float = DEFAULT_WINDOW_S, now: float | None = None,
                 log_lines: int = DEFAULT_LOG_LINES, dumps_dir: Path | None = None,
                 view=None, report: str | None = None) -> Path:
    """Write the bundle for `job` on `host`; returns its path. Raises BundleError / ReportError.
    The dashboard renders the report on its loop and passes `view` and `report`: the rest (the window's
    recording, the files) touches no live state and runs in a thread."""

    now = time.time() if now is None else now
    view = view if view is not None else find_job(monitor, host, job, now)
    start = now - window_s
    dumps = _dumps_of(view, start, dumps_dir)
    if report is None:
        report = render_report(monitor, view, now, log_lines, dumps[-1] if dumps else None)
    report = redact_text(report)
    recording, rec_note = window_recording(list(recordings), start, now)
    manifest = {"format": FORMAT, "version": VERSION, "host": view.host, "job": view.name, "job_id": view.id,
                "short_id": view.short_id,
                "written": now, "window": [start, now], "recording": rec_note, "dumps": [], "files": ["report.md"]}
    directory = Path(directory) if directory is not None else reports_dir()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    path = directory / f"{job_file_stem(view)}_{stamp}.gpuwatch-bundle.zip"
    findings = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("report.md", report)
            if recording is not None:
                z.writestr(RECORDING, recording, compress_type=zipfile.ZIP_STORED)  # gzip already
                manifest["files"].append(RECORDING)
            for d in dumps:
                try:
                    data = redact(json.loads(d.read_text(encoding="utf-8")))
                except (OSError, ValueError) as exc:
                    manifest["dumps"].append({"file": d.name, "error": str(exc)})
                    continue
                z.writestr(f"dumps/{d.name}", json.dumps(data, indent=1))
                manifest["dumps"].append({"file": d.name, "taken_at": data.get("taken_at")})
                manifest["files"].append(f"dumps/{d.name}")
                findings = _findings(data)
            if findings is not None:
                z.writestr("findings.json", json.dumps(findings, indent=1))
                manifest["files"].append("findings.json")
            z.writestr("manifest.json", json.dumps(manifest, indent=1))
        tmp.replace(path)
    except OSError as exc:
        raise BundleError(f"cannot write the bundle in {directory}: {exc.strerror or exc}") from None
    return path


def open_bundle(path: Path | str) -> tuple[dict, Path | None, tempfile.TemporaryDirectory]:
    """(manifest, the recording extracted to a temp dir or None, the temp dir to keep alive while it is used)."""
    try:
        z = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BundleError(f"{path}: not a gpuwatch bundle ({exc})") from None
    with z:
        try:
            manifest = json.loads(z.read("manifest.json"))
        except (KeyError, ValueError) as exc:
            raise BundleError(f"{path}: no readable manifest.json ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise BundleError(f"{path}: not a gpuwatch bundle (format {manifest.get('format')!r})")
        tmp = tempfile.TemporaryDirectory(prefix="gpuwatch-bundle-")
        recording = None
        if RECORDING in z.namelist():
            recording = Path(tmp.name) / RECORDING
            recording.write_bytes(z.read(RECORDING))
        return manifest, recording, tmp


def is_bundle(path: Path | str) -> bool:
    return zipfile.is_zipfile(path)
