# gpuwatch probe: reading /proc: a process's stat (parsed once per change, through descriptors
# kept open), the pids handed out since the last look, a process's parent, size and mapped libraries.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "procfs".
import os
import threading

from host_facts import BOOT_TIME, CLK_TCK, PAGE_SIZE


class Stat(object):
    # cpu_s: cpu rounded as the frame carries it; child_facts: the CHILD_FACTS of this process as the
    # last frame built them (with the static facts they came from). A Stat is kept while its file reads
    # the same bytes, so both are worked out once per change, not once per sample.
    __slots__ = ("pid", "comm", "state", "ppid", "pgid", "sid", "cpu", "ccpu", "threads",
                 "start", "ticks", "rss", "cpu_s", "child_facts")


def read_raw(path):
    """One small /proc file's bytes, or None if it is gone. os.open/os.read: about three times
    cheaper than open(), and a scan does this for every process on the host."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


class ProcFiles(object):
    """The small /proc files a sample reads again every tick, through descriptors kept open.

    pread() on an open /proc/PID/stat costs about half of open+read+close, and a sample does this
    for every watched process and descendant. A descriptor stays bound to the process it was opened
    for: once that process is gone its reads fail (ESRCH) or come back empty, never another
    process's facts, and the path is opened afresh. Descriptors not read during a sample are closed
    at its end, and at most MAX_OPEN are kept.
    """

    MAX_OPEN = 256

    def __init__(self):
        self.fds = {}  # (path, owner start ticks or None) -> fd
        self.used = set()
        # path -> (bytes, what they were parsed into) at the last read: bytes that did not change
        # are not parsed again (an idle worker's stat reads the same sample after sample).
        self.parsed = {}
        # path -> the Stat read in this sample (emptied as each sample begins: begin_sample): a process read
        # twice in one sample is read once. Each rank of a torchrun job is watched itself and is its launcher's
        # descendant: 8 ranks, 8 preads and parses a sample fewer.
        self.stats_now = {}

    def read(self, path, owner=None):
        """The file's bytes or None. `owner`: the start ticks of the process whose file this is,
        for files that may read empty while it lives (children); None: empty means gone."""
        key = (path, owner)
        fd = self.fds.get(key)
        if fd is not None:
            try:
                data = os.pread(fd, 4096, 0)
                if data or owner is not None:
                    self.used.add(key)
                    return data
            except OSError:
                pass
            os.close(self.fds.pop(key))
        if len(self.fds) >= self.MAX_OPEN:
            return read_raw(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.pread(fd, 4096, 0)
        except OSError:
            os.close(fd)
            return None
        self.fds[key] = fd
        self.used.add(key)
        return data

    def begin_sample(self):
        """A sample begins: a stat read from here on is read again (once in the sample)."""
        self.stats_now = {}

    def kept_stat(self, key, pid):
        """A /proc/PID/stat read through the descriptor kept for `key` only, not marked used (the lean
        sample's read): None where none is open, or it reads nothing or too little (the caller falls back)."""
        s = self.stats_now.get(key[0])
        if s is not None:
            return s
        fd = self.fds.get(key)
        if fd is None:
            return None
        try:
            raw = os.pread(fd, 4096, 0)
        except OSError:
            return None
        return self.stat_of(key[0], pid, raw) if raw else None

    def stat_of(self, path, pid, raw):
        """The Stat of these bytes of `path`: the last read's where the bytes are the same (not parsed again).
        It stands for the rest of the sample (stats_now)."""
        last = self.parsed.get(path)
        if last is not None and last[0] == raw:
            s = last[1]
        else:
            s = parse_stat(pid, raw)
            self.parsed[path] = (raw, s)
        self.stats_now[path] = s
        return s

    def keep(self, keys):
        """Keep these files open through this sample though they were not read in it."""
        for key in keys:
            if key in self.fds:
                self.used.add(key)

    def end_sample(self, close=True):
        """Close the descriptors not read during the sample (`close`: else keep them all for the next)."""
        if not close:
            self.used = set()
            return
        if not self.used.issuperset(self.fds):  # (every descriptor read: nothing to close, the usual case)
            for key in [k for k in self.fds if k not in self.used]:
                os.close(self.fds.pop(key))
        if len(self.parsed) > len(self.used):
            live = set(path for path, _ in self.used)
            self.parsed = dict(item for item in self.parsed.items() if item[0] in live)
        self.used = set()


def read_stat(pid, files=None):
    """Parse /proc/PID/stat; None if the process is gone or unreadable. Through `files` (ProcFiles),
    bytes equal to the last read's give the same Stat back, unparsed: treat a Stat as read-only."""
    path = "/proc/%d/stat" % pid
    if files is None:
        return parse_stat(pid, read_raw(path))
    s = files.stats_now.get(path)
    if s is not None:
        return s
    raw = files.read(path)
    return files.stat_of(path, pid, raw) if raw else None


def parse_stat(pid, raw):
    """A Stat from /proc/PID/stat's bytes; None for no bytes or too few fields."""
    if not raw:
        return None
    lpar, rpar = raw.find(b"("), raw.rfind(b")")
    fields = raw[rpar + 2:].split()
    if len(fields) < 22:
        return None
    s = Stat()
    s.pid = pid
    s.comm = raw[lpar + 1:rpar].decode("utf-8", "replace")
    s.state = fields[0].decode()
    s.ppid = int(fields[1])
    s.pgid = int(fields[2])
    s.sid = int(fields[3])
    s.cpu = (int(fields[11]) + int(fields[12])) / float(CLK_TCK)
    s.ccpu = (int(fields[13]) + int(fields[14])) / float(CLK_TCK)
    s.threads = int(fields[17])
    # Start time in clock ticks since boot: exact, so (pid, ticks) names one process for good.
    s.ticks = int(fields[19])
    s.start = round(BOOT_TIME + s.ticks / float(CLK_TCK), 2)
    s.rss = int(fields[21]) * PAGE_SIZE
    s.cpu_s = round(s.cpu, 2)
    s.child_facts = None
    return s


def all_pids():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.append(int(name))
    return out


# A few new pids are looked at one by one rather than by listing /proc (344 us cold on the H200 host, and it
# grows with the host's process count); past this many, a listing is cheaper.
SPAN_LOOK_MAX = 32


def handed_out_span(before, after):
    """(first, last) of the pids handed out between two reads of a PidCursor's last pid, or None where not known
    (no earlier read, a cursor that cannot tell, or the pid counter wrapped)."""
    try:
        first, last = int(before) + 1, int(after)
    except (TypeError, ValueError):
        return None
    return (first, last) if first <= last else None


def pid_leaders(first, last):
    """The processes (thread group leaders) among pids first..last, and their stat bytes: ([pid], {pid: raw}).
    A thread's pid is handed out from the same counter, and its /proc/TID/stat reads like a process's. Field
    38 (exit_signal) tells most apart: a leader's is the signal its parent gets (SIGCHLD); a thread's is -1
    (Linux) or 0 (gVisor). Where it is 0 or less, /proc/PID/status's Tgid says (a process cloned with no
    exit signal reads 0 too)."""
    pids, raws = [], {}
    for pid in range(first, last + 1):
        raw = read_raw("/proc/%d/stat" % pid)
        if not raw:
            continue  # ended already, or never handed out
        fields = raw[raw.rfind(b")") + 2:].split(None, 36)
        try:
            leader = int(fields[35]) > 0
        except (IndexError, ValueError):
            leader = False
        if not leader:
            status = read_raw("/proc/%d/status" % pid) or b""
            at = status.find(b"\nTgid:")
            try:
                if at < 0 or int(status[at + 6:status.index(b"\n", at + 1)]) != pid:
                    continue  # a thread (or gone)
            except ValueError:
                continue
        pids.append(pid)
        raws[pid] = raw
    return pids, raws


class PidCursor(object):
    """Tells, for the price of one pread of /proc/loadavg, whether any process or thread was
    created since the last look: its last field is the pid the kernel handed out last.
    `tasks`: whether one was created or reaped: the tasks total before it ("... 1/207 12345") is
    read too, and it falls as a task is reaped.

    Where that field does not follow pid allocation (a virtualised /proc/loadavg in a container),
    starting a thread at construction shows it, and the cursor then always answers "changed"."""

    PATH = "/proc/loadavg"

    def __init__(self, tasks=False):
        self.tasks = tasks
        self.fd = None
        self.last = None
        try:
            self.fd = os.open(self.PATH, os.O_RDONLY)
        except OSError:
            return
        before = self.read()
        t = threading.Thread(target=lambda: None)  # takes a pid from the same counter
        t.start()
        t.join()
        if before is None or self.read() == before:
            os.close(self.fd)
            self.fd = None

    def read(self, loadavg=None):
        try:
            if loadavg is None:
                loadavg = os.pread(self.fd, 128, 0)
            return loadavg[loadavg.rfind(b"/") + 1:] if self.tasks else loadavg.rsplit(None, 1)[-1]
        except (OSError, IndexError, AttributeError):
            return None

    def changed(self, loadavg=None):
        """True when a pid was handed out since the last call (or when that cannot be known).
        `loadavg`: /proc/loadavg's bytes as the sample read them, shared by the sample's cursors
        and the load average (one read, not one each); None: read it now."""
        if self.fd is None:
            return True
        now = self.read(loadavg)
        if now is None:
            return True
        moved, self.last = now != self.last, now
        return moved


def read_parent(pid, raw=None):
    """(ppid, start, comm) from /proc/PID/stat (`raw`: its bytes, read already), parsing no more than the
    scan needs."""
    if raw is None:
        raw = read_raw("/proc/%d/stat" % pid)
    if raw is None:
        return None
    rpar = raw.rfind(b")")
    fields = raw[rpar + 2:].split(None, 20)
    if len(fields) < 21 or fields[0] == b"Z":
        return None  # a zombie has exited already
    comm = raw[raw.find(b"(") + 1:rpar].decode("utf-8", "replace")
    return int(fields[1]), round(BOOT_TIME + int(fields[19]) / float(CLK_TCK), 2), comm


def read_vsize(pid, files=None):
    """The size of a process's address space (bytes, /proc/PID/stat), or None if it is gone.
    `files`: ProcFiles to read it through (a young job is asked again every second)."""
    path = "/proc/%d/stat" % pid
    raw = read_raw(path) if files is None else files.read(path)
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2:].split(None, 21)
    return int(fields[20]) if len(fields) > 20 else None


def maps_have(pid, needles):
    """Whether /proc/PID/maps names one of `needles` (read in blocks; stops at the first hit)."""
    try:
        fd = os.open("/proc/%d/maps" % pid, os.O_RDONLY)
    except OSError:
        return False
    try:
        tail = b""
        while True:
            block = os.read(fd, 65536)
            if not block:
                return False
            chunk = tail + block
            for needle in needles:
                if needle in chunk:
                    return True
            tail = chunk[-64:]
    except OSError:
        return False
    finally:
        os.close(fd)
