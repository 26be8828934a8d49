"""Typed Python stacks of a job's processes, as py-spy's `dump --json` reports them.

Frames are innermost first, as py-spy lists them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Local:
    name: str
    repr: str
    arg: bool = False


@dataclass(frozen=True)
class Frame:
    name: str  # function, qualified where py-spy can ("Event.wait", "<module>")
    filename: str
    line: int
    short_filename: str = ""
    locals: tuple[Local, ...] = ()
    source: str | None = None  # the text of that line on the host, when the probe could read it
    native: bool = False  # a C/C++ frame (dump --native): name is a symbol, filename a library

    @property
    def where(self) -> str:
        if self.native:
            return f"{self.name} ({self.short_filename or self.filename})"
        return f"{self.name} ({self.short_filename or self.filename}:{self.line})"


@dataclass(frozen=True)
class ThreadStack:
    thread_id: int
    name: str  # "MainThread", a thread's name, or "" when py-spy could not tell
    os_thread_id: int | None
    active: bool  # running (or waiting in C without releasing the GIL), as opposed to idle
    owns_gil: bool
    frames: tuple[Frame, ...]

    @property
    def idle(self) -> bool:
        return not self.active


@dataclass(frozen=True)
class ProcessDump:
    """One process's dump, or why there is none."""

    pid: int
    start_ticks: int
    ok: bool
    threads: tuple[ThreadStack, ...] = ()
    rank: int | None = None
    local_rank: int | None = None
    cmdline: tuple[str, ...] = ()
    state_before: str | None = None  # /proc state letter before and after the dump
    state_after: str | None = None
    resumed: bool = False  # py-spy left it stopped and we sent SIGCONT
    note: str | None = None
    error_code: str | None = None  # gone, reused, permission, not-python, timeout, failed
    message: str | None = None  # words for a person: what happened and what to change
    stderr: str = ""
    command: tuple[str, ...] = ()

    @property
    def main_thread(self) -> ThreadStack | None:
        for t in self.threads:
            if t.os_thread_id == self.pid or t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None

    @property
    def label(self) -> str:
        return f"rank {self.rank} (pid {self.pid})" if self.rank is not None else f"pid {self.pid}"

    @property
    def stopped(self) -> bool:
        return self.state_before == "T" and not self.resumed


def _frame(raw: dict) -> Frame:
    return Frame(
        name=str(raw.get("name") or "?"),
        filename=str(raw.get("filename") or ""),
        line=int(raw.get("line") or 0),
        short_filename=str(raw.get("short_filename") or ""),
        locals=tuple(
            Local(str(v.get("name", "")), str(v.get("repr", "")), bool(v.get("arg")))
            for v in (raw.get("locals") or ())
        ),
        source=raw.get("source"),
        native=bool(raw.get("module")),  # py-spy names the library of native frames only
    )


def _thread(raw: dict) -> ThreadStack:
    os_tid = raw.get("os_thread_id")
    return ThreadStack(
        thread_id=int(raw.get("thread_id") or 0),
        name=str(raw.get("thread_name") or ""),
        os_thread_id=int(os_tid) if os_tid is not None else None,
        active=bool(raw.get("active")),
        owns_gil=bool(raw.get("owns_gil")),
        frames=tuple(_frame(f) for f in raw.get("frames") or ()),
    )


def process_from_reply(raw: dict, rank: int | None = None) -> ProcessDump:
    """One entry of the pyspy_dump op's `processes` list, typed. `rank` overrides the probe's reading."""
    return ProcessDump(
        pid=int(raw.get("pid") or 0),
        start_ticks=int(raw.get("start_ticks") or 0),
        ok=bool(raw.get("ok")),
        threads=tuple(_thread(t) for t in raw.get("threads") or ()),
        rank=rank if rank is not None else raw.get("rank"),
        local_rank=raw.get("local_rank"),
        cmdline=tuple(raw.get("cmdline") or ()),
        state_before=raw.get("state_before"),
        state_after=raw.get("state_after"),
        resumed=bool(raw.get("resumed")),
        note=raw.get("note"),
        error_code=raw.get("code"),
        message=raw.get("message"),
        stderr=str(raw.get("stderr") or ""),
        command=tuple(raw.get("command") or ()),
    )

