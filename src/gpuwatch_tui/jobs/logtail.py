"""Assemble followed log bytes into safe display lines.

Log bytes are hostile: a job (or whatever wrote its log) can emit escape sequences that
would retitle, clear or hijack the terminal. Everything leaving this module is text with
no control characters at all, so widgets and the JSON output can show it as is.
"""

from __future__ import annotations

import re

from ..model import TailChunk
from ..safe_text import safe_text
from .line_ring import LineRing, LogLine

# CSI (colours, cursor moves) and OSC (titles, hyperlinks) sequences are dropped whole:
# colour codes are common and harmless in intent, the rest must not reach a terminal.
_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]")
_OSC = re.compile(r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")
_OTHER_ESC = re.compile(r"\x1b[@-Z\\-_]|\x1b[!-/]+[0-~]?")


def sanitize_line(raw: bytes | str, max_chars: int | None = None) -> str:
    """Printable text from raw log bytes: invalid UTF-8 replaced, colour and OSC sequences removed,
    every other control shown by the one sanitiser (safe_text), combining runs bounded."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, (bytes, bytearray)) else raw
    if "\x1b" in text or "\x9b" in text or "\x9d" in text:
        text = _OSC.sub("", text)
        text = _CSI.sub("", text)
        text = _OTHER_ESC.sub("", text)
    text = text.expandtabs(8) if "\t" in text else text
    if not (text.isascii() and text.isprintable()):
        text = safe_text(text)
    if max_chars is not None and len(text) > max_chars:
        text = f"{text[:max_chars]}… [+{len(text) - max_chars} chars]"
    return text


_CSI_BYTES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")


def last_frame(segment: bytes) -> bytes:
    """The frame a terminal would show for one line written with carriage returns."""
    if b"\r" not in segment:
        return segment
    frames = segment.split(b"\r")
    for frame in reversed(frames):
        # A frame of only cursor moves (tqdm's nested bars write "\x1b[A") shows nothing.
        if _CSI_BYTES.sub(b"", frame).strip():
            return frame
    return b""


class LogBuffer:
    """The last N safe lines of one followed file, fed with the probe's TailChunks.

    - `\\r` progress-bar frames collapse to the latest one;
    - the unterminated last line is held as `live` (its latest frame) and appears among the
      lines once older than `partial_stale_s`, provisionally: more bytes continue it, as on a
      terminal;
    - `reset` chunks (rotation, truncation, re-creation) and `skipped` bytes leave a marker;
    - a line the probe shortened (`cut`), or an unterminated one longer than MAX_PARTIAL_BYTES,
      keeps its beginning and says how many bytes were not shown; the lines around it are kept.
    """

    MAX_PARTIAL_BYTES = 64 * 1024
    shortcuts = True  # the common chunk's paths (in `feed`, `_feed_whole_lines`); tests compare them with the rest

    def __init__(self, max_lines: int = 500, max_line_chars: int = 2000, partial_stale_s: float = 2.0):
        self.max_lines = max_lines
        self.max_line_chars = max_line_chars
        self.partial_stale_s = partial_stale_s
        self._lines = LineRing(max_lines)
        self._partial = b""
        self._partial_since: float | None = None
        self._partial_shown = False  # the stale partial sits provisionally at the end of _lines
        self._partial_cut = 0  # bytes dropped from the current line (frame) so far
        self._cut_at = 0  # where in _partial the kept part of the cut frame ends
        self._dropping = False  # the cut frame goes on: drop its bytes up to the next \r or \n
        # Complete lines not yet taken, as texts and times (their numbers end at total_lines): a LogLine
        # is made only for `take_new`, the wiring takes the texts.
        self._new_texts: list[str] = []
        self._new_times: list[float] = []
        self._started = False
        self.total_lines = 0
        self.total_bytes = 0
        self.resets = 0
        self.skipped_bytes = 0
        self.last_growth: float | None = None
        self.size: int | None = None
        self.mtime: float | None = None
        self.error: str | None = None
        self.path: str | None = None
        self.received = False  # the probe has reported on this file at least once (data, size or error)

    # -- feeding -----------------------------------------------------------------
    def feed(self, chunk: TailChunk, now: float, skew: float = 0.0) -> None:
        """One chunk the probe read; `skew` moves its mtime (host clock) onto the local clock."""
        mtime = self._note(chunk, skew)
        data = chunk.data
        cuts = chunk.cut
        if data and self.total_bytes and self.shortcuts and not (chunk.reset or chunk.skipped or cuts):
            # Bytes that go on from bytes already taken (most chunks): no marker, no cut, not the first.
            self.total_bytes += len(data)
            self.last_growth = now
            if (not self._partial and not self._partial_cut and not self._dropping and data[-1:] == b"\n"
                    and b"\r" not in data):
                self._feed_whole_lines(data, now)  # (what `_feed_bytes` does with them, one call less)
            else:
                self._feed_bytes(data, now)
            return
        if chunk.reset and self._started:
            self._drop_partial()
            self.resets += 1
            self._append_marker("[gpuwatch: log restarted (rotated, truncated or recreated)]", now)
        if not self._started and data:
            self._started = True
            # The probe starts a new tail some way back: the first bytes may begin mid-line.
            read = len(data) + chunk.skipped + sum(n for _, n in cuts)
            if chunk.size is not None and chunk.size > read and not chunk.reset:
                newline = data.find(b"\n")
                drop = newline + 1 if newline >= 0 else len(data)
                data = data[drop:]
                cuts = [(pos - drop, n) for pos, n in cuts if pos >= drop]
        if chunk.skipped:
            self._drop_partial()
            self.skipped_bytes += chunk.skipped
            self._append_marker(f"[gpuwatch: {chunk.skipped} bytes skipped, the log grew too fast]", now)
        if data:
            first = self.total_bytes == 0 and self.last_growth is None
            self.total_bytes += len(data)
            # Backlog read at the first poll was written earlier: the file's mtime says when.
            self.last_growth = min(now, mtime) if first and mtime is not None else now
        pos = 0
        for cut_pos, dropped in cuts:
            if cut_pos > pos:
                self._feed_bytes(data[pos:cut_pos], now)
                pos = cut_pos
            self._partial_cut += dropped
            self._cut_at = len(self._partial)
            self._dropping = True
        if pos < len(data):
            self._feed_bytes(data[pos:], now)

    def _note(self, chunk: TailChunk, skew: float) -> float | None:
        """The chunk's file facts kept; its mtime on the local clock returned."""
        self.received = True
        self.path = chunk.path
        self.error = chunk.error
        if chunk.size is not None:
            self.size = chunk.size
        mtime = chunk.mtime
        if mtime is not None:
            mtime += skew
            self.mtime = mtime
        return mtime

    def feed_bytes(self, data: bytes, now: float) -> None:
        """Feed raw bytes directly (tests, local files)."""
        self.feed(TailChunk("", self.path or "", data, False, 0, None, None, None), now)

    def _feed_bytes(self, data: bytes, now: float) -> None:
        if (
            self.shortcuts
            and not self._partial
            and not self._partial_cut
            and not self._dropping
            and data[-1:] == b"\n"
            and b"\r" not in data
        ):
            self._feed_whole_lines(data, now)
            return
        if self._dropping:
            ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
            end = min(ends) if ends else len(data)
            self._partial_cut += end
            self._dropping = not ends
            data = data[end:]
            if not data:
                return
        if self._partial_shown:
            self._lines.pop()  # the provisional line is continued by these bytes
            self._partial_shown = False
        buf = self._partial + data
        parts = buf.split(b"\n")
        self._partial = parts.pop()
        for part in parts:
            segment = part.rstrip(b"\r") if part.endswith(b"\r") else part
            self._append(last_frame(segment), now, self._cut_of(segment))
            self._partial_cut = 0
        if self._partial:
            # Keep only the latest frame of a progress bar; cap a runaway unterminated line.
            self._partial_cut = self._cut_of(self._partial)
            frame = self._partial.rfind(b"\r")
            if frame > 0 and self._partial[frame + 1 :].strip():
                self._partial = self._partial[frame:]
                self._cut_at = max(0, self._cut_at - frame)
            if len(self._partial) > self.MAX_PARTIAL_BYTES:
                self._partial_cut += len(self._partial) - self.MAX_PARTIAL_BYTES
                self._partial = self._partial[: self.MAX_PARTIAL_BYTES]
                self._cut_at = self.MAX_PARTIAL_BYTES
                self._dropping = True
        self._partial_since = now if self._partial else None

    def _feed_whole_lines(self, data: bytes, now: float) -> None:
        """Complete lines with no carriage return, nothing held before them (most chunks of a training
        log), kept as not yet taken."""
        texts = self._whole_lines(data, now)
        self._new_texts.extend(texts)
        self._new_times.extend([now] * len(texts))
        if len(self._new_texts) > self.max_lines * 4:  # nobody takes them: keep the newest
            del self._new_texts[: len(self._new_texts) - self.max_lines]
            del self._new_times[: len(self._new_times) - self.max_lines]

    def _whole_lines(self, data: bytes, now: float) -> list[str]:
        """Complete lines with no carriage return, nothing held before them: decoded at once, then split,
        kept, and returned. The same lines as decoding line by line: a newline byte is never part of a
        UTF-8 sequence, so an invalid one before it is replaced the same either way."""
        if self._partial_shown:
            self._lines.pop()  # the provisional line is continued by these bytes
            self._partial_shown = False
        max_chars = self.max_line_chars
        texts = data.decode("utf-8", errors="replace").split("\n")
        texts.pop()  # after the last newline: nothing
        for i, text in enumerate(texts):
            # All printable and short (most lines): sanitize_line would return it as it is.
            if not (text.isascii() and text.isprintable()) or len(text) > max_chars:
                texts[i] = sanitize_line(text, max_chars)
        first = self.total_lines + 1
        self.total_lines += len(texts)
        self._lines.extend(first, now, texts)
        self._partial_since = None
        return texts

    def _cut_of(self, segment: bytes) -> int:
        """Bytes dropped from the frame a terminal would show: 0 once a later frame replaced it."""
        if not self._partial_cut:
            return 0
        later = _CSI_BYTES.sub(b"", segment[self._cut_at :]).replace(b"\r", b"")
        return 0 if later.strip() else self._partial_cut

    def tick(self, now: float) -> None:
        """Show an unterminated last line once it has been stale long enough."""
        if (
            self._partial
            and not self._partial_shown
            and self._partial_since is not None
            and now - self._partial_since >= self.partial_stale_s
        ):
            text = self._safe(last_frame(self._partial), self._partial_cut)
            if text.strip():
                self._lines.append(self.total_lines + 1, now, text)
                self._partial_shown = True

    def _append(self, raw: bytes, now: float, cut: int = 0) -> None:
        self._append_text(self._safe(raw, cut), now)

    def _append_text(self, text: str, now: float) -> None:
        self.total_lines += 1
        self._lines.extend(self.total_lines, now, (text,))  # (as append does, one call less)
        texts = self._new_texts
        texts.append(text)
        self._new_times.append(now)
        if len(texts) > self.max_lines * 4:  # nobody takes them: keep the newest
            del texts[: len(texts) - self.max_lines]
            del self._new_times[: len(self._new_times) - self.max_lines]

    def _append_marker(self, text: str, now: float) -> None:
        if self._partial_shown:
            self._lines.pop()
            self._partial_shown = False
        self._lines.append(self.total_lines, now, text)

    def _drop_partial(self) -> None:
        if self._partial_shown:
            self._lines.pop()
            self._partial_shown = False
        self._partial = b""
        self._partial_since = None
        self._partial_cut = 0
        self._dropping = False

    def _safe(self, raw: bytes, cut: int = 0) -> str:
        text = sanitize_line(raw, self.max_line_chars)
        return f"{text} [gpuwatch: line cut, {cut} more bytes not shown]" if cut else text

    # -- reading -----------------------------------------------------------------
    @property
    def live(self) -> str:
        """The latest frame of the unterminated last line (a progress bar, usually)."""
        return self._safe(last_frame(self._partial), self._partial_cut) if self._partial else ""

    @property
    def live_since(self) -> float | None:
        return self._partial_since

    def lines(self, n: int | None = None) -> list[str]:
        """The last n display lines (all kept lines by default), a stale partial included."""
        items = self._lines.texts()
        if n is not None:
            items = items[-n:] if n > 0 else []
        return items

    def records(self) -> list[LogLine]:
        return list(self._lines)

    def take_new(self) -> list[LogLine]:
        """Complete lines added since the previous call."""
        texts, times = self._new_texts, self._new_times
        self._new_texts, self._new_times = [], []
        first = self.total_lines - len(texts) + 1
        return [LogLine(first + i, time, text) for i, (time, text) in enumerate(zip(times, texts))]

    def take_new_texts(self) -> list[str]:
        """The texts of `take_new`."""
        texts = self._new_texts
        self._new_texts, self._new_times = [], []
        return texts

    def feed_and_take(self, chunk: TailChunk, now: float, skew: float = 0.0) -> tuple[list[str], str]:
        """`feed`, `tick`, then (`take_new_texts()`, `live`): what the log wiring does with every chunk,
        in one call (a chunk of whole lines leaves no partial line: nothing to tick, no live line)."""
        data = chunk.data
        if (data and b"\r" not in data and data[-1:] == b"\n" and self.total_bytes and self.shortcuts
                and not self._partial and not self._partial_cut and not self._dropping and not self._new_texts
                and not (chunk.reset or chunk.skipped or chunk.cut)):
            # Whole lines going on from those taken, none held nor left untaken (most chunks): `feed`'s
            # shortcut, its lines handed on as they are kept (no list of untaken lines and times).
            self._note(chunk, skew)
            self.total_bytes += len(data)
            self.last_growth = now
            return self._whole_lines(data, now), ""
        self.feed(chunk, now, skew)
        live = ""
        if self._partial:
            self.tick(now)
            live = self.live
        texts = self._new_texts
        if texts:
            self._new_texts, self._new_times = [], []
        return texts, live
