"""A running probe and the byte stream to it: the same interface over SSH or a local pipe."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from ..config_records import HostConfig
from .probe_bundle import BOOTSTRAP, build_payload
from .frame_decode import decode_frame

FRAME_LIMIT = 32 * 1024 * 1024  # a frame carries at most a few capped log chunks
# A probe's stdout carries frames only (a login banner may come before the hello). Lines that are not
# JSON are counted and dropped, never kept: past these bounds since the last frame the stream has
# broken its contract and the link ends with a reason. Memory per link: one line (< FRAME_LIMIT over
# a local pipe; an SSH channel's window, ~2 MiB, over SSH), STDERR_KEEP bytes of stderr, one note.
MAX_JUNK_LINES = 200
MAX_JUNK_BYTES = 1024 * 1024
STDERR_KEEP = 8192
JUNK_NOTE_BYTES = 120


class ProbeBrokeContract(Exception):
    """The probe's output stopped being frames (garbage, truncated frames): the host is told why."""


class ProbeExited(Exception):
    """The probe process ended; carries its exit status and the end of its stderr."""

    def __init__(self, status: int | None, stderr: str) -> None:
        self.status = status
        self.stderr = stderr.strip()
        words = f"probe exited with status {status}" if status is not None else "probe channel closed"
        if self.stderr:
            words += f": {self.stderr.splitlines()[-1][:300]}"
        super().__init__(words)


class ProbeLink:
    """Base: send requests, receive frames, close. Subclasses wire the streams."""

    reader: Any
    writer: Any

    def __init__(self) -> None:
        self._stderr = bytearray()
        self.junk_lines = 0  # lines that were not frames, over this link's life
        self._junk_since_frame = 0
        self._junk_bytes_since_frame = 0
        self.last_junk = b""

    async def send(self, request: dict) -> None:
        await self.send_line(json.dumps(request, separators=(",", ":")))

    async def send_line(self, text: str) -> None:
        """One request, already JSON; whole lines only, so requests never interleave."""
        self.writer.write((text + "\n").encode())
        await self._drain()

    async def _ship(self, options: dict) -> None:
        """Send the probe. If it died at once (no interpreter, a broken prefix) the write may
        fail: the first read then reports its exit status and stderr, which say why."""
        try:
            self.writer.write(build_payload(options))
            await self._drain()
        except Exception:  # BrokenPipe, ConnectionError, asyncssh.Error
            pass

    async def _drain(self) -> None:
        drain = getattr(self.writer, "drain", None)
        if drain is not None:
            await drain()

    async def next_frame(self) -> dict:
        while True:
            line = await self.reader.readline()
            if not line:
                raise ProbeExited(await self.exit_status(), self.stderr_text())
            try:
                frame = decode_frame(line)
            except ValueError:
                frame = None
            if isinstance(frame, dict):
                self._junk_since_frame = self._junk_bytes_since_frame = 0
                return frame
            self._count_junk(line)

    def _count_junk(self, line: bytes) -> None:
        self.junk_lines += 1
        self._junk_since_frame += 1
        self._junk_bytes_since_frame += len(line)
        self.last_junk = bytes(line[:JUNK_NOTE_BYTES]).rstrip(b"\n")
        if self._junk_since_frame > MAX_JUNK_LINES or self._junk_bytes_since_frame > MAX_JUNK_BYTES:
            raise ProbeBrokeContract(
                f"the probe's output is not frames: {self._junk_since_frame} lines "
                f"({self._junk_bytes_since_frame} bytes) that are not JSON since the last frame; the last began "
                f"{self.last_junk.decode('utf-8', 'replace')[:60]!r}")

    async def _collect_stderr(self, stream: Any) -> None:
        try:
            while True:
                chunk = await stream.read(4096)
                if not chunk:
                    return
                self._stderr += chunk
                del self._stderr[:-STDERR_KEEP]
        except Exception:
            return

    def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    async def exit_status(self) -> int | None:
        return None

    async def close(self, wait: float = 3.0) -> None:
        """Close the probe's stdin (it exits on that) and wait up to `wait` s for it to end."""
        raise NotImplementedError


class LocalProbeLink(ProbeLink):
    """The probe as a child process of gpuwatch: the local machine is a host too."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        super().__init__()
        self.proc = proc
        self.reader = proc.stdout
        self.writer = proc.stdin
        self._err_task = asyncio.ensure_future(self._collect_stderr(proc.stderr))

    @classmethod
    async def start(cls, host: HostConfig, options: dict) -> "LocalProbeLink":
        env = dict(os.environ)
        words = list(host.prefix)
        if host.prefix:
            # Through a prefix (`docker exec -i NAME`, `sudo`) our interpreter path means nothing
            # on the other side, and the environment does not cross it: pass it as words.
            python = host.python
            if host.env:
                words += ["env", *(f"{k}={v}" for k, v in host.env)]
        else:
            python = sys.executable if host.python == "python3" else host.python
            env.update(dict(host.env))
        argv = [*words, python, "-c", BOOTSTRAP]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, limit=FRAME_LIMIT,
            )
        except OSError as exc:
            raise ProbeExited(None, f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        link = cls(proc)
        await link._ship(options)
        return link

    async def exit_status(self) -> int | None:
        try:
            return await asyncio.wait_for(self.proc.wait(), 2)
        except asyncio.TimeoutError:
            return None

    async def close(self, wait: float = 3.0) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.stdin.close()  # the probe exits when its stdin closes
            except Exception:
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), max(wait, 0.5))
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._err_task.cancel()
