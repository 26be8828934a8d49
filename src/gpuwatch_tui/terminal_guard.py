"""The headless verbs' last line of defence: what they print passes the sanitiser on its way out.

Tables, plans, host errors and prompts carry host-controlled text (script names, argv, GPU names, Slurm
fields, probe stderr). Each line written to stdout/stderr goes through `safe_text` with the newline
kept, so a field nobody thought of is covered by construction; the verbs themselves write no control
sequences. JSON output is ASCII (json.dumps escapes the rest) and passes unchanged. Text that cannot be
encoded for the terminal (a non-UTF-8 argv byte on a strict UTF-8 locale) is already `\\xNN` by then.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator, TextIO

from .safe_text import safe_text

_KEEP = "\n\t"  # the verbs' own layout: lines and (in a few reports) tab-separated columns


class SafeStream:
    """A text stream that sanitises what is written to it and delegates everything else."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(safe_text(text, keep=_KEEP))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_output() -> Iterator[None]:
    """stdout and stderr sanitised for the duration (restored after, also on an exception)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
