# gpuwatch probe ops: PyTorch's flight recorder. Standard library only, Python 3.6+, Linux.
#
# fr_dump   for each (pid, start_ticks) target whose environment sets TORCH_NCCL_DEBUG_INFO_PIPE_FILE:
#           write to its pipe (<prefix><rank>.pipe), which makes torch write the recorder's buffer to
#           TORCH_FR_DUMP_TEMP_FILE<rank>; wait for that file to be rewritten, read it, and answer the
#           collectives it records, compacted. A target without the recorder is answered "not-enabled".
#
# The dump is a pickle written by the job: it is loaded by an unpickler that builds only plain
# containers (no class is ever looked up), so a hostile file cannot run code here.
import io
import os
import pickle
import stat
import threading
import time

from ops_base import OpError, check_ref

PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
DUMP_VAR = "TORCH_FR_DUMP_TEMP_FILE"
DUMP_DEFAULT = "/tmp/nccl_trace_rank_"  # torch's default dump prefix
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
MAX_DUMP_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = 256  # the newest entries per rank: enough to reach back past the first incomplete one
MAX_FRAMES = 6
MAX_TEXT = 200
MAX_TARGETS = 256
ENVIRON_BYTES = 1024 * 1024


class PlainUnpickler(pickle.Unpickler):
    """Dicts, lists, tuples, strings and numbers only: torch's dump needs no more."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("refused a pickled %s.%s: only plain data is read" % (module[:60], name[:60]))


def read_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read(ENVIRON_BYTES)
    except (OSError, IOError):
        return None
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def _text(value):
    return str(value)[:MAX_TEXT]


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def compact_entry(e):
    """One recorded collective, as the analysis needs it."""
    if not isinstance(e, dict):
        return None
    pg = e.get("process_group")
    pg_name = _text(pg[0]) if isinstance(pg, (list, tuple)) and pg else _text(e.get("pg_id", ""))
    frames = []
    for f in (e.get("frames") or [])[:MAX_FRAMES]:
        if isinstance(f, dict):
            frames.append([_text(f.get("name", "")), _text(f.get("filename", "")), _int(f.get("line"), 0)])
    sizes = e.get("input_sizes") or []
    return {
        "pg": pg_name,
        "pg_desc": _text(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else "",
        "seq": _int(e.get("collective_seq_id"), 0),
        "p2p_seq": _int(e.get("p2p_seq_id"), 0),
        "p2p": bool(e.get("is_p2p")),
        "op": _text(e.get("profiling_name", "")),
        "state": _text(e.get("state", "")),
        "sizes": _text(sizes)[:MAX_TEXT],
        "frames": frames,
        "created_ns": _int(e.get("time_created_ns"), 0),
    }


def compact_dump(data):
    if not isinstance(data, dict):
        raise OpError("bad-dump", "the flight-recorder dump is not a dict")
    entries = [c for c in (compact_entry(e) for e in (data.get("entries") or [])[-MAX_ENTRIES:]) if c]
    status = {}
    for pg, s in list((data.get("pg_status") or {}).items())[:64]:
        if isinstance(s, dict):
            status[_text(pg)] = {k: _int(s.get(k), -1) for k in
                                 ("last_enqueued_collective", "last_started_collective", "last_completed_collective")}
    config = {}
    for pg, c in list((data.get("pg_config") or {}).items())[:64]:
        if isinstance(c, dict):
            config[_text(pg)] = {"desc": _text(c.get("desc", "")), "ranks": _text(c.get("ranks", ""))}
    return {"version": _text(data.get("version", "")), "lib": _text(data.get("comm_lib_version", "")),
            "entries": entries, "pg_status": status, "pg_config": config,
            "entries_total": len(data.get("entries") or [])}


def load_dump(raw):
    try:
        return PlainUnpickler(io.BytesIO(raw)).load()
    except Exception as exc:  # a truncated or hostile file: say so, never raise past the op
        raise OpError("bad-dump", "the flight-recorder dump cannot be read: %s" % _text(exc))


def _stat(path):
    try:
        return os.stat(path)
    except OSError:
        return None


def _read_regular(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OpError("bad-dump", "%s is not a regular file" % path)
        if st.st_size > MAX_DUMP_BYTES:
            raise OpError("too-big", "%s is %d bytes, over the %d read" % (path, st.st_size, MAX_DUMP_BYTES))
        chunks, left = [], MAX_DUMP_BYTES
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def trigger(pipe):
    """Write one byte to the rank's pipe; torch's monitor thread reads it and dumps."""
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == 6:  # ENXIO: a FIFO nobody reads
            raise OpError("no-reader", "nobody reads %s: the rank's recorder thread is not running" % pipe)
        raise OpError("no-pipe", "cannot open %s: %s" % (pipe, exc.strerror))
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise OpError("no-pipe", "%s is not a FIFO: refused" % pipe)
        os.write(fd, b"1\n")
    finally:
        os.close(fd)


def one_target(t, timeout_s):
    pid, ticks = int(t["pid"]), int(t["start_ticks"])
    check_ref(pid, ticks)
    env = read_environ(pid)
    if env is None:
        raise OpError("permission", "cannot read the environment of process %d" % pid)
    rank = env.get("RANK")
    out = {"pid": pid, "start_ticks": ticks, "rank": _int(rank),
           "buffer": next((env[v] for v in BUFFER_VARS if env.get(v)), None)}
    if not env.get(PIPE_VAR):
        out.update(ok=False, code="not-enabled",
                   message="the flight recorder's pipe is not set (%s) for process %d" % (PIPE_VAR, pid))
        return out
    if rank is None or _int(rank) is None:  # a launcher agent inherits the variables: it records nothing
        out.update(ok=False, code="not-a-rank", message="process %d has no RANK: not a rank" % pid)
        return out
    pipe = env[PIPE_VAR] + rank + ".pipe"
    dump = env.get(DUMP_VAR, DUMP_DEFAULT) + rank
    if not os.path.isabs(pipe):
        pipe = os.path.join(os.readlink("/proc/%d/cwd" % pid), pipe)
    if not os.path.isabs(dump):
        dump = os.path.join(os.readlink("/proc/%d/cwd" % pid), dump)
    before = _stat(dump)
    asked = time.time()
    trigger(pipe)
    deadline = asked + timeout_s
    last = None
    while time.time() < deadline:
        st = _stat(dump)
        fresh = st is not None and st.st_size > 0 and (
            before is None or (st.st_mtime, st.st_size, st.st_ino) != (before.st_mtime, before.st_size, before.st_ino))
        if fresh:
            key = (st.st_mtime, st.st_size)
            if key == last:  # unchanged for one poll: written
                raw = _read_regular(dump)
                out.update(ok=True, path=dump, bytes=len(raw), waited_s=round(time.time() - asked, 2))
                out.update(compact_dump(load_dump(raw)))
                return out
            last = key
        time.sleep(0.2)
    out.update(ok=False, code="timeout", path=dump,
               message="no dump in %s within %.0f s of writing to %s" % (dump, timeout_s, pipe))
    return out


def op_fr_dump(args):
    targets = args.get("targets") or []
    if not isinstance(targets, list) or len(targets) > MAX_TARGETS:
        raise OpError("bad-args", "targets must be a list of at most %d (pid, start_ticks)" % MAX_TARGETS)
    timeout_s = min(max(float(args.get("timeout_s", 15.0)), 0.5), 120.0)
    # Every rank's pipe is written before any dump is awaited: the dumps are taken at (nearly) one moment.
    slots = [None] * len(targets)

    def run(i, t):
        try:
            slots[i] = one_target(t, timeout_s)
        except OpError as exc:
            slots[i] = {"pid": _int(t.get("pid")), "ok": False, "code": exc.code, "message": exc.message}
        except Exception as exc:  # one rank's failure is that rank's answer
            slots[i] = {"pid": _int(t.get("pid")), "ok": False, "code": "failed", "message": _text(exc)}

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets) if isinstance(t, dict)]
    for th in threads:
        th.daemon = True
        th.start()
    for th in threads:
        th.join(timeout_s + 5)
    results = [s for s in slots if s is not None]
    return {"ranks": results}


OPS = {"fr_dump": op_fr_dump}
