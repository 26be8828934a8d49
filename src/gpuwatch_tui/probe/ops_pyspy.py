# gpuwatch probe ops: py-spy on the host. Standard library only, Python 3.6+, Linux.
#
# pyspy_locate  is py-spy usable here (PATH, or our per-user cache), and may we ptrace?
# upload        put a binary into the per-user cache, in base64 chunks, checked by sha256
# pyspy_dump    `py-spy dump --json` of (pid, start_ticks) targets, never leaving one stopped
#
# Shipped with the probe and imported by plain name; see ops_base for the request contract.
import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from ops_base import OpError, check_ref, read_stat_fields

CACHE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_CHUNK_BYTES = 4 * 1024 * 1024
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
CAP_SYS_PTRACE = 19
STDERR_KEEP = 4000
SOURCE_LINE_KEEP = 200
MAX_TARGETS = 64

_upload_lock = threading.Lock()  # requests run on their own threads; one writer at a time


# -- where things live -------------------------------------------------------------
def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuwatch", "bin")


def checked_name(name):
    """A plain file name in the cache dir: no separators, no dot-names, nothing to escape with."""
    if not isinstance(name, str) or not CACHE_NAME_RE.match(name) or name in (".", ".."):
        raise OpError("bad-name", "refused file name %r: use letters, digits, '.', '_' or '-' only" % (name,))
    return name


def checked_sha(value):
    if not isinstance(value, str) or not re.match(r"^[0-9a-f]{64}$", value):
        raise OpError("bad-args", "sha256 must be 64 lowercase hex digits, got %r" % (value,))
    return value


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_executable_file(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


# -- permission facts ------------------------------------------------------------------
def ptrace_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, IOError, ValueError):
        return None  # no Yama LSM: only the classic same-uid rule applies


def cap_sys_ptrace():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, IOError, ValueError, IndexError):
        pass
    return False


def in_container():
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        with open("/proc/1/environ", "rb") as f:
            if b"container=" in f.read():
                return True
    except (OSError, IOError):
        pass
    return False


def sudo_works():
    if shutil.which("sudo") is None:
        return False
    try:
        return subprocess.call(["sudo", "-n", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=5) == 0
    except (OSError, subprocess.SubprocessError):
        return False


# -- pyspy_locate ------------------------------------------------------------------------
def op_pyspy_locate(args):
    """args: {"sha256": hex of the binary we could upload, "name": its cache name, "check_sudo": bool}"""
    sha = args.get("sha256")
    name = args.get("name")
    found = shutil.which("py-spy")
    cached = None
    cached_state = "absent"
    if name:
        path = os.path.join(cache_dir(), checked_name(name))
        if is_executable_file(path):
            if sha and file_sha256(path) == checked_sha(sha):
                cached, cached_state = path, "ok"
            else:
                cached_state = "checksum-mismatch"
    uid = os.geteuid()
    return {
        "path": found,
        "cached": cached,
        "cached_state": cached_state,
        "cache_dir": cache_dir(),
        "pyspy": found or cached,
        "machine": os.uname()[4],
        "ptrace_scope": ptrace_scope(),
        "root": uid == 0,
        "uid": uid,
        "cap_sys_ptrace": cap_sys_ptrace(),
        "container": in_container(),
        "sudo": sudo_works() if args.get("check_sudo") else None,
    }


# -- upload --------------------------------------------------------------------------------
def op_upload(args):
    """Chunked write into the cache dir.

    {"name", "offset", "data": base64}          append one chunk (offset 0 starts afresh)
    {"name", "finish": true, "sha256", "size"}  verify and move into place, mode 0755
    """
    name = checked_name(args.get("name"))
    directory = cache_dir()
    final = os.path.join(directory, name)
    part = os.path.join(directory, "." + name + ".part")
    with _upload_lock:
        if args.get("finish"):
            return _finish_upload(part, final, checked_sha(args.get("sha256")), int(args.get("size", -1)))
        try:
            data = base64.b64decode(args.get("data", ""), validate=True)
        except (ValueError, TypeError) as exc:
            raise OpError("bad-args", "chunk is not valid base64: %s" % exc)
        if len(data) > MAX_CHUNK_BYTES:
            raise OpError("bad-args", "chunk of %d bytes is over the %d limit" % (len(data), MAX_CHUNK_BYTES))
        offset = int(args.get("offset", 0))
        if offset == 0:
            _make_private_dir(directory)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        else:
            flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
            if not os.path.isfile(part):
                raise OpError("bad-offset", "chunk at offset %d but nothing is uploaded under that name" % offset)
        try:
            fd = os.open(part, flags, 0o600)
        except (OSError, IOError) as exc:
            raise OpError("io", "cannot write %s: %s" % (part, exc.strerror or exc))
        try:
            size = os.fstat(fd).st_size
            if size != offset:
                raise OpError("bad-offset", "chunk at offset %d but %d bytes are written so far" % (offset, size))
            if offset + len(data) > MAX_UPLOAD_BYTES:
                raise OpError("bad-args", "upload over %d bytes refused" % MAX_UPLOAD_BYTES)
            os.lseek(fd, offset, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return {"name": name, "written": offset + len(data)}


def _make_private_dir(directory):
    try:
        os.makedirs(directory, 0o700)
    except OSError:
        if not os.path.isdir(directory):
            raise OpError("io", "cannot create the cache directory %s" % directory)
    if os.path.islink(directory):
        raise OpError("io", "refused: the cache directory %s is a symbolic link" % directory)


def _finish_upload(part, final, sha, size):
    if not os.path.isfile(part):
        raise OpError("bad-offset", "nothing uploaded under that name yet")
    got_size = os.path.getsize(part)
    got_sha = file_sha256(part)
    if got_sha != sha or (size >= 0 and got_size != size):
        os.unlink(part)
        raise OpError("checksum", "upload refused: sha256 %s (%d bytes) does not match the expected %s (%d bytes)"
                      % (got_sha, got_size, sha, size))
    os.chmod(part, 0o755)
    os.rename(part, final)
    return {"path": final, "sha256": got_sha, "size": got_size}


# -- pyspy_dump -----------------------------------------------------------------------------
def proc_state(pid):
    fields = read_stat_fields(pid)
    return fields[0].decode() if fields else None


def proc_uid(pid):
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return None


def read_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read(8192).split(b"\0") if a]
    except (OSError, IOError):
        return []


def read_rank(pid):
    """RANK / LOCAL_RANK from the exec-time environment (readable with the same rights as a dump)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except (OSError, IOError):
        return None, None
    def num(key):
        try:
            return int(env[key])
        except (KeyError, ValueError):
            return None
    return num(b"RANK"), num(b"LOCAL_RANK")


def source_line(filename, line):
    """The text of a frame's line, so an idle `<module>` can be told apart (sleep, acquire, wait)."""
    if not filename or not isinstance(line, int) or line < 1 or not filename.endswith(".py"):
        return None
    try:
        with open(filename, "rb") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    return text.decode("utf-8", "replace").strip()[:SOURCE_LINE_KEEP]
                if number > line:
                    break
    except (OSError, IOError):
        pass
    return None


def explain_failure(pid, stderr, timed_out, timeout_s, sudo, state_before):
    """py-spy's own words turned into (code, what to do)."""
    low = stderr.lower()
    scope = ptrace_scope()
    if state_before == "T":
        # py-spy cannot read a stopped interpreter ("failed to find python version")
        return "stopped", ("process %d is stopped (state T: SIGSTOP or a debugger), so py-spy cannot read "
                           "it; it was left stopped (send SIGCONT to resume and dump it)" % pid)
    if timed_out:
        return "timeout", ("py-spy did not finish within %gs (the process may be stopped, or its memory "
                           "very large); it was killed" % timeout_s)
    if proc_state(pid) is None or "no such process" in low or (
            "no such file or directory" in low and "executable" in low):
        return "gone", "process %d has exited" % pid
    if "permission denied" in low or "operation not permitted" in low or (
            sudo and ("password is required" in low or "a terminal is required" in low)):
        if sudo and ("password is required" in low or "a terminal is required" in low):
            return "permission", "sudo -n refused (it wants a password): allow py-spy in sudoers without one"
        facts = ["py-spy says: %s" % first_error_line(stderr)]
        target_uid = proc_uid(pid)
        me = os.geteuid()
        if target_uid is not None and target_uid != me and me != 0:
            facts.append("process %d belongs to uid %d and we run as uid %d: connect as the job's user, "
                         "or enable sudo for dumps in the config" % (pid, target_uid, me))
        if scope is None:
            facts.append("kernel.yama.ptrace_scope is not present (no Yama), so only the same user or root "
                         "may trace")
        elif scope == 1:
            facts.append("kernel.yama.ptrace_scope is 1 (only a parent may trace): set it to 0 "
                         "(sysctl kernel.yama.ptrace_scope=0) or dump as root")
        elif scope == 2:
            facts.append("kernel.yama.ptrace_scope is 2 (admin only): dump as root or with CAP_SYS_PTRACE")
        elif scope == 3:
            facts.append("kernel.yama.ptrace_scope is 3 (ptrace disabled until reboot): no dump is possible")
        else:
            facts.append("kernel.yama.ptrace_scope is %d" % scope)
        if me == 0 and not cap_sys_ptrace():
            where = "this container" if in_container() else "this root shell"
            facts.append("%s lacks CAP_SYS_PTRACE: start the container with --cap-add SYS_PTRACE" % where)
        return "permission", "permission denied: " + "; ".join(facts)
    if "python version" in low or "python interpreter" in low or "not a python" in low or \
            "failed to find python" in low:
        return "not-python", "process %d does not look like a Python process (py-spy found no interpreter)" % pid
    return "failed", "py-spy failed: " + (first_error_line(stderr) or "no message")


def first_error_line(stderr):
    for line in stderr.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def trimmed_stderr(stderr):
    # anyhow appends a Rust backtrace when RUST_BACKTRACE is set; it helps nobody here
    return stderr.split("Stack backtrace:")[0].strip()[:STDERR_KEEP]


def run_pyspy(argv, timeout_s):
    """(returncode, stdout, stderr, timed_out); py-spy (and a sudo in front of it) killed on timeout."""
    env = dict(os.environ)
    env["RUST_BACKTRACE"] = "0"
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        # SIGTERM first: sudo relays it to py-spy, which detaches cleanly; then SIGKILL the group
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass
            try:
                out, err = proc.communicate(timeout=2)
                break
            except subprocess.TimeoutExpired:
                out, err = b"", b""
        else:
            proc.wait()
        return proc.returncode, out or b"", err or b"", True


def resume_if_left_stopped(pid, before):
    """SIGCONT the target if py-spy left it stopped; a process that was stopped before stays stopped."""
    after = proc_state(pid)
    for _ in range(20):  # a ptrace detach settles within a few ms
        if after not in ("t",):
            break
        time.sleep(0.01)
        after = proc_state(pid)
    if after == "T" and before != "T":
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError as exc:
            return after, False, "left stopped (state T) by py-spy and SIGCONT failed: %s" % exc
        time.sleep(0.05)
        return proc_state(pid), True, "was left stopped (state T) by py-spy: sent SIGCONT"
    if before == "T":
        return after, False, "was already stopped (state T) before the dump: left as it was"
    return after, False, None


def dump_one(target, pyspy, native, timeout_s, sudo, with_locals):
    pid = int(target["pid"])
    ticks = int(target["start_ticks"])
    result = {"pid": pid, "start_ticks": ticks}
    try:
        fields = check_ref(pid, ticks)
    except OpError as exc:
        result.update(ok=False, code=exc.code, message=exc.message)
        return result
    before = fields[0].decode()
    rank, local_rank = read_rank(pid)
    result.update(state_before=before, rank=rank, local_rank=local_rank, cmdline=read_cmdline(pid))
    argv = [pyspy, "dump", "--json", "--pid", str(pid)]
    if native:
        argv.append("--native")
    if with_locals:
        argv.append("--locals")
    if sudo:
        argv = ["sudo", "-n"] + argv
    result["command"] = argv
    started = time.time()
    try:
        code, out, err, timed_out = run_pyspy(argv, timeout_s)
    except OSError as exc:
        result.update(ok=False, code="failed", message="cannot run %s: %s" % (argv[0], exc.strerror or exc))
        return result
    result["elapsed_s"] = round(time.time() - started, 3)
    result["state_after"], result["resumed"], note = resume_if_left_stopped(pid, before)
    if note:
        result["note"] = note
    stderr = err.decode("utf-8", "replace")
    if code != 0:  # some py-spy errors go to stdout
        stderr += "\n" + out.decode("utf-8", "replace")
    stderr = trimmed_stderr(stderr)
    if code == 0 and not timed_out:
        try:
            threads = json.loads(out.decode("utf-8", "replace"))
        except ValueError:
            result.update(ok=False, code="failed", message="py-spy printed something that is not JSON",
                          stderr=stderr)
            return result
        for thread in threads:
            # the innermost Python frame's line (native frames carry their library as "module")
            for frame in thread.get("frames") or []:
                if not frame.get("module"):
                    frame["source"] = source_line(frame.get("filename"), frame.get("line"))
                    break
        result.update(ok=True, threads=threads)
        return result
    reason, words = explain_failure(pid, stderr, timed_out, timeout_s, sudo, before)
    result.update(ok=False, code=reason, message=words, stderr=stderr)
    return result


def op_pyspy_dump(args):
    """args: {"targets": [{pid, start_ticks}], "native", "timeout_s", "sudo", "pyspy": path or null, "locals"}"""
    targets = args.get("targets")
    if not isinstance(targets, list) or not targets:
        raise OpError("bad-args", "targets must be a non-empty list of {pid, start_ticks}")
    if len(targets) > MAX_TARGETS:
        raise OpError("bad-args", "at most %d targets per dump" % MAX_TARGETS)
    pyspy = args.get("pyspy") or shutil.which("py-spy")
    if not pyspy:
        raise OpError("no-pyspy", "py-spy is not on this host's PATH and no uploaded copy was given")
    if not os.path.isabs(pyspy) or not is_executable_file(pyspy):
        raise OpError("no-pyspy", "py-spy at %r is not an executable file" % (pyspy,))
    timeout_s = max(1.0, min(float(args.get("timeout_s", 20.0)), 600.0))
    native = bool(args.get("native"))
    sudo = bool(args.get("sudo"))
    with_locals = bool(args.get("locals"))
    # every rank at once: the snapshots should show one moment, and a slow rank must not delay the rest
    results = [None] * len(targets)

    def work(i):
        try:
            results[i] = dump_one(targets[i], pyspy, native, timeout_s, sudo, with_locals)
        except (KeyError, TypeError, ValueError) as exc:
            results[i] = {"ok": False, "code": "bad-args", "message": "bad target %r: %s" % (targets[i], exc)}
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"pyspy": pyspy, "machine": os.uname()[4], "processes": results,
            "python": "%d.%d" % sys.version_info[:2]}


OPS = {
    "pyspy_locate": op_pyspy_locate,
    "upload": op_upload,
    "pyspy_dump": op_pyspy_dump,
}
