# gpuwatch probe: records of what a gpuwatch did to processes on this host, shared by every gpuwatch.
# Standard library only, Python 3.6+, Linux. Shipped to the host and imported as "action_notes".
#
# A kill or restart writes, as it is taken, one small JSON record naming the action, the local user who
# confirmed it, the host time and its targets (pid, start ticks). Every probe on the host reports the records
# that name a process it watches (or watched until this frame), so a gpuwatch that did not take the action
# still reads the run's end as "killed by USER via gpuwatch". The records live in the probe user's state dir
# (a directory of their own, mode 0700): created O_EXCL|O_NOFOLLOW at mode 0600, bounded in size and number,
# and read only from regular files of that user opened without following a link.
import errno
import json
import os
import stat
import time

from ops_base import OpError

# run_started: the run a restart started (its wrapper); dump_stack: a py-spy dump's reading of the processes
ACTIONS = ("kill", "restart_unbuffered", "run_started", "dump_stack")
FINDING_PHASES = ("stalled", "silent", "training", "loading", "compiling", "evaluating", "checkpointing")
MAX_RECORD_BYTES = 4096
MAX_RECORDS = 256  # the oldest go first when more are written
MAX_AGE_S = 7 * 86400.0
MAX_TARGETS = 64
SUFFIX = ".json"


def notes_dir():
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpuwatch", "actions")


def _open_dir(path, create):
    """An fd on the records' directory: ours, a real directory (not a link), writable by us alone."""
    if create:
        try:
            os.makedirs(path, 0o700)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise OpError("state-dir", "cannot create %s: %s" % (path, os.strerror(exc.errno or 0)))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if not create and exc.errno == errno.ENOENT:
            return None
        raise OpError("state-dir", "cannot open %s: %s" % (path, os.strerror(exc.errno or 0)))
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise OpError("state-dir", "%s is not a private directory of this user: records not used" % path)
    return fd


def _text(value, limit):
    if not isinstance(value, str) or not value or len(value) > limit:
        return None
    return value


def make_record(args, now):
    """The record to write, from the op's arguments (refusing anything else than what a record holds)."""
    action = args.get("action")
    if action not in ACTIONS:
        raise OpError("bad-args", "action must be one of %s" % ", ".join(ACTIONS))
    user = _text(args.get("user"), 64)
    if user is None:
        raise OpError("bad-args", "user must be a name of at most 64 characters")
    ident = args.get("id")
    if not isinstance(ident, str) or not 8 <= len(ident) <= 32 or any(c not in "0123456789abcdef" for c in ident):
        raise OpError("bad-args", "id must be 8 to 32 lowercase hex digits")
    raw = args.get("targets")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_TARGETS:
        raise OpError("bad-args", "targets must be 1 to %d {pid, start_ticks}" % MAX_TARGETS)
    targets = []
    for t in raw:
        try:
            targets.append([int(t["pid"]), int(t["start_ticks"])])
        except (TypeError, KeyError, ValueError):
            raise OpError("bad-args", "each target needs an integer pid and start_ticks")
    record = {"id": ident, "action": action, "user": user, "time": now, "targets": targets,
              "host_uid": os.geteuid()}
    finding = args.get("finding")
    if finding is not None:
        record["finding"] = _finding(finding)
    status_file = args.get("status_file")
    if status_file is not None:
        if _text(status_file, 1024) is None or not status_file.startswith("/") or not status_file.endswith(SUFFIX):
            raise OpError("bad-args", "status_file must be an absolute .json path")
        record["status_file"] = status_file
    return record


def _finding(raw):
    """A dump's reading: an evidence line and, maybe, the phase and detail the stacks suggest."""
    if not isinstance(raw, dict):
        raise OpError("bad-args", "finding must be an object")
    evidence = _text(raw.get("evidence"), 600)
    if evidence is None:
        raise OpError("bad-args", "finding.evidence must be a line of at most 600 characters")
    phase, detail = raw.get("phase"), raw.get("detail")
    if phase is not None and phase not in FINDING_PHASES:
        raise OpError("bad-args", "finding.phase must be one of %s" % ", ".join(FINDING_PHASES))
    if detail is not None and (_text(detail, 32) is None or not all(c.isalnum() or c in "-_." for c in detail)):
        raise OpError("bad-args", "finding.detail must be a short word")
    return {"evidence": evidence, "phase": phase, "detail": detail}


def write_record(record, path=None):
    """Write one record (the name is its id: a second write of the same id is refused). Returns the path."""
    path = path or notes_dir()
    data = json.dumps(record, separators=(",", ":")).encode()
    if len(data) > MAX_RECORD_BYTES:
        raise OpError("bad-args", "the record is larger than %d bytes" % MAX_RECORD_BYTES)
    dfd = _open_dir(path, create=True)
    try:
        name = "%s-%s%s" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime(record["time"])), record["id"], SUFFIX)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        except OSError as exc:
            raise OpError("state-dir", "cannot create the record %s: %s" % (name, os.strerror(exc.errno or 0)))
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _prune(dfd, time.time())
    finally:
        os.close(dfd)
    return os.path.join(path, name)


def _prune(dfd, now):
    names = sorted(n for n in os.listdir(dfd) if n.endswith(SUFFIX))
    old = names[:max(0, len(names) - MAX_RECORDS)]
    for name in names[len(old):]:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue
        if now - st.st_mtime > MAX_AGE_S:
            old.append(name)
    for name in old:
        try:
            os.unlink(name, dir_fd=dfd)
        except OSError:
            pass


def _read(dfd, name):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_RECORD_BYTES:
            return None
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError:
        return None  # (being written: read again when the directory changes)
    if not isinstance(record, dict) or record.get("action") not in ACTIONS or not isinstance(record.get("targets"), list):
        return None
    return record


class ActionNotes(object):
    """The records on this host, read again only when the directory changes; each reported once per probe."""

    def __init__(self, path=None):
        self.path = path or notes_dir()
        self.stamp = None
        self.by_pid = {}  # pid -> [record]
        self.sent = set()  # record ids already in a frame

    def refresh(self):
        # One stat a frame: a record written just before a kill must be read no later than the frame that
        # finds the process gone.
        try:
            st = os.stat(self.path)
        except OSError:
            self.stamp, self.by_pid = None, {}
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self.stamp:
            return
        try:
            dfd = _open_dir(self.path, create=False)
        except OpError:
            return
        if dfd is None:
            return
        by_pid = {}
        complete = True
        try:
            for name in sorted(os.listdir(dfd))[-MAX_RECORDS:]:
                if not name.endswith(SUFFIX):
                    continue
                record = _read(dfd, name)
                if record is None:
                    complete = False
                    continue
                for target in record["targets"][:MAX_TARGETS]:
                    if isinstance(target, list) and len(target) == 2:
                        by_pid.setdefault(target[0], []).append(record)
        finally:
            os.close(dfd)
        self.by_pid = by_pid
        self.sent &= set(r.get("id") for records in by_pid.values() for r in records)
        self.stamp = stamp if complete else None  # a record half written: read them all again next time

    def poll(self, pids):
        """The records not reported yet that name one of `pids` (watched now or until this frame)."""
        self.refresh()
        out = []
        if not self.by_pid:
            return out
        for pid in pids:
            for record in self.by_pid.get(pid, ()):
                if record.get("id") not in self.sent:
                    self.sent.add(record.get("id"))
                    out.append(record)
        return out
