# gpuwatch probe ops: capture what a restart needs, start a job detached under a tiny wrapper, and
# read back how a started job ended. Standard library only, Python 3.6+, Linux.
# Shipped to the host and imported as "ops_spawn".
#
# The wrapper is the constant program WRAPPER_CODE, run as `python -c WRAPPER_CODE`. Everything it
# needs (argv, cwd, environment, where to write its record) arrives as JSON on its stdin and the
# numbers of inherited fds: no request data is ever pasted into code or a shell command line.
# It starts the job, writes a start record, waits, and writes the real exit status atomically
# (exit_code, or exit_signal when the job was killed) to a status file in a per-user state dir.
import errno
import json
import os
import pwd
import select
import stat
import subprocess
import sys
import time

from action_notes import make_record, write_record
from ops_base import OpError, check_ref, fd_target, start_ticks

WRAPPER_NAME = "gpuwatch-run"  # the wrapper's comm: discovery stops its walk up the tree there
_REPORT_TIMEOUT_S = 20.0

WRAPPER_CODE = r'''
import json, os, signal, subprocess, sys, time

def ticks(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
        return int(raw[raw.rfind(b")") + 2:].split()[19])
    except Exception:
        return None

def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

def write_record(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)

def set_comm(name):
    try:
        import ctypes
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name.encode()), 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass

def main():
    report_fd, out_fd, err_fd = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    spec = json.loads(sys.stdin.read())
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    set_comm(spec["wrapper_name"])
    child = []
    pending = []

    def forward(signum, frame):
        # The job decides what a signal means; the wrapper stays to record how it ended.
        if child:
            try:
                child[0].send_signal(signum)
            except OSError:
                pass
        else:
            pending.append(signum)

    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), forward)
    record = {"argv": spec["argv"], "cwd": spec["cwd"], "wrapper_pid": os.getpid(),
              "wrapper_start_ticks": ticks(os.getpid()), "started_at": now()}
    try:
        proc = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env=spec["env"], stdin=devnull,
                                stdout=out_fd, stderr=err_fd, close_fds=True)
    except OSError as exc:
        record.update({"error": "could not start %s: %s" % (spec["argv"][0], exc.strerror or exc),
                       "exit_code": None, "exit_signal": None, "ended_at": now()})
        write_record(spec["status_file"], record)
        os.write(report_fd, (json.dumps({"error": record["error"]}) + "\n").encode())
        return 127
    child.append(proc)
    for fd in (out_fd, err_fd, 1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    record.update({"pid": proc.pid, "start_ticks": ticks(proc.pid), "running": True})
    write_record(spec["status_file"], record)
    os.write(report_fd, (json.dumps(record) + "\n").encode())
    os.close(report_fd)
    for signum in pending:
        proc.send_signal(signum)
    code = proc.wait()
    record.pop("running", None)
    record.update({"exit_code": code if code >= 0 else None,
                   "exit_signal": -code if code < 0 else None,
                   "exit_signal_name": signal.Signals(-code).name if code < 0 else None,
                   "ended_at": now()})
    write_record(spec["status_file"], record)
    return 0

sys.exit(main())
'''


# --- capture ---------------------------------------------------------------------------------

def _fd_target(pid, fd):
    """fd_target, or kind "unknown" with the reason when the link cannot be read."""
    try:
        return fd_target(pid, fd)
    except OSError as exc:
        return {"path": None, "kind": "unknown", "append": False, "error": os.strerror(exc.errno)}


def _uid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


def _user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, TypeError):
        return None


def _split_nul(raw):
    return [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]]


def op_capture(args):
    """The facts a restart needs, read from /proc and checked to belong to (pid, start_ticks)."""
    pid, ticks = _ref(args)
    check_ref(pid, ticks)
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = _split_nul(f.read())
        uid = _uid_of(pid)
    except (OSError, IOError):
        raise OpError("gone", "process %d has exited" % pid)
    out = {"pid": pid, "start_ticks": ticks, "argv": argv, "uid": uid, "user": _user_name(uid)}
    for key, link in (("cwd", "cwd"), ("exe", "exe")):
        try:
            out[key] = os.readlink("/proc/%d/%s" % (pid, link))
        except OSError as exc:
            out[key] = None
            out[key + "_error"] = os.strerror(exc.errno)
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            pairs = _split_nul(f.read())
        environ = {}
        for item in pairs:
            k, sep, v = item.partition("=")
            if sep:
                environ[k] = v
        out["environ"] = environ
        out["environ_readable"] = True
        out["environ_note"] = ("the environment as it was at exec time: variables the program set or "
                               "changed later are not visible")
    except (OSError, IOError) as exc:
        out["environ"] = None
        out["environ_readable"] = False
        out["environ_note"] = ("environ unreadable (%s): reading another user's environ needs "
                               "ptrace-read permission" % os.strerror(exc.errno or 0))
    out["stdout"] = _fd_target(pid, 1)
    out["stderr"] = _fd_target(pid, 2)
    # All read: if the pid was reused meanwhile, the facts may be a newcomer's. Check again.
    check_ref(pid, ticks)
    return out


def _ref(args):
    try:
        return int(args["pid"]), int(args["start_ticks"])
    except (TypeError, KeyError, ValueError):
        raise OpError("bad-args", "pid and start_ticks must be integers")


# --- spawn -----------------------------------------------------------------------------------

def default_status_dir():
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpuwatch", "runs")


def _one_line(text):
    return " ".join(str(text).split())


def _rotate(path):
    """NAME -> NAME.1, shifting NAME.1 -> NAME.2 and so on first. Nothing is deleted."""
    n = 1
    while os.path.lexists("%s.%d" % (path, n)):
        n += 1
    for i in range(n - 1, 0, -1):
        os.rename("%s.%d" % (path, i), "%s.%d" % (path, i + 1))
    os.rename(path, path + ".1")
    return path + ".1"


def _file_id(value):
    """[dev, ino] from a request, or None; anything else is a bad request."""
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value):
        return (value[0], value[1])
    raise OpError("bad-args", "a file id is [dev, inode], got %r" % (value,))


def _refuse_swapped(path, why):
    raise OpError("log-changed", "refusing to write to the job's log: %s, not the file the job wrote when it "
                  "was discovered; check it (or restart with a new log): %s" % (why, path))


def _open_same_file(path, expect, flags):
    """Open `path` without following a symlink at its end and check it is the file `expect` (dev, ino) names."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse_swapped(path, "its path is now a symbolic link")
        if exc.errno == errno.ENOENT:
            _refuse_swapped(path, "its path is gone")
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != expect:
        os.close(fd)
        _refuse_swapped(path, "another file is at its path now (inode %d, was %d)" % (st.st_ino, expect[1]))
    return fd


def _open_log(path, mode, marker, expect=None):
    """Open `path` for appending (creating it), never truncating; rotate first when asked. With `expect`
    (the (dev, ino) seen at discovery) the path must still be that file, reached without a symlink at its
    end; the file that replaces a rotated one is created fresh (O_EXCL), so nothing planted is followed."""
    rotated = None
    create = os.O_RDWR | os.O_CREAT | os.O_APPEND  # read too: the marker checks the last byte through this fd
    if expect is not None:
        if mode == "rotate":
            os.close(_open_same_file(path, expect, os.O_RDONLY))
            rotated = _rotate(path)
            create = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW
            try:
                fd = os.open(path, create, 0o644)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ELOOP):
                    _refuse_swapped(path, "something was put at its path while it was rotated")
                raise
        else:
            fd = _open_same_file(path, expect, os.O_RDWR | os.O_APPEND)
    else:
        if mode == "rotate" and os.path.exists(path) and os.path.getsize(path) > 0:
            rotated = _rotate(path)
        fd = os.open(path, create, 0o644)
    if marker:
        line = _one_line(marker).encode("utf-8", "replace")
        try:
            if os.fstat(fd).st_size > 0:
                # The old job's last write may not have ended its line (read through our fd: the name may move).
                if os.pread(fd, 1, os.fstat(fd).st_size - 1) != b"\n":
                    line = b"\n" + line
            os.write(fd, line + b"\n")
        except OSError:
            os.close(fd)
            raise
    return fd, rotated


def _check_spawn_args(args):
    argv = args.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise OpError("bad-args", "argv must be a non-empty list of strings")
    cwd = args.get("cwd")
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        raise OpError("bad-args", "cwd %r is not a directory on this host" % (cwd,))
    env = args.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                                            for k, v in env.items()):
        raise OpError("bad-args", "env must map variable names to strings")
    mode = args.get("log_mode", "append")
    if mode not in ("append", "rotate"):
        raise OpError("bad-args", "log_mode must be append or rotate, got %r" % (mode,))
    for key in ("stdout", "stderr"):
        value = args.get(key)
        if value is not None and not (isinstance(value, str) and (value.startswith("/") or value == "stdout")):
            raise OpError("bad-args", "%s must be an absolute path (or \"stdout\" for stderr)" % key)
    if args.get("stdout") == "stdout":
        raise OpError("bad-args", "stdout must be a path")
    _check_uid(args)
    return argv, cwd, env, mode


def _check_uid(args):
    uid = args.get("uid")
    if uid is not None and int(uid) != os.geteuid():
        raise OpError("wrong-user", "the job ran as %s but this probe runs as %s: restart it as its own user "
                      "(connect as %s)" % (_user_name(int(uid)) or uid, _user_name(os.geteuid()),
                                           _user_name(int(uid)) or "uid %s" % uid))


def op_log_note(args):
    """Append one line to a job's log, on a line of its own: a restart's marker, written before the old run
    is signalled, so that whoever follows the log reads it no later than they see that run end."""
    path, line = args.get("path"), args.get("line")
    if not (isinstance(path, str) and path.startswith("/")):
        raise OpError("bad-args", "path must be an absolute path")
    if not isinstance(line, str) or not line.strip():
        raise OpError("bad-args", "line must be a non-empty string")
    _check_uid(args)
    try:
        fd, _ = _open_log(path, "append", line, _file_id(args.get("file_id")))
    except (OSError, IOError) as exc:
        raise OpError("log", "cannot write to the log %s: %s" % (path, os.strerror(exc.errno or 0)))
    os.close(fd)
    return {"path": path}


def op_spawn(args):
    """Start argv detached (own session, stdin /dev/null, output to the log) under the wrapper."""
    argv, cwd, env, mode = _check_spawn_args(args)
    status_dir = args.get("status_dir") or default_status_dir()
    try:
        os.makedirs(status_dir, 0o700)
    except OSError:
        if not os.path.isdir(status_dir):
            raise OpError("state-dir", "cannot create the state dir %s" % status_dir)
    run_id = "%s-%d-%s" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid(),
                           "".join("%02x" % b for b in bytearray(os.urandom(4))))
    status_file = os.path.join(status_dir, run_id + ".json")
    stdout = args.get("stdout") or os.path.join(status_dir, run_id + ".log")
    stderr = args.get("stderr") or "stdout"
    marker = args.get("marker") or ""
    fds = []
    rotated = []
    try:
        try:
            out_fd, r = _open_log(stdout, mode, marker, _file_id(args.get("stdout_id")))
            fds.append(out_fd)
            rotated.append(r)
            if stderr in ("stdout", stdout):
                err_fd = out_fd
            else:
                err_fd, r = _open_log(stderr, mode, marker, _file_id(args.get("stderr_id")))
                fds.append(err_fd)
                rotated.append(r)
        except (OSError, IOError) as exc:
            raise OpError("log", "cannot open the log %s: %s" % (getattr(exc, "filename", None) or stdout,
                                                                 os.strerror(exc.errno or 0)))
        record = _start_wrapper({"argv": argv, "cwd": cwd, "env": env, "status_file": status_file,
                                 "wrapper_name": WRAPPER_NAME}, out_fd, err_fd)
    finally:
        for fd in fds:
            os.close(fd)
    record.update({"status_file": status_file, "stdout": stdout,
                   "stderr": stdout if stderr == "stdout" else stderr,
                   "rotated_to": [r for r in rotated if r]})
    note = args.get("note")
    if isinstance(note, dict) and record.get("pid") and record.get("start_ticks") is not None:
        # The run is a restart's: every gpuwatch watching it reads its exit status from the wrapper's record.
        try:
            write_record(make_record({"action": "run_started", "user": note.get("user"), "id": note.get("id"),
                                      "targets": [{"pid": record["pid"], "start_ticks": record["start_ticks"]}],
                                      "status_file": status_file}, time.time()))
        except OpError as exc:
            record["note_error"] = exc.message
    return record


def _start_wrapper(spec, out_fd, err_fd):
    read_fd, report_fd = os.pipe()
    try:
        wrapper = subprocess.Popen(
            [sys.executable or "python3", "-c", WRAPPER_CODE, str(report_fd), str(out_fd), str(err_fd)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(report_fd, out_fd, err_fd), cwd="/", start_new_session=True)
    except OSError as exc:
        os.close(read_fd)
        os.close(report_fd)
        raise OpError("spawn", "cannot start the wrapper: %s" % os.strerror(exc.errno or 0))
    os.close(report_fd)
    try:
        wrapper.stdin.write(json.dumps(spec).encode())
        wrapper.stdin.close()
        line = _read_line(read_fd, _REPORT_TIMEOUT_S)
    finally:
        os.close(read_fd)
    if not line:
        err = _drain(wrapper.stderr)
        raise OpError("spawn", "the wrapper ended without starting the job%s" % (": " + err if err else ""))
    # Reap the wrapper whenever it ends, so it never lingers as a zombie of the probe.
    import threading
    threading.Thread(target=_reap, args=(wrapper,), daemon=True).start()
    reply = json.loads(line)
    if "error" in reply:
        raise OpError("spawn", reply["error"])
    return reply


def _read_line(fd, timeout):
    deadline = time.time() + timeout
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.time()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace")


def _drain(stream):
    try:
        return _one_line(stream.read(4000).decode("utf-8", "replace"))[:500]
    except (OSError, ValueError):
        return ""


def _reap(proc):
    proc.stderr.close()
    proc.wait()


# --- run_status ------------------------------------------------------------------------------

def op_run_status(args):
    """The wrapper's record: exit_code/exit_signal once ended, {"running": true} while it runs."""
    path = args.get("status_file")
    if not isinstance(path, str) or not path.startswith("/") or not path.endswith(".json"):
        raise OpError("bad-args", "status_file must be the absolute .json path spawn returned")
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, IOError) as exc:
        raise OpError("no-record", "no run record at %s: %s" % (path, os.strerror(exc.errno or 0)))
    except ValueError:
        raise OpError("no-record", "the run record at %s is not JSON" % path)
    if "ended_at" in record:
        record["running"] = False
        return record
    wpid, wticks = record.get("wrapper_pid"), record.get("wrapper_start_ticks")
    if wpid and wticks is not None and start_ticks(int(wpid)) == int(wticks):
        record["running"] = True
    else:
        record.update({"running": False, "lost": True,
                       "message": "the wrapper is gone without recording an exit status (killed, or the host "
                                  "rebooted)"})
    return record


OPS = {"capture": op_capture, "spawn": op_spawn, "run_status": op_run_status, "log_note": op_log_note}
