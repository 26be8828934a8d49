# gpuwatch probe: what every request op shares. Standard library only, Python 3.6+, Linux.
#
# Shipped inside the probe bundle as the module "ops_base" (never installed on the host).
#
# The request path, end to end:
#   gpuwatch -> probe   {"op": NAME, "id": N, "args": {...}}
#   probe -> gpuwatch   {"type": "reply", "id": N, "ok": true,  "result": {...}}
#                       {"type": "reply", "id": N, "ok": false, "error": {"code": CODE, "message": WORDS}}
# An op module (probe/ops_*.py) defines OPS = {NAME: handler}; handler(args) returns the JSON-able
# result or raises OpError. The dispatcher runs each request on its own thread, so a slow op (a
# kill's grace period, a py-spy dump) never holds up sampling.
#
# A process is always named by (pid, start_ticks): the start time in clock ticks since boot, exact
# and never reused together with the pid. An op re-checks it on the host before touching anything.
import os


class OpError(Exception):
    """A refused or failed request: a code a program can test, and words for a person."""

    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


def read_stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (state first), or None if gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
    except (OSError, IOError):
        return None
    return raw[raw.rfind(b")") + 2:].split()


def start_ticks(pid):
    """Start time of `pid` in clock ticks since boot; None when there is no such process."""
    fields = read_stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])


def check_ref(pid, ticks):
    """Raise OpError unless `pid` is still the process that started at `ticks` (and not a zombie)."""
    pid, ticks = int(pid), int(ticks)
    fields = read_stat_fields(pid)
    if fields is None or len(fields) < 20:
        raise OpError("gone", "process %d has exited" % pid)
    if int(fields[19]) != ticks:
        raise OpError("reused", "pid %d now belongs to another process (start time %s, expected %d): refused"
                      % (pid, fields[19].decode(), ticks))
    if fields[0] == b"Z":
        raise OpError("gone", "process %d has exited (zombie, not yet reaped)" % pid)
    return fields


O_APPEND = 0o2000


def fd_target(pid, fd):
    """Where fd `fd` of `pid` goes: path, kind (file, pipe, socket, null, tty, deleted, other),
    whether it was opened O_APPEND, and a file's size. Raises OSError when the link cannot be read
    (the process is gone, or it is another user's without ptrace-read permission).

    Shared by the sampler (a job's stdout/stderr facts) and the capture op (what a restart needs)."""
    base = "/proc/%d/fd/%d" % (pid, fd)
    path = os.readlink(base)
    append = False
    try:
        info = os.open("/proc/%d/fdinfo/%d" % (pid, fd), os.O_RDONLY)
        try:
            for line in os.read(info, 4096).split(b"\n"):
                if line.startswith(b"flags:"):
                    append = bool(int(line.split()[1], 8) & O_APPEND)
        finally:
            os.close(info)
    except (OSError, ValueError, IndexError):
        pass
    size = None
    if path.startswith("pipe:"):
        kind = "pipe"
    elif path.startswith("socket:"):
        kind = "socket"
    elif path == "/dev/null":
        kind = "null"
    elif path.startswith("/dev/pts/") or path.startswith("/dev/tty") or path == "/dev/console":
        kind = "tty"
    elif path.endswith(" (deleted)"):
        kind = "deleted"
    elif path.startswith("/"):
        kind = "file"
        try:
            st = os.stat(base)
            size = st.st_size
            # The file itself (not the name): a restart writes to the path only while it still is this file.
            ident = [st.st_dev, st.st_ino]
        except OSError:
            ident = None
        return {"path": path, "kind": kind, "append": append, "size": size, "file_id": ident}
    else:
        kind = "other"
    return {"path": path, "kind": kind, "append": append, "size": size}


def int_arg(args, name, minimum=None):
    """args[name] as an int, or OpError("bad-args") saying what was wrong."""
    value = args.get(name) if isinstance(args, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise OpError("bad-args", "%r must be an integer, got %s" % (name, json_type(value)))
    if minimum is not None and value < minimum:
        raise OpError("bad-args", "%r must be at least %d, got %d" % (name, minimum, value))
    return value


def json_type(value):
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
