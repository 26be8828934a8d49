"""Helpers for the py-spy tests: a stand-in "host" that serves the probe's ops, real blocked
processes to dump, and a reader for py-spy's text dumps (the recorded H200 fixtures).

The "host" is a real separate process: the system Python running ops_base + ops_pyspy, shipped to
it on stdin as the probe bundle ships them, with the environment (PATH, XDG_CACHE_HOME) and user
(a setpriv prefix) the test chooses. It answers requests with the probe's reply framing.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gpuwatch_tui.actions.stacks import ProcessDump, process_from_reply

PROBE_DIR = Path(__file__).resolve().parents[2] / "src" / "gpuwatch_tui" / "probe"
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "pyspy"
HOST_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# Loads the shipped op modules from the first stdin line, then answers one request per line.
OP_MODULES = ("ops_base", "ops_pyspy", "ops_flightrec", "ops_ncclras")  # in import order
RUNNER = r"""
import json, sys, threading, types
OP_MODULES = __OP_MODULES__
first = json.loads(sys.stdin.readline())
OPS = {}
for name in OP_MODULES:
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(first[name], name + ".py", "exec"), mod.__dict__)
    OPS.update(getattr(mod, "OPS", {}))
OpError = sys.modules["ops_base"].OpError
out = threading.Lock()
def reply(frame):
    with out:
        sys.stdout.write(json.dumps(frame) + "\n")
        sys.stdout.flush()
def serve(req):
    try:
        if req["op"] not in OPS:
            raise OpError("unknown-op", "unknown op %r" % req["op"])
        reply({"type": "reply", "id": req["id"], "ok": True, "result": OPS[req["op"]](req.get("args") or {})})
    except OpError as exc:
        reply({"type": "reply", "id": req["id"], "ok": False, "error": {"code": exc.code, "message": exc.message}})
for line in sys.stdin:
    threading.Thread(target=serve, args=(json.loads(line),)).start()
""".replace("__OP_MODULES__", repr(OP_MODULES))

AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class OpRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class OpHost:
    """A probe-side op server in its own process; `request` has HostSession.request's shape."""

    def __init__(self, env: dict[str, str] | None = None, prefix: list[str] | None = None) -> None:
        self.env = env
        self.prefix = prefix or []
        self.proc: asyncio.subprocess.Process | None = None
        self._next = 0
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> "OpHost":
        self.proc = await asyncio.create_subprocess_exec(
            *self.prefix, HOST_PYTHON, "-c", RUNNER,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env, limit=64 * 1024 * 1024,
        )
        sources = {n: (PROBE_DIR / f"{n}.py").read_text() for n in OP_MODULES}
        self.proc.stdin.write((json.dumps(sources) + "\n").encode())
        await self.proc.stdin.drain()
        return self

    async def __aexit__(self, *exc) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()

    async def request(self, op: str, args: dict, timeout: float = 30.0) -> dict:
        # one request at a time is all these tests need: replies then come back in order
        async with self._lock:
            self._next += 1
            self.proc.stdin.write((json.dumps({"op": op, "id": self._next, "args": args}) + "\n").encode())
            await self.proc.stdin.drain()
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise OpRefused("closed", "the op host exited")
        frame = json.loads(line)
        assert frame["id"] == self._next
        if not frame["ok"]:
            raise OpRefused(frame["error"]["code"], frame["error"]["message"])
        return frame["result"]


def env_without_pyspy(cache_home: Path) -> dict[str, str]:
    """An environment whose PATH has no py-spy and whose per-user cache is a temp dir."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, "py-spy"))]
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "XDG_CACHE_HOME")}
    env["PATH"] = os.pathsep.join(dirs or ["/usr/bin", "/bin"])
    env["XDG_CACHE_HOME"] = str(cache_home)
    assert shutil.which("py-spy", path=env["PATH"]) is None
    return env


# -- real processes to dump ------------------------------------------------------------------
BLOCKED_ON = {
    # a lock held by the main thread and taken again: the main thread blocks in acquire (in C)
    "lock": "import threading\nlock = threading.Lock()\nlock.acquire()\nprint('ready', flush=True)\nlock.acquire()\n",
    "event": ("import threading\ndone = threading.Event()\nprint('ready', flush=True)\n"
              "def wait_here():\n    done.wait()\nwait_here()\n"),
    "sleep": "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(1)\n",
}


def start_ticks(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2:].split()[19])


def proc_state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].split()[0].decode()


def spawn_blocked(kind: str, workdir: Path) -> subprocess.Popen:
    """A real Python process stuck the way `kind` says; its script is a file so frames show lines."""
    script = workdir / f"blocked_{kind}.py"
    script.write_text(BLOCKED_ON[kind])
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(0.2)  # from the print to the blocking call
    return proc


def stop(proc: subprocess.Popen) -> None:
    """End a process this test started, by its own handle."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


# -- py-spy's text format (the recorded H200 dumps) -------------------------------------------
_PROCESS = re.compile(r"^Process (\d+): (.*)$")
_THREAD = re.compile(r'^Thread (\d+) \((idle|active)\)(?:: "(.*)")?$')
_FRAME = re.compile(r"^\s+(.+) \((.+):(\d+)\)$")


def parse_text_dump(text: str) -> dict:
    """One `py-spy dump` text report as an entry of the pyspy_dump op's reply (py-spy's JSON shape)."""
    entry: dict = {"ok": True, "threads": [], "start_ticks": 0, "state_before": "S", "state_after": "S"}
    for line in text.splitlines():
        if m := _PROCESS.match(line):
            entry["pid"] = int(m[1])
            entry["cmdline"] = m[2].split()
        elif m := _THREAD.match(line):
            entry["threads"].append({
                "thread_id": int(m[1]), "os_thread_id": int(m[1]), "thread_name": m[3] or "",
                "active": m[2] == "active", "owns_gil": False, "frames": [],
            })
        elif (m := _FRAME.match(line)) and entry["threads"]:
            entry["threads"][-1]["frames"].append({
                "name": m[1], "filename": m[2], "short_filename": m[2].rsplit("/", 1)[-1], "line": int(m[3]),
            })
    return entry


def h200_dump(name: str, rank: int | None = None) -> ProcessDump:
    return process_from_reply(parse_text_dump((DATA_DIR / name).read_text()), rank)
