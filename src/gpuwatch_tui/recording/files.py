"""Reading and writing recording files: gzip'd JSON lines (plain JSON lines are read too).

A recording cut short (the machine died at 3 a.m., the disk filled) or damaged in the middle is
read up to the damage; `Loaded.damage` says where and why, so the replay can say so.
"""

from __future__ import annotations

import errno
import gzip
import json
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..vocab import fmt_utc
from .format import RecordingError, check_header

FLUSH_EVERY_S = 10.0  # a crash loses at most this much; flushing every line would cost ratio


class RecordingWriter:
    """Appends lines to one new recording file; `close()` ends the gzip stream properly."""

    def __init__(self, path: Path | str, header: dict) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            raw = open(self.path, "xb")  # never overwrite an existing recording
        except FileExistsError:
            raise RecordingError(f"{self.path}: already exists; choose a new file name") from None
        except OSError as exc:
            raise RecordingError(f"{self.path}: cannot write: {exc.strerror or exc}") from None
        self._raw = raw
        plain = not self.path.name.endswith(".gz")
        self._out = raw if plain else gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)
        self._last_flush = time.monotonic()
        self.lines = 0
        try:
            self.write(header)
        except OSError as exc:
            self.abandon()
            raise RecordingError(f"{self.path}: cannot write: {why_not_written(exc)}") from None

    def write(self, line: dict) -> None:
        self._out.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
        self.lines += 1
        if time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        self._out.flush()  # a gzip sync point: everything so far can be read back
        if self._out is not self._raw:
            self._raw.flush()
        self._last_flush = time.monotonic()

    def bytes_written(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        """End the file properly; OSError (a full disk) leaves it abandoned, readable up to its last flush."""
        try:
            if self._out is not self._raw:
                self._out.close()
            self._raw.close()
        except OSError:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Let go of the file after a failed write without writing more (no gzip trailer): a reader gets
        everything up to the last flush and a note that the file ends early."""
        if self._out is not self._raw:
            self._out.fileobj = None  # so the gzip object, once collected, does not try to end the stream
        try:
            self._raw.close()
        except OSError:
            pass  # the buffered bytes that could not be written are dropped with it


def why_not_written(exc: OSError) -> str:
    """Words for a failed write: a full disk and a quota are named as such."""
    if exc.errno == errno.ENOSPC:
        return "the disk is full (no space left on device)"
    if exc.errno == errno.EDQUOT:
        return "the disk quota is exceeded"
    return exc.strerror or str(exc)


@dataclass
class Loaded:
    header: dict
    lines: list[dict]
    damage: str | None  # None: read to its proper end


def _open(path: Path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def read_recording(path: Path | str) -> Loaded:
    """The header and every tick line up to the end or the first damage.
    Raises RecordingError when not even the header can be read."""
    path = Path(path)
    try:
        stream = _open(path)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    header = None
    lines: list[dict] = []
    damage = None
    number = 0
    with stream:
        while True:
            try:
                raw = stream.readline()
            except (EOFError, OSError, zlib.error) as exc:  # truncated gzip, bad CRC, garbage
                damage = f"line {number + 1}: the file is cut short or damaged ({exc})"
                break
            if not raw:
                break
            number += 1
            try:
                data = json.loads(raw)
                if not raw.endswith(b"\n"):
                    raise ValueError("the last line is incomplete")
                if not isinstance(data, dict):
                    raise ValueError(f"expected an object, got {type(data).__name__}")
            except ValueError as exc:
                damage = f"line {number}: not a complete JSON object ({exc})"
                break
            if header is None:
                header = check_header(data, str(path))
                continue
            if not isinstance(data.get("t"), (int, float)):
                damage = f"line {number}: a tick without a time (\"t\")"
                break
            lines.append(data)
    if header is None:
        raise RecordingError(f"{path}: no header line could be read"
                             + (f" ({damage})" if damage else " (the file is empty)"))
    if damage is not None:
        when = fmt_utc(lines[-1]["t"]) if lines else "its start"
        damage = f"{path.name}: {damage}; replaying up to {when}"
    return Loaded(header, lines, damage)
