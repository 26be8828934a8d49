"""Restart a job with unbuffered output: the same command, cwd and environment, plus `-u`.

`build_restart` is pure: from what the probe's `capture` op read about the job's top process, it plans
the new command line (`-u` right after the interpreter), the environment (+ PYTHONUNBUFFERED=1), where
output goes (the old log, never truncated) and what to warn about. `restart_job` then kills the old job,
waits (bounded) for its GPU memory to be freed, and starts the new one detached under the probe's
wrapper, which records the real exit status.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from .audit import current_user
from .job_tree import JobTree
from .kill import KillReport, kill_job
from .report import ActionResult, RequestFailure
from .request import Request, failure_of
from .settings import ActionSettings

_INTERPRETER = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[dmt]?$")
_PY_FLAGS_WITH_ARG = frozenset({"-W", "-X", "-Q", "--check-hash-based-pycs"})
GpuStillHeld = Callable[[], Awaitable[bool]]


def is_python_interpreter(arg0: str) -> bool:
    """python, python3, python3.12, /path/to/python... (not a script or a launcher named after one)."""
    return bool(_INTERPRETER.match(os.path.basename(arg0)))


def has_unbuffered_flag(argv: list[str]) -> bool:
    """Is -u among the interpreter's own options (before the script, -m or -c)?"""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            return False
        if arg.startswith("--"):
            i += 2 if arg in _PY_FLAGS_WITH_ARG else 1
            continue
        for j, ch in enumerate(arg[1:]):
            if ch == "u":
                return True
            if ch in "cm":
                return False
            if ch in "WXQ":
                if j == len(arg) - 2:
                    i += 1  # "-W ignore": the value is the next argument
                break
        i += 1
    return False


def unbuffered_argv(argv: list[str]) -> list[str]:
    """argv with -u right after the interpreter, when argv[0] is one and -u is not there yet."""
    if not argv or not is_python_interpreter(argv[0]) or has_unbuffered_flag(argv):
        return list(argv)
    return [argv[0], "-u", *argv[1:]]


@dataclass(frozen=True)
class RestartPlan:
    host: str
    job: str
    old_pid: int
    old_start_ticks: int
    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    stdout: str | None  # None: a new log in the host's run state dir
    stderr: str  # a path, or "stdout"
    log_mode: str
    marker: str
    uid: int | None
    user: str | None
    warnings: tuple[str, ...] = ()
    kill_tree: JobTree | None = None
    # (dev, inode) of each log file as discovery saw it: the probe writes to the path only while it is that file.
    stdout_id: tuple[int, int] | None = None
    stderr_id: tuple[int, int] | None = None

    def spawn_args(self, status_dir: str | None = None, marker_noted: bool = False,
                   note: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The spawn op's arguments. `marker_noted`: the marker is in the log already (log_note, before the
        kill): an appended log does not get it twice; a rotated one starts with it. `note` ({user, id}): the
        probe leaves a record of the new run on the host, naming its wrapper's exit record for every watcher."""
        marker = "" if marker_noted and self.log_mode == "append" else self.marker
        args: dict[str, Any] = {"argv": list(self.argv), "cwd": self.cwd, "env": dict(self.env),
                                "stdout": self.stdout, "stderr": self.stderr, "log_mode": self.log_mode,
                                "marker": marker, "uid": self.uid}
        if self.stdout_id is not None:
            args["stdout_id"] = list(self.stdout_id)
        if self.stderr_id is not None:
            args["stderr_id"] = list(self.stderr_id)
        if status_dir:
            args["status_dir"] = status_dir
        if note:
            args["note"] = dict(note)
        return args

    def command(self) -> str:
        """The exact command in shell words, for the confirm dialog and the audit log (display only:
        the probe starts argv directly, no shell is involved)."""
        out = shlex.quote(self.stdout) if self.stdout else "(a new log in the run state dir)"
        err = "2>&1" if self.stderr == "stdout" else "2>>" + shlex.quote(self.stderr)
        how = "appended after a marker line" if self.log_mode == "append" else "old log rotated to .1"
        return (f"cd {shlex.quote(self.cwd)} && PYTHONUNBUFFERED=1 setsid {shlex.join(self.argv)} "
                f"< /dev/null >> {out} {err}   # on {self.host}, as {self.user or self.uid}; {how}")


def build_restart(captured: Mapping[str, Any], *, host: str, job: str, log_mode: str = "append",
                  fallback_env: Mapping[str, str] | None = None, local_user: str | None = None,
                  now: float | None = None, kill_tree: JobTree | None = None,
                  flight_recorder: bool = False) -> RestartPlan:
    """Plan the restart from the `capture` op's result (pure; raises ValueError on unusable facts).
    With `flight_recorder`, torch's flight recorder and its dump pipe are turned on (where the job has not
    set them), so the next hang's dump holds every rank's collectives."""
    argv = list(captured.get("argv") or [])
    if not argv:
        raise ValueError(f"cannot restart {job}: its command line is unreadable (a kernel thread, or gone)")
    cwd = captured.get("cwd")
    if not cwd:
        raise ValueError(f"cannot restart {job}: its working directory is unreadable "
                         f"({captured.get('cwd_error', 'unknown')})")
    if log_mode not in ("append", "rotate"):
        raise ValueError(f"log mode must be append or rotate, got {log_mode!r}")
    warnings: list[str] = []
    new_argv = unbuffered_argv(argv)
    if not is_python_interpreter(argv[0]):
        warnings.append(f"{os.path.basename(argv[0])} is not a Python interpreter: -u not added, "
                        "PYTHONUNBUFFERED=1 alone makes its Python children unbuffered")
    if captured.get("environ_readable") and captured.get("environ") is not None:
        env = dict(captured["environ"])
        warnings.append("environ is the exec-time environment: variables the job set later are not carried over")
    else:
        env = dict(fallback_env or {})
        warnings.append("environ unreadable: restarted with gpuwatch's view of the environment"
                        + (f" ({captured.get('environ_note')})" if captured.get("environ_note") else ""))
    env["PYTHONUNBUFFERED"] = "1"
    if flight_recorder:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
        env.update({k: v for k, v in recorder_env(f"/tmp/gpuwatch_fr_{captured.get('pid')}_{stamp}_").items()
                    if k not in env})
    out, err = captured.get("stdout") or {}, captured.get("stderr") or {}
    stdout, stderr = _outputs(out, err, warnings)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    who = local_user or current_user()
    marker = f"=== gpuwatch: restarted with -u at {when} by {who} (was pid {captured.get('pid')}) ==="
    return RestartPlan(host=host, job=job, old_pid=int(captured["pid"]), old_start_ticks=int(captured["start_ticks"]),
                       argv=tuple(new_argv), cwd=cwd, env=env, stdout=stdout, stderr=stderr, log_mode=log_mode,
                       marker=marker, uid=captured.get("uid"), user=captured.get("user"),
                       warnings=tuple(warnings), kill_tree=kill_tree,
                       stdout_id=_file_id(out) if stdout else None,
                       stderr_id=_file_id(err) if stderr not in ("stdout", stdout) else None)


def _file_id(target: Mapping[str, Any]) -> tuple[int, int] | None:
    ident = target.get("file_id")
    if isinstance(ident, (list, tuple)) and len(ident) == 2 and all(isinstance(v, int) for v in ident):
        return int(ident[0]), int(ident[1])
    return None


def _outputs(out: Mapping[str, Any], err: Mapping[str, Any], warnings: list[str]) -> tuple[str | None, str]:
    stdout = out.get("path") if out.get("kind") == "file" else None
    if stdout is None:
        warnings.append(f"stdout was {out.get('kind', 'unknown')} ({out.get('path')}), not a file: "
                        "output goes to a new log in the host's run state dir")
    if err.get("kind") == "file" and err.get("path") != stdout:
        return stdout, err["path"]
    if err.get("kind") not in ("file", None) and err.get("path") != out.get("path"):
        warnings.append(f"stderr was {err.get('kind')} ({err.get('path')}): it now goes with stdout")
    return stdout, "stdout"


@dataclass(frozen=True)
class RestartReport(ActionResult):
    host: str
    job: str
    command: str
    kill: KillReport | None
    gpu_released: bool | None  # None: not checked
    gpu_wait_s: float | None
    spawned: bool
    pid: int | None = None
    start_ticks: int | None = None
    wrapper_pid: int | None = None
    status_file: str | None = None
    stdout: str | None = None
    rotated_to: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: RequestFailure | None = None
    action: str = field(default="restart")

    def summary(self) -> str:
        if self.spawned:
            return f"restarted {self.job} on {self.host} as pid {self.pid} (unbuffered)"
        reason = self.failure.message if self.failure else "not started"
        return f"restart of {self.job} on {self.host} not started: {reason}"


async def wait_gpu_released(still_held: GpuStillHeld, limit_s: float, poll_s: float = 0.5) -> tuple[bool, float]:
    """Poll `still_held()` until it says False or `limit_s` passes: (released, seconds waited)."""
    t0 = time.monotonic()
    while True:
        if not await still_held():
            return True, time.monotonic() - t0
        if time.monotonic() - t0 >= limit_s:
            return False, time.monotonic() - t0
        await asyncio.sleep(poll_s)


async def _note_marker(request: Request, plan: RestartPlan, timeout: float) -> bool:
    """The marker written into the job's logs (stdout's, and stderr's where it has its own) before the old run
    is signalled: a gpuwatch that only watches reads it no later than it sees that run end, so it never judges
    the end a clean exit first (between the kill and the spawn, which waits for the GPU memory, lie seconds).
    False where a log could not take it: the spawn writes it then, as before."""
    paths = [(plan.stdout, plan.stdout_id)]
    if plan.stderr not in ("stdout", plan.stdout):
        paths.append((plan.stderr, plan.stderr_id))
    try:
        for path, ident in paths:
            args = {"path": path, "line": plan.marker, "uid": plan.uid}
            if ident is not None:
                args["file_id"] = list(ident)
            await request("log_note", args, timeout)
    except Exception as exc:
        failure = failure_of(exc)
        if failure is None:
            raise
        if failure.code == LOG_CHANGED:
            raise LogSwapped(failure) from None
        return False
    return True


LOG_CHANGED = "log-changed"  # the probe's code: the log path is no longer the file discovery saw


class LogSwapped(Exception):
    """The job's log was replaced (a symlink, another file) since discovery: the restart stops before the kill."""

    def __init__(self, failure: RequestFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


async def restart_job(request: Request, plan: RestartPlan, wait_gpu_free: GpuStillHeld | None = None,
                      timeout: float = 30.0, settings: ActionSettings = ActionSettings(), *,
                      status_dir: str | None = None, note: Mapping[str, str] | None = None) -> RestartReport:
    """Kill the old job (when the plan names its tree), wait for its GPU memory, then start the new one.

    The new job is not started when any old process survived or could not be signalled: two copies of a
    training job on the same GPUs is worse than none.
    """
    warnings = list(plan.warnings)
    base = dict(host=plan.host, job=plan.job, command=plan.command())
    kill = None
    noted = False
    if plan.kill_tree is not None:
        if plan.marker and plan.stdout:
            try:
                noted = await _note_marker(request, plan, timeout)
            except LogSwapped as swapped:  # nothing was signalled: the old run goes on, untouched
                return RestartReport(**base, kill=None, gpu_released=None, gpu_wait_s=None, spawned=False,
                                     warnings=tuple(warnings), failure=swapped.failure)
        kill = await kill_job(request, plan.kill_tree, settings.kill_grace_s, kill_wait_s=settings.kill_wait_s)
        if not kill.ok:
            failure = kill.failure or RequestFailure(
                "old-job-alive", "the old job is not fully gone (" + kill.summary() + "): not starting a second copy")
            return RestartReport(**base, kill=kill, gpu_released=None, gpu_wait_s=None, spawned=False,
                                 warnings=tuple(warnings), failure=failure)
    released, waited = None, None
    if wait_gpu_free is not None:
        released, waited = await wait_gpu_released(wait_gpu_free, settings.restart_gpu_wait_s)
        if not released:
            warnings.append(f"the old job's GPU memory was still held after {waited:.0f} s: started anyway")
    try:
        reply = await request("spawn", plan.spawn_args(status_dir, marker_noted=noted, note=note), timeout)
    except Exception as exc:
        failure = failure_of(exc)
        if failure is None:
            raise
        return RestartReport(**base, kill=kill, gpu_released=released, gpu_wait_s=waited, spawned=False,
                             warnings=tuple(warnings), failure=failure)
    return RestartReport(**base, kill=kill, gpu_released=released, gpu_wait_s=waited, spawned=True,
                         pid=reply.get("pid"), start_ticks=reply.get("start_ticks"),
                         wrapper_pid=reply.get("wrapper_pid"), status_file=reply.get("status_file"),
                         stdout=reply.get("stdout"), rotated_to=tuple(reply.get("rotated_to") or ()),
                         warnings=tuple(warnings))


def recorder_env(prefix: str) -> dict[str, str]:
    """The variables that turn torch's flight recorder on, with a pipe to dump it on demand (rank r's pipe
    is PREFIXpipe_<r>.pipe, its dump PREFIXdump_<r>)."""
    return {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": prefix + "pipe_",
            "TORCH_FR_DUMP_TEMP_FILE": prefix + "dump_"}
