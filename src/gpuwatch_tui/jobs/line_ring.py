"""The kept lines of one log, stored as columns: a LogLine object per kept line cost ~160 bytes beside
its text (500 lines x 1024 jobs: ~80 MB); here a line costs its text and ~25 bytes."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from typing import NamedTuple


class LogLine(NamedTuple):
    seq: int  # 1-based position among all complete lines seen
    time: float  # when the line was completed
    text: str


class LineRing:
    """The newest `maxlen` lines: texts in a deque, numbers and times in arrays used as a ring."""

    def __init__(self, maxlen: int) -> None:
        self.maxlen = max(0, maxlen)
        self._texts: deque[str] = deque(maxlen=self.maxlen)
        self._seqs = array("q")
        self._times = array("d")
        self._start = 0  # where the oldest line's number and time sit in the arrays

    def __len__(self) -> int:
        return len(self._texts)

    def append(self, seq: int, time: float, text: str) -> None:
        self.extend(seq, time, (text,))

    def extend(self, first: int, time: float, texts: list[str] | tuple[str, ...]) -> None:
        """Lines numbered from `first` on, all completed at `time` (one chunk's lines: one call)."""
        size = self.maxlen
        if not size:
            return
        seqs, times, kept = self._seqs, self._times, self._texts
        for text in texts:
            n = len(kept)
            if n == size:  # full: the oldest goes
                i = self._start
                self._start = i + 1 if i + 1 < size else 0
            else:
                i = self._start + n
                if i >= size:
                    i -= size
            if i == len(seqs):  # still filling for the first time
                seqs.append(first)
                times.append(time)
            else:
                seqs[i] = first
                times[i] = time
            kept.append(text)
            first += 1

    def pop(self) -> None:
        """Drop the newest line."""
        self._texts.pop()

    def texts(self) -> list[str]:
        return list(self._texts)

    def __iter__(self) -> Iterator[LogLine]:
        seqs, times, start, size = self._seqs, self._times, self._start, self.maxlen
        for k, text in enumerate(self._texts):
            i = (start + k) % size
            yield LogLine(seqs[i], times[i], text)
