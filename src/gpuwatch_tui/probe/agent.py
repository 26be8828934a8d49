# gpuwatch probe: runs ON a watched host, shipped over the SSH channel at connect.
#
# Standard library only, Python 3.6+, Linux /proc. It never installs anything and writes no
# files. It reads newline-delimited JSON requests on stdin and writes newline-delimited JSON
# frames on stdout, and it exits as soon as stdin closes, so a dropped connection cannot
# leave it behind.
#
# When shipped, the bundle puts BUNDLE = {"modules": {...}, "options": {...}} in globals: every other
# module of the probe comes in it, by the plain name it is imported as here (see ShippedModules).
import binascii
import importlib
import importlib.machinery
from operator import is_, itemgetter
import os
import re
import signal
from stat import S_ISREG
import sys
import threading
import time


class ShippedModules(object):
    """Lets `import NAME` find the modules that came in the bundle: the probe's modules import one
    another by plain name, in any order, and nothing is written to the host's disk."""

    def __init__(self, sources):
        self.sources = sources

    def find_spec(self, name, path, target=None):
        if path is not None or name not in self.sources:
            return None
        return importlib.machinery.ModuleSpec(name, self, origin="<gpuwatch %s>" % name)

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        name = module.__name__
        exec(compile(self.sources[name], "<gpuwatch %s>" % name, "exec"), module.__dict__)


def folder_modules(folder):
    """The probe's other modules as read from the folder this file is in (the probe run from a
    checkout rather than shipped): what the bundle would carry."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and name not in ("agent.py", "__init__.py"):
            with open(os.path.join(folder, name), "rb") as f:
                out[name[:-3]] = f.read().decode("utf-8")
    return out


try:
    BUNDLE  # noqa: B018 - set by the bootstrap when shipped
except NameError:
    BUNDLE = {"modules": folder_modules(os.path.dirname(os.path.abspath(__file__))), "options": {}}
BUNDLE_MODULES = BUNDLE.get("modules", {})
# First on the path: a shipped module is the probe's own even where the host has one of the same name.
if not any(getattr(f, "sources", None) is BUNDLE_MODULES for f in sys.meta_path):
    sys.meta_path.insert(0, ShippedModules(BUNDLE_MODULES))

from gpu_choice import NoGpu, open_gpu_source  # noqa: E402 - shipped: found through the finder above
from ops_base import fd_target as read_fd_target  # noqa: E402
from output import emit, shutdown  # noqa: E402
from wire import CHILD_FACTS, GPU_FACTS, ROOT_FACTS, TAIL_EVENTS, TAIL_FACTS  # noqa: E402

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
TAIL_CAP_BYTES = 256 * 1024  # at most this much of one log per frame; the rest waits (see Tail)
# A log that keeps growing has its path stat'ed this often: what only that stat sees is a log deleted (or
# replaced) while its writer keeps writing the old file, and the true mtime. A rotation the writer follows or a
# truncation is seen at the first poll that reads nothing, at once (Tail.poll). Was 5 s: 8 growing logs, a stat
# and a full poll 1.6 times a sample (issue #7, round 11).
TAIL_CHECK_S = 15.0
DIR_ENTRY_CAP = 2000
SMALL_THREAD_COUNT = 16  # processes with at most this many threads have every thread's children read


def read_text(path, limit=65536):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def boot_time():
    for line in read_text("/proc/stat", 1 << 20).splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return time.time() - float(read_text("/proc/uptime").split()[0])


BOOT_TIME = boot_time()


# ---------------------------------------------------------------- host facts

class KeptFile(object):
    """A host-wide /proc file read every sample through one descriptor kept open: one pread()
    instead of open+read+close. Syscalls are most of a sample's cost, and after a second's sleep
    each costs more than in a tight loop (about 1.4x, measured on an idle GPU host)."""

    def __init__(self, path, size=4096):
        self.path = path
        self.size = size
        self.fd = None

    def read(self):
        """The file's first `size` bytes, or None if it cannot be read."""
        for _ in range(2):
            if self.fd is None:
                try:
                    self.fd = os.open(self.path, os.O_RDONLY)
                except OSError:
                    return None
            try:
                return os.pread(self.fd, self.size, 0)
            except OSError:
                os.close(self.fd)
                self.fd = None  # try a fresh descriptor once
        return None


PROC_STAT = KeptFile("/proc/stat")
PROC_MEMINFO = KeptFile("/proc/meminfo", 1024)  # MemTotal and MemAvailable are in the first lines
PROC_LOADAVG = KeptFile("/proc/loadavg", 128)


def load1(data=None):
    """The 1-minute load average, from /proc/loadavg's bytes (read now when not given; None where
    unreadable)."""
    if data is None:
        data = PROC_LOADAVG.read()
    try:
        return float(data.split(None, 1)[0])
    except (AttributeError, IndexError, ValueError):
        return None


class HostCpu(object):
    """Busy share of all CPUs between two reads, from the first line of /proc/stat (the sampler reads it
    every HOST_SLOW_READ_S: a 5 s average)."""

    def __init__(self):
        self.last = None

    def percent(self):
        data = PROC_STAT.read()
        if not data:
            return None
        fields = data.split(b"\n", 1)[0].split()[1:]
        try:
            ticks = [int(v) for v in fields[:8]]
        except ValueError:
            return None
        total = sum(ticks)
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        last, self.last = self.last, (total, idle)
        if last is None or total <= last[0]:
            return None  # the first sample has nothing to compare with
        return round(100.0 * (1.0 - float(idle - last[1]) / (total - last[0])), 1)


# RAM used/total (the host header's figure, read by no rule of the engine) is read this often, and the
# probe's own CPU (probe_cpu_s, for an overhead figure) too: memory moves slowly, and each read is a
# system call a sample (/proc/meminfo's is one of the dearer ones: the kernel sums it at every read).
# The host's CPU busy % too, as the average over the last HOST_SLOW_READ_S (as `vmstat 5` gives it), repeated
# by the frames in between: no rule of the engine reads it (jobs/ reads each process's own CPU time), only
# the host header and its history show it, and /proc/stat is the dearest host file (the kernel sums every
# CPU's counters at each read). No verdict changes; the header's figure is smoother and up to 5 s old.
HOST_SLOW_READ_S = 5.0


class EverySoOften(object):
    """`read()`'s last answer, read again once `every` seconds have passed (or the clock went back).
    `until_known`: a None answer is asked again at the next get (a first read that only primes a delta)."""

    def __init__(self, read, every=HOST_SLOW_READ_S, until_known=False):
        self.read = read
        self.every = every
        self.until_known = until_known
        self.at = None
        self.value = None

    def get(self, now):
        if (self.at is None or not 0.0 <= now - self.at < self.every
                or (self.until_known and self.value is None)):
            self.value = self.read()
            self.at = now
        return self.value


def own_cpu_s():
    t = os.times()
    return round(t[0] + t[1], 3)


def read_meminfo():
    """(total, available) in KiB from /proc/meminfo; (None, None) where it cannot be read."""
    data = PROC_MEMINFO.read()
    total = avail = None
    for line in (data or b"").split(b"\n")[:8]:  # both are in the first three lines
        if line.startswith(b"MemTotal:"):
            total = int(line.split()[1])
        elif line.startswith(b"MemAvailable:"):
            avail = int(line.split()[1])
    return total, avail


# ---------------------------------------------------------------- processes

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


def fd_target(pid, fd):
    """ops_base.fd_target (one helper for the sampler and the capture op); None if unreadable."""
    try:
        return read_fd_target(pid, fd)
    except OSError:
        return None


FD_FLAGS_REFRESH_S = 60.0  # an fd's open flags (fdinfo) are read again this often while its target stays


def fd_target_again(pid, fd, last, now):
    """fd_target for a target read before (`last`, or None): while the link names the same path, its
    open flags cannot have changed short of an fcntl (re-read every FD_FLAGS_REFRESH_S): one system call
    instead of 5 (readlink, fdinfo open/read/close, stat). None if unreadable."""
    if last is None or now - last.get("flags_at", 0.0) >= FD_FLAGS_REFRESH_S:
        target = fd_target(pid, fd)
        if target is not None:
            target["flags_at"] = now
        return target
    try:
        path = os.readlink("/proc/%d/fd/%d" % (pid, fd))
    except OSError:
        return None
    if path != last["path"]:
        target = fd_target(pid, fd)
        if target is not None:
            target["flags_at"] = now
        return target
    return last


def fd_fact(target):
    """A target as the frame carries it (without the probe's own bookkeeping). Not its file's size: nothing
    reads it (the engine reads a target's path and kind), and keeping it current cost a stat per process
    every few seconds, and an entry whose facts changed every time it did (issue #7, round 10)."""
    if target is None:
        return None
    return {"path": target["path"], "kind": target["kind"], "append": target["append"]}


def python_unbuffered(cmdline, environ):
    """Is stdout unbuffered for this Python process: (-u or PYTHONUNBUFFERED, reason)."""
    if environ is not None and environ.get("PYTHONUNBUFFERED"):
        return True, "PYTHONUNBUFFERED=" + environ["PYTHONUNBUFFERED"][:8]
    args = cmdline[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-" or arg == "--":
            break  # the script: later arguments belong to it
        if arg.startswith("--"):
            i += 1
            continue
        for j, ch in enumerate(arg[1:]):
            if ch == "u":
                return True, "-u"
            if ch in "cm":
                return False, ""  # -c CMD / -m MOD: the rest is the program's
            if ch in "WXQ":
                if j == len(arg) - 2:
                    i += 1  # "-W ignore": the value is the next argument
                break
        i += 1
    return False, ""


def is_python(comm, cmdline):
    argv0 = os.path.basename(cmdline[0]) if cmdline else ""
    return comm.startswith("python") or argv0.startswith("python") or argv0 == "pypy3"


_USER_NAMES = {}


def user_name(uid):
    """The login name of `uid` on this host, looked up once per uid (None: unknown uid)."""
    if uid is None:
        return None
    if uid not in _USER_NAMES:
        try:
            import pwd
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _USER_NAMES[uid] = None
    return _USER_NAMES[uid]


# The variables that tie the processes of one run together across hosts (a Slurm allocation, a
# torchrun rendezvous) and give each its rank: the only part of a job's environment the probe sends.
DIST_ENV = frozenset((b"SLURM_JOB_ID", b"SLURM_PROCID", b"SLURM_NODEID", b"TORCHELASTIC_RUN_ID",
                      b"MASTER_ADDR", b"MASTER_PORT", b"RANK", b"LOCAL_RANK", b"WORLD_SIZE",
                      b"GROUP_RANK", b"NODE_RANK", b"LOCAL_WORLD_SIZE"))
DIST_VALUE_MAX = 256


# A process's cwd and stdout/stderr targets are read again `slow_refresh` (5 s) after they were read, then
# twice as long after each read that found them the same, up to this many times `slow_refresh` (60 s): on a
# host of long jobs that is 3 readlinks per job a minute instead of 36 (issue #7, round 11: they were 17% of
# a sample's system calls). A change starts over at `slow_refresh`, and a new process is read at once, so a
# job that moves its cwd or output early in its life (Hydra's chdir) is seen within seconds as before.
SLOW_FACTS_BACKOFF = 12


class ProcCache(object):
    """Facts that do not change while a process lives, keyed by (pid, start)."""

    def __init__(self):
        self.static = {}

    def static_facts(self, pid, start):
        key = (pid, start)
        facts = self.static.get(key)
        if facts is None:
            facts = {}
            try:
                raw = open("/proc/%d/cmdline" % pid, "rb").read()
                facts["cmdline"] = [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]][:256]
            except (OSError, IOError):
                facts["cmdline"] = []
            environ = None
            dist = {}
            try:
                raw = open("/proc/%d/environ" % pid, "rb").read()
                environ = {}
                for item in raw.split(b"\0"):
                    k, _, v = item.partition(b"=")
                    if k in (b"PYTHONUNBUFFERED",):
                        environ[k.decode()] = v.decode("utf-8", "replace")
                    elif k in DIST_ENV:
                        dist[k.decode()] = v[:DIST_VALUE_MAX].decode("utf-8", "replace")
            except (OSError, IOError):
                pass
            facts["env_readable"] = environ is not None
            facts["environ"] = environ
            facts["dist"] = dist or None
            # The owner never changes while the process lives (setuid happens before exec in
            # practice): read once per (pid, start), so a sample pays nothing for it.
            try:
                facts["uid"] = os.stat("/proc/%d" % pid).st_uid
            except OSError:
                facts["uid"] = None
            facts["user"] = user_name(facts["uid"])
            self.static[key] = facts
        return facts

    def slow_facts(self, pid, start, now, refresh):
        """cwd and stdout/stderr targets: they rarely change, so re-read `refresh` s after they were read, and
        each time they read the same, twice as long after, up to SLOW_FACTS_BACKOFF times `refresh`; a change
        starts over at `refresh`. Due when `now >= facts["slow_due"]` (absent: never read)."""
        facts = self.static_facts(pid, start)
        if now >= facts.get("slow_due", 0.0):
            before = (facts.get("cwd"), facts.get("stdout"), facts.get("stderr"))
            try:
                facts["cwd"] = os.readlink("/proc/%d/cwd" % pid)
            except OSError:
                facts["cwd"] = None
            out = facts["stdout_target"] = fd_target_again(pid, 1, facts.get("stdout_target"), now)
            err = facts["stderr_target"] = fd_target_again(pid, 2, facts.get("stderr_target"), now)
            facts["stdout"], facts["stderr"] = fd_fact(out), fd_fact(err)
            every = facts.get("slow_every")
            if every is None or (facts["cwd"], facts["stdout"], facts["stderr"]) != before:
                every = refresh
            else:
                every = min(2 * every, SLOW_FACTS_BACKOFF * refresh)
            facts["slow_every"] = every
            facts["slow_at"] = now
            facts["slow_due"] = now + every
        return facts

    def forget_except(self, live_keys):
        for key in list(self.static):
            if key not in live_keys:
                del self.static[key]


# Every fact is sent in full this often anyway (a client that dropped a frame recovers), all in one frame: a
# frame that resends is a full sample (Probe.lean_sample), one per period, not one per entry first seen at
# its own time (until round 10 each entry had its own period).
FACT_RESEND_S = 30.0


class FrameDeltas(object):
    """Leaves out of a sample frame the facts the client already has.

    Most of a frame repeats the last one (a process's cmdline, start and owner, a GPU's name and
    total memory, a log's path, size and mtime while it does not grow). The client keeps the last
    value of each fact per process (pid, start), GPU (index) and tail (key) and fills missing ones
    in. Both sides keep exactly the entries of the latest frame, so one that leaves and comes back
    is sent in full again.
    """

    # One C call reads all of an entry's facts; equal to the last entry's, they all go (no per-fact work).
    GETTERS = dict((names, itemgetter(*names)) for names in (ROOT_FACTS, CHILD_FACTS, GPU_FACTS, TAIL_FACTS))

    def __init__(self):
        # (pid, start_ticks) -> [{fact: value last sent}, the last entry's facts (a tuple, or None where it
        # lacked some)]
        self.roots = {}
        self.children = {}
        self.gpus = {}
        self.tails = {}
        self.resent_at = None  # the last frame that sent every fact in full (FACT_RESEND_S)
        self.resend = True  # this frame does

    @classmethod
    def _strip(cls, entry, key, names, sent, kept, resend):
        try:
            facts = cls.GETTERS[names](entry)
        except KeyError:
            facts = None
        last = sent.get(key)
        if last is None or (resend and key not in kept):
            sent[key] = [dict((name, entry[name]) for name in names if name in entry), facts]
        elif facts is not None and facts == last[1]:
            for name in names:  # the client has every one of them
                del entry[name]
        else:
            values = last[0]
            for name in names:
                if name in entry:
                    value = entry[name]
                    if name in values and values[name] == value:
                        del entry[name]
                    else:
                        values[name] = value
            last[1] = facts
        kept[key] = True

    @staticmethod
    def _keep(sent, kept):
        return sent if len(kept) == len(sent) else dict((k, v) for k, v in sent.items() if k in kept)

    # The sampler builds a process's entry around these (proc_info): it asks first whether the client
    # has the facts, and leaves them out unbuilt when it has, rather than building them to delete them.
    def begin(self, now):
        """A frame starts: the processes of this frame are stripped as proc_info builds them."""
        self.resend = self.resent_at is None or now - self.resent_at >= FACT_RESEND_S
        self.kept_roots, self.kept_children, self.kept_gpus, self.kept_tails = {}, {}, {}, {}
        self.known_gpus = set()  # indices of GPUs built without their facts (known_gpu)
        self.known_tails = set()  # keys of tails whose chunk was built without its facts (known_tail)

    def known_root(self, key, facts):
        """Does the client have these ROOT_FACTS values (a tuple in that order) of process `key`?"""
        return self._known(self.roots, self.kept_roots, key, facts)

    def known_child(self, key, facts):
        return self._known(self.children, self.kept_children, key, facts)

    def known_gpu(self, index, facts):
        """Does the client have these GPU_FACTS values of GPU `index`? (The source then leaves them out.)"""
        if self._known(self.gpus, self.kept_gpus, index, facts):
            self.known_gpus.add(index)
            return True
        return False

    def known_tail(self, key, facts):
        """Does the client have these TAIL_FACTS values of tail `key`? (Tail.poll then builds the bare chunk.)"""
        if self._known(self.tails, self.kept_tails, key, facts):
            self.known_tails.add(key)
            return True
        return False

    def _known(self, sent, kept, key, facts):
        last = sent.get(key)
        if last is None or last[1] != facts or (self.resend and key not in kept):
            return False
        kept[key] = True
        return True

    def strip_root(self, entry, key):
        """A process entry with its facts (not known to the client): left with what it lacks."""
        self._strip(entry, key, ROOT_FACTS, self.roots, self.kept_roots, self.resend)

    def strip_child(self, entry, key):
        self._strip(entry, key, CHILD_FACTS, self.children, self.kept_children, self.resend)

    def apply(self, frame, now, procs_done=False):
        """Strip a whole frame. `procs_done`: its processes were stripped as they were built
        (begin, then proc_info); its GPUs and tails are stripped here."""
        if not procs_done:
            self.begin(now)
            for proc in frame["procs"]:
                self.strip_root(proc, (proc["pid"], proc["start_ticks"]))
                if not proc.get("compilers_seen", True):
                    del proc["compilers_seen"]
                for child in proc["children"]:
                    self.strip_child(child, (child["pid"], child["start_ticks"]))
        gpus, tails = self.kept_gpus, self.kept_tails
        strip = self._strip
        known_gpus, known_tails = self.known_gpus, self.known_tails
        resend = self.resend
        for gpu in frame["gpus"]:
            if gpu["index"] not in known_gpus:  # (those left out when built are kept already)
                strip(gpu, gpu["index"], GPU_FACTS, self.gpus, gpus, resend)
        for tail in frame["tails"]:
            if tail["key"] in known_tails:
                continue  # built bare (kept already)
            for name, empty in TAIL_EVENTS:
                if name in tail and tail[name] == empty:
                    del tail[name]
            strip(tail, tail["key"], TAIL_FACTS, self.tails, tails, resend)
        if resend:
            self.resent_at = now
        self.roots = self._keep(self.roots, self.kept_roots)
        self.children = self._keep(self.children, self.kept_children)
        self.gpus = self._keep(self.gpus, gpus)
        self.tails = self._keep(self.tails, tails)


# A job is seen from its first sample, not only once it opens a CUDA context (seconds later): a Python
# process whose stdout goes to a file and that has the torch / CUDA / NCCL libraries mapped, or one a
# launcher started, is reported as a job candidate.
CANDIDATE_LIBS = (b"libtorch", b"libcudart", b"libnccl")
LAUNCHER_COMMS = frozenset(("pt_elastic", "torchrun", "accelerate", "deepspeed"))
CANDIDATE_YOUNG_S = 30.0  # libraries load late (import torch takes seconds): re-check while this young
CANDIDATE_CHECKS = 20  # ... at most this many times
CANDIDATE_RECHECK_S = 1.0  # ... at most this often
CANDIDATE_MIN_VSIZE = 256 << 20  # address space below which torch cannot be loaded (libtorch_cpu: 400+ MiB)
# Every process's stat is read again this often (a full /proc walk); in between, every new pid is looked at at
# the sample after it was handed out (JobCandidates.poll). What only a full walk sees: a pid that ended and
# was handed out again between two looks (the pid space wrapping within a second), a process adopted by
# another (trees follow adoption themselves: TREE_WALK_AT_LEAST_S), and the host's process count. It was
# 60 s until round 10 (issue #7): a full walk reads ~200 stats on an idle VM, 3.5 ms of CPU on the H200 host,
# 60 us a sample at 1 Hz; a busy node has thousands of processes.
WALK_AT_LEAST_S = 300.0
# A descendant of a watched process (never a watched process itself) that was asleep (state S) with the same
# CPU time at its last two reads is read again this often, and at once at the sample after a process started
# or was reaped anywhere on the host (loadavg's tasks total and last pid, PidCursor(tasks=True)): in between, its entry
# repeats its last figures (no wire change). An idle DataLoader worker or shell `sleep` costs one read per
# 5 s instead of one a sample (a cold pread of a /proc/PID/stat is ~50 us on a 1 Hz VM). What is traded: an
# idle child that turns busy, or changes state without exiting (S -> D or T), is seen up to 5 s late, and so
# is a zombie its parent does not reap; one that exits and is reaped, and every new child, is seen at the
# next sample as before. No verdict changes: the engine's state rules (T, D, Z; a rank's culprit note) read
# the watched processes' own state, read every sample (a rank or a candidate is a watched process itself);
# children's CPU counts only in a job's CPU rate over RATE_WINDOW_S (30 s), which a 5 s delay shifts and
# does not hide, and quiet thresholds are minutes; compile detection reads new children (seen at the next
# sample) and a worker's reaped-children CPU (a reap moves the tasks total: read at once).
IDLE_CHILD_READ_S = 5.0
# Decision (issue #7, round 9): a watched process's descendants are not walked again (no children list,
# no parent link followed) while loadavg's mark (tasks total, last pid: PidCursor(tasks=True)) stands
# since the last walk: the last walk's list stands, each one's stat read as IDLE_CHILD_READ_S says.
# Exact: a fork or clone (a thread too) takes a pid and moves the last pid; a reaped task moves the tasks
# total; a process changes its parent only when its parent exits. One gap: an exit moves the total only
# at its reap, and the exited process's children go to a subreaper or init at the exit itself. So a
# descendant that reads gone (or a zombie) while the mark stood has its tree walked again at once with
# every children list read afresh (an adopting subreaper's list included); every descendant's stat is
# read at least every IDLE_CHILD_READ_S, which bounds how late that is. A walk at least this often is the
# safety net for what the mark cannot show at all: links found by a /proc walk or the look at new pids (a
# child of a non-main thread of a process with many threads is only found there) are walked at their
# sample, and any other case this reasoning missed is picked up within this interval. It was IDLE_CHILD_READ_S (5 s)
# until round 10: each walk is a full sample (Probe.lean_sample cannot walk), one in five, where nothing it
# guards against had ever been seen; every other reason to walk is read at the sample it happens.
TREE_WALK_AT_LEAST_S = 30.0


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


def probe_ancestors():
    """(pid, start) of every process above this probe: its session's shell, sshd, the gpuwatch or
    test runner that started it. A Python one among them supervises; it is never a job."""
    out = set()
    pid = os.getppid()
    while pid > 1 and len(out) < 64:
        parent = read_parent(pid)
        if parent is None:
            break
        out.add((pid, parent[1]))
        pid = parent[0]
    return out


class JobCandidates(object):
    """Python processes that are jobs before they touch a GPU, judged once per (pid, start), and
    re-judged every sample while young and undecided (libraries load late).

    The /proc walk hands over every process; between walks a sample lists /proc (only when a pid
    was handed out since the last look) and reads the stat of new pids only, so a job is found at
    the sample after it starts. Its maps (the costly read) are read only once it is big enough to
    hold torch and again only when its address space has grown."""

    def __init__(self):
        # (pid, start) -> [reason or None, checks, final, vsize at the last maps read, stdout target]
        self.judged = {}
        self.undecided = set()  # the keys of judged whose state is not final: the ones asked again
        # A young undecided process is asked again every second: its stat and its parent's name are
        # read through descriptors kept open while it is (one pread each, not open+read+close).
        self.files = ProcFiles()
        self.files.MAX_OPEN = 64  # young undecided jobs are few; past this, plain reads
        self.seen = {}  # pid -> (ppid, start, comm) of every process known
        self.found = {}  # pid -> reason
        self.rechecked_at = 0.0
        self.listed = None  # the pids of the last listing (listed again only when a pid was handed out)
        # The parents of the processes started since the last poll (set by poll; None: not known).
        self.new_parents = None
        self.born = []  # (pid, ppid) of each process the last poll found started since the look before
        self.ancestors = probe_ancestors()
        self.me = os.getpid()  # asked once: each call is a system call

    def scan(self, seen, now):
        """`seen`: {pid: (ppid, start, comm)} from the full scan."""
        self.seen = seen
        for key in list(self.judged):
            if key[0] not in seen or seen[key[0]][1] != key[1]:
                del self.judged[key]
        self.undecided &= set(self.judged)
        self.found = {}
        for pid in seen:
            self.consider(pid, now)

    def poll(self, now, handed_out=True, span=None):
        """New pids since the last look, and young undecided ones again. Returns {pid: reason}.
        `handed_out`: whether a pid was handed out since the last poll (the sample's PidCursor, which
        reads the bytes of /proc/loadavg the sample read: one cursor for both). `span`: (first, last) of
        the pids handed out since then, where the cursor knows them: up to SPAN_LOOK_MAX are looked at one
        by one (pid_leaders), no /proc listing; a listing counts every pid in it as new."""
        self.new_parents = None
        self.born = born = []
        me = self.me
        raws = {}
        if not handed_out:
            fresh = None
        elif self.listed is not None and span is not None and span[1] - span[0] < SPAN_LOOK_MAX:
            last = self.listed
            fresh, raws = pid_leaders(span[0], span[1])
            last.update(fresh)  # (a listing forgets the ended ones)
        else:
            try:
                listed = all_pids()
            except OSError:
                return self.found
            last, self.listed = self.listed, set(listed)
            # Only the pids not listed at the last look are new, and every pid handed out since (one that
            # ended and was handed out again in between is listed at both looks).
            if last is None:
                fresh = listed
            else:
                fresh = self.listed - last
                if span is not None:
                    fresh.update(pid for pid in listed if span[0] <= pid <= span[1])
        if fresh is None:
            self.new_parents = set()  # no pid handed out: no process started
        else:
            # The new pids' parents say whose children lists changed (the sampler reads those again, keeps
            # the others); a pid known from before that is new is read again too (a pid reused, or one a
            # walk saw in between).
            parents = set() if last is not None else None
            for pid in fresh:
                if pid == me:
                    continue
                known = self.seen.get(pid)
                if known is not None and last is None:
                    continue
                parent = read_parent(pid, raws.get(pid))
                if parent is None:
                    continue
                if parents is not None:
                    parents.add(parent[0])
                    born.append((pid, parent[0]))
                if known is None or known[1] != parent[1]:
                    self.seen[pid] = parent
                    self.consider(pid, now)
            self.new_parents = parents
        # a maps read is the costly part: not every sample; and nothing to do once every job is judged for good
        if (self.undecided or self.files.fds) and now - self.rechecked_at >= CANDIDATE_RECHECK_S:
            self.rechecked_at = now
            for pid, start in list(self.undecided):
                if pid in self.seen:
                    self.consider(pid, now)
            self.files.end_sample()  # closes the files of processes judged for good or gone
        return self.found

    def consider(self, pid, now):
        ppid, start, comm = self.seen[pid]
        if not comm.startswith("python") and comm != "pypy3":
            return
        if (pid, start) in self.ancestors:  # what started the probe (a shell, a gpuwatch) is no job
            return
        key = (pid, start)
        state = self.judged.get(key)
        if state is None:
            state = self.judged[key] = [None, 0, False, None, None]
        if not state[2]:
            state[0] = self.judge(pid, ppid, self.seen, state)
            state[1] += 1
            young = now - start < CANDIDATE_YOUNG_S
            state[2] = state[2] or state[0] is not None or not young or state[1] >= CANDIDATE_CHECKS
            if state[2]:
                self.undecided.discard(key)
            else:
                self.undecided.add(key)
        if state[0] is not None:
            self.found[pid] = state[0]

    def judge(self, pid, ppid, seen, state):
        parent = seen.get(ppid)
        if parent is not None and parent[2] in LAUNCHER_COMMS:
            return "launcher"
        # torchrun's agent starts as "python" and names itself pt_elastic later: the comm recorded when
        # it was first seen is stale, so read it now (a rank whose stdout is a pipe, as under srun, has
        # nothing else that makes it a job before it touches a GPU).
        comm = self.files.read("/proc/%d/comm" % ppid) if parent is not None else None
        if comm and comm.strip().decode("utf-8", "replace") in LAUNCHER_COMMS:
            return "launcher"
        out = state[4]
        if out is None:  # where stdout goes is settled at start: read once
            try:
                out = state[4] = os.readlink("/proc/%d/fd/1" % pid)
            except OSError:
                state[2] = True  # gone, or another user's we may not look into: no use asking again
                return None
        # A terminal is someone's interactive session; a pipe or /dev/null cannot be followed.
        # Where stdout goes is settled at start: such a process is not asked again.
        if not out.startswith("/") or out.startswith("/dev/"):
            state[2] = True
            return None
        # Loading a library maps it, which grows the address space: while the size is the one
        # of the last maps read, the maps cannot have gained torch; and libtorch_cpu alone maps
        # over 400 MiB, so a smaller process has not loaded it. (A maps read costs ~100x the stat:
        # a torch process's maps run to thousands of lines.)
        vsize = read_vsize(pid, self.files)
        if vsize is not None and (vsize == state[3] or vsize < CANDIDATE_MIN_VSIZE):
            return None
        state[3] = vsize
        if maps_have(pid, CANDIDATE_LIBS):
            return "torch"
        return None


# A first compile can take 3 s and its compiler runs (g++, cc1plus, ptxas) less than one sample
# interval each: between samples the watched processes' children are polled a few times, and any
# compiler seen is reported with the next frame.
COMPILER_COMMS = frozenset(("gcc", "cc", "cc1", "cc1plus", "g++", "c++", "clang", "clang++", "ld", "as",
                            "collect2", "ptxas", "nvcc", "cicc", "nvlink", "fatbinary", "ninja"))
COMPILER_POLL_TARGETS = 64  # at most this many processes polled between samples
# Polled only while a watched process tree starts processes: each poll is a wakeup of its own, and
# while the jobs start nothing it finds nothing. A compile is a burst of compiler runs; the sample
# after the first one sees it (a new child, or a worker's reaped-children CPU grown) and turns the
# polls back on for the rest of the burst.
COMPILER_POLL_QUIET_S = 10.0


class CompilerWatch(object):
    """Compiler processes started below the watched processes since the last frame."""

    def __init__(self):
        self.targets = {}  # pid polled -> (the watched process it belongs to, its start ticks)
        self.known = set()  # child pids already looked at
        self.seen = {}  # watched pid -> set of compiler names
        self.new_pids = PidCursor()  # no pid handed out since the last poll: no new child to look at
        self.files = ProcFiles()  # the targets' children files, kept open between polls

    def set_targets(self, tree):
        """`tree`: {watched pid: [Stat of the watched process and its Python descendants]}."""
        targets = {}
        for top, stats in tree.items():
            for s in stats:
                if len(targets) < COMPILER_POLL_TARGETS and (s.pid == top or s.comm.startswith("python")):
                    targets[s.pid] = (top, s.ticks)
        self.targets = targets

    def poll(self):
        if not self.new_pids.changed():
            return
        for pid, (top, ticks) in list(self.targets.items()):
            raw = self.files.read("/proc/%d/task/%d/children" % (pid, pid), ticks)
            if not raw:
                continue
            for child in raw.split():
                c = int(child)
                if c in self.known:
                    continue
                self.known.add(c)
                comm = read_raw("/proc/%d/comm" % c)
                name = comm.strip().decode("utf-8", "replace") if comm else ""
                if name in COMPILER_COMMS:
                    self.seen.setdefault(top, set()).add(name)

    def take(self, pid):
        return sorted(self.seen.pop(pid, ()))

    def frame_done(self):
        self.seen = {}
        self.files.end_sample()  # closes the files of processes no longer polled
        if len(self.known) > 4096:
            self.known = set()


def proc_info(stat, cache, descendants, now, refresh, compilers_seen=(), deltas=None):
    """A watched process's entry in a frame, its descendants' in it. `deltas` (FrameDeltas, begun for
    this frame): the facts the client has are left out, unbuilt; None: every fact, every frame."""
    facts = slow = cache.static_facts(stat.pid, stat.start)
    if now >= facts.get("slow_due", 0.0):  # (slow_facts keeps them in the static facts' dict)
        cache.slow_facts(stat.pid, stat.start, now, refresh)
    # The last sample's entry, where it was built from these very Stats and slow facts and left every fact
    # out: while the client still has them all, it is this sample's entry too, not built again (an idle
    # job's stat and its children's read the same sample after sample). Treat a frame as read-only.
    memo = facts.get("entry")  # (stat, descendants, slow_at, entry, ROOT_FACTS, [(child key, CHILD_FACTS)])
    if (memo is not None and deltas is not None and not compilers_seen and memo[0] is stat
            and memo[2] == slow["slow_at"] and len(memo[1]) == len(descendants)
            and all(map(is_, memo[1], descendants)) and deltas.known_root((stat.pid, stat.ticks), memo[4])
            and all(deltas.known_child(key, known) for key, known in memo[5])):
        return memo[3]
    cmdline = facts["cmdline"]
    kind = facts.get("kind")
    if kind is None or kind[0] != stat.comm:  # cmdline and environ are fixed for (pid, start)
        py = is_python(stat.comm, cmdline)
        kind = facts["kind"] = (stat.comm, py) + (python_unbuffered(cmdline, facts["environ"]) if py else (False, ""))
    _, py, unbuffered, reason = kind
    children = []
    child_known = []
    bare = deltas is not None  # every fact left out (the entry can stand for the next sample's)
    child_cpu = stat.ccpu
    static = cache.static
    for d in descendants:
        # d.ccpu: a worker's reaped children (short compiler runs) count too
        child_cpu += d.cpu + d.ccpu
        dfacts = static.get((d.pid, d.start)) or cache.static_facts(d.pid, d.start)
        child = {"pid": d.pid, "state": d.state, "cpu_s": d.cpu_s, "start_ticks": d.ticks}
        kept = d.child_facts
        if kept is not None and kept[0] is dfacts:
            known = kept[1]
        else:
            known = (dfacts["cmdline"][:16], dfacts["uid"], dfacts["user"], d.ppid, d.comm, d.start)  # CHILD_FACTS
            d.child_facts = (dfacts, known)
        key = (d.pid, d.ticks)
        child_known.append((key, known))
        if deltas is None or not deltas.known_child(key, known):
            bare = False
            child.update(zip(CHILD_FACTS, known))
            if deltas is not None:
                deltas.strip_child(child, key)
        children.append(child)
    entry = {
        "pid": stat.pid, "start_ticks": stat.ticks, "state": stat.state,
        "cpu_s": stat.cpu_s, "cpu_children_s": round(child_cpu, 2),
        "rss_bytes": stat.rss, "threads": stat.threads, "children": children,
    }
    if compilers_seen or deltas is None:
        entry["compilers_seen"] = list(compilers_seen)
    known = (cmdline, slow["cwd"], slow["stdout"], slow["stderr"], unbuffered, reason, py,  # ROOT_FACTS
             facts["env_readable"], facts["uid"], facts["user"], facts["dist"], stat.ppid, stat.start,
             stat.comm, stat.sid, stat.pgid)
    key = (stat.pid, stat.ticks)
    if deltas is None or not deltas.known_root(key, known):
        bare = False
        entry.update(zip(ROOT_FACTS, known))
        if deltas is not None:
            deltas.strip_root(entry, key)
    bare = bare and not compilers_seen
    facts["entry"] = (stat, descendants, slow["slow_at"], entry, known, child_known) if bare else None
    return entry


# ---------------------------------------------------------------- GPUs


def op_module_names():
    """The request handlers that came in the bundle: every ops_*.py but the shared base."""
    return [n for n in BUNDLE_MODULES if n.startswith("ops_") and n != "ops_base"]


# ---------------------------------------------------------------- logs and dirs

class Tail(object):
    """Follows one file across rotation, truncation and delete-and-recreate.

    Reads forward from where it left off, so the lines written before a huge one are never lost:
    a line (or a carriage-return frame of a progress bar) longer than LINE_CAP_BYTES keeps its
    first LINE_CAP_BYTES and the rest is dropped and reported in `cut` as [position in data,
    bytes dropped]. At most TAIL_CAP_BYTES are passed on per frame (the rest waits for the next
    one); only when more than SCAN_CAP_BYTES are waiting (the writer outruns us) are the oldest
    bytes skipped, and counted in `skipped`.
    """

    LINE_CAP_BYTES = 64 * 1024
    SCAN_CAP_BYTES = 4 * 1024 * 1024  # read at most this much of one log per frame
    BLOCK_BYTES = 64 * 1024

    def __init__(self, key, path, backlog):
        self.key = key
        self.path = path
        self.backlog = backlog
        self.fd = None  # a raw descriptor: a regular file is read with one pread() at the offset
        self.regular = True
        self.ino = None
        self.offset = 0
        self.first = True
        self.line_len = 0  # bytes of the current line (frame) passed on so far
        self.dropping = 0  # bytes of the current line dropped and not yet reported
        # While the log grows, a poll is one pread() on the kept descriptor (see poll): these are the
        # path's last stat (when, and the mtime it gave) and how many polls in a row read new bytes up
        # to the end.
        self.checked_at = 0.0
        self.mtime = None
        self.grew = 0

    def _open(self):
        fd = os.open(self.path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        self.fd, self.ino, self.regular = fd, (st.st_dev, st.st_ino), S_ISREG(st.st_mode)
        return st

    def _close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def poll(self, now=None, known=None):
        """This frame's chunk. `known(key, facts)` (FrameDeltas.known_tail): whether the client has these
        TAIL_FACTS; where it has, the growing case builds the bare chunk (key, data, size), as the deltas would
        leave it (None: every field, every frame). While the log grows (the last two polls read new bytes up to
        its end), one pread() at the offset, no stat: bytes that come mean the file was neither truncated (a read
        past the end gives nothing) nor replaced (a renamed log being written still grows: its bytes are the
        writer's); the size is where the read ended and the mtime stays the last stat's (the client
        times a growing log by its new bytes, not its mtime). A read that gives nothing, or
        TAIL_CHECK_S since the last stat, goes the full way (stat the path: rotation, deletion,
        truncation, the true mtime). A log that is quiet between lines is stat'ed first, as it was
        (trying the read first would cost it one more call a line)."""
        if now is None:
            now = time.time()
        if self.grew >= 2 and self.fd is not None and now - self.checked_at < TAIL_CHECK_S:
            # The usual case inline, as _poll_growing would take it (four calls fewer a log, a sample): one short
            # block (the end of what is there) with no line reaching LINE_CAP_BYTES. Nothing read, or a read that
            # failed: the full way below, as _poll_growing has it; anything else goes through _poll_growing.
            try:
                block = os.pread(self.fd, self.BLOCK_BYTES, self.offset)
            except OSError:
                block = b""
            n = len(block)
            if 0 < n < self.BLOCK_BYTES and not self.dropping and self.line_len + n <= self.LINE_CAP_BYTES:
                self.offset += n
                end = max(block.rfind(b"\n"), block.rfind(b"\r"))
                self.line_len = n - end - 1 if end >= 0 else self.line_len + n
                data = binascii.b2a_base64(block, newline=False).decode("ascii")
                if known is not None and known(self.key, (self.path, self.mtime, None)):
                    return {"key": self.key, "data": data, "size": self.offset}
                return {"key": self.key, "path": self.path, "data": data, "reset": False, "skipped": 0,
                        "size": self.offset, "mtime": self.mtime, "error": None, "cut": []}
            if n:
                chunk = self._poll_growing()  # (it reads the block again)
                if chunk is not None:
                    return chunk
        chunk = {"key": self.key, "path": self.path, "data": "", "reset": False, "skipped": 0,
                 "size": None, "mtime": None, "error": None, "cut": []}
        grew, self.grew = self.grew, 0
        self.checked_at = now
        out = bytearray()
        try:
            st = os.stat(self.path)
        except OSError as exc:
            chunk["error"] = exc.strerror or str(exc)
            if self.fd is not None:
                self._drain(out, chunk["cut"])  # deleted: keep what the old file still had
                self._close()
            chunk["data"] = _b64(bytes(out))
            return chunk
        chunk["size"], chunk["mtime"] = st.st_size, st.st_mtime
        self.mtime = st.st_mtime
        if self.fd is not None and (st.st_dev, st.st_ino) != self.ino:
            self._drain(out, chunk["cut"])  # rotated: finish the old file first
            self._close()
            chunk["reset"] = True
        if self.fd is None:
            try:
                st = self._open()
            except (OSError, IOError) as exc:
                chunk["error"] = exc.strerror or str(exc)
                chunk["data"] = _b64(bytes(out))
                return chunk
            start = max(0, st.st_size - self.backlog) if self.first else 0
            if not self.first:
                chunk["reset"] = True
            self.first = False
            self._new_file(start)
        elif st.st_size < self.offset:
            chunk["reset"] = True  # truncated
            self._new_file(0)
        pending = st.st_size - self.offset
        if pending > self.SCAN_CAP_BYTES:
            chunk["skipped"] = pending - self.SCAN_CAP_BYTES
            self._new_file(st.st_size - self.SCAN_CAP_BYTES)
        if pending > 0 or not S_ISREG(st.st_mode):  # nothing new: no seek, no read
            at_end = self._read(out, chunk["cut"], self.SCAN_CAP_BYTES)
            if at_end and self.regular and pending > 0:
                self.grew = grew + 1
        chunk["data"] = _b64(bytes(out))
        return chunk

    def _poll_growing(self):
        """poll's pread-only way: the chunk, or None when nothing came (then poll stats the path)."""
        start = self.offset
        out = bytearray()
        cuts = []
        try:
            at_end = self._read(out, cuts, self.SCAN_CAP_BYTES)
        except (OSError, IOError, ValueError):
            at_end = False  # what was read before the error still goes out; a full poll next
        if self.offset == start:
            return None
        size = self.offset
        if not at_end:  # more waits than one frame carries: its size from the descriptor, a full poll next
            self.grew = 0
            try:
                size = os.fstat(self.fd).st_size
            except OSError:
                size = None
        return {"key": self.key, "path": self.path, "data": _b64(bytes(out)), "reset": False, "skipped": 0,
                "size": size, "mtime": self.mtime, "error": None, "cut": cuts}

    def _new_file(self, offset):
        self.offset = offset
        self.line_len = 0
        self.dropping = 0

    def _read(self, out, cuts, budget):
        """Read up to `budget` bytes from the offset into `out`, cutting over-long lines. Returns
        whether it read up to the end of what is there now."""
        at_end = False
        while budget > 0 and len(out) < TAIL_CAP_BYTES:
            want = min(self.BLOCK_BYTES, budget)
            # pread: no seek, and a short block means the end of what is there now (no read for the EOF)
            block = os.pread(self.fd, want, self.offset) if self.regular else os.read(self.fd, want)
            if not block:
                at_end = True
                break
            budget -= len(block)
            self.offset += len(block)
            self._keep(block, out, cuts)
            if self.regular and len(block) < want:
                at_end = True
                break
        if self.dropping:
            # The long line is still being written: say so now, more may follow.
            cuts.append([len(out), self.dropping])
            self.dropping = 0
        return at_end

    def _keep(self, block, out, cuts):
        n = len(block)
        if not self.dropping and self.line_len + n <= self.LINE_CAP_BYTES:
            # No line in this block can reach the cap (the usual case): the block as it is, and the
            # current line is what follows its last newline or carriage return.
            out += block
            end = max(block.rfind(b"\n"), block.rfind(b"\r"))
            self.line_len = n - end - 1 if end >= 0 else self.line_len + n
            return
        i = 0
        while i < n:
            nl, cr = block.find(b"\n", i), block.find(b"\r", i)
            end = min(x for x in (nl, cr, n) if x >= 0)
            room = max(0, self.LINE_CAP_BYTES - self.line_len)
            take = min(end - i, room)
            out += block[i:i + take]
            self.line_len += take
            self.dropping += end - i - take
            if end == n:
                break
            if self.dropping:
                cuts.append([len(out), self.dropping])
                self.dropping = 0
            out += block[end:end + 1]  # a newline ends the line; a carriage return starts a new frame
            self.line_len = 0
            i = end + 1

    def _drain(self, out, cuts):
        try:
            self._read(out, cuts, self.SCAN_CAP_BYTES)
        except (OSError, IOError, ValueError):
            pass

    def close(self):
        self._close()


def _b64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii") if data else ""


def dir_stat(key, path):
    out = {"key": key, "path": path, "exists": False, "files": 0, "total_bytes": 0,
           "newest_mtime": None, "newest_name": None, "error": None}
    try:
        entries = list(os.scandir(path))[:DIR_ENTRY_CAP]
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    out["exists"] = True
    seen = 0
    for entry in entries:
        candidates = [entry]
        try:
            if entry.is_dir(follow_symlinks=False):
                # checkpoints are often folders (checkpoint-500/): look one level in
                candidates = list(os.scandir(entry.path))[:200] or [entry]
        except OSError:
            pass
        for item in candidates:
            seen += 1
            if seen > DIR_ENTRY_CAP:
                break
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if item.is_file(follow_symlinks=False):
                out["files"] += 1
                out["total_bytes"] += st.st_size
            if out["newest_mtime"] is None or st.st_mtime > out["newest_mtime"]:
                out["newest_mtime"] = st.st_mtime
                out["newest_name"] = os.path.relpath(item.path, path)
    return out


# ---------------------------------------------------------------- the loop

class LeanPlan(object):
    """What a full sample leaves for the lean ones after it (Probe.lean_sample): the watched processes'
    stat descriptor keys and the facts a change of which the full path must see, in the frame's order."""

    __slots__ = ("gen", "gpu_pids", "roots", "candidates", "found", "tree_pids", "tails", "dirs")

    def __init__(self, gen, gpu_pids, roots, candidates, found, tree_pids, tails, dirs):
        self.gen = gen  # the wants it was made for (Probe.wants_gen)
        self.gpu_pids = gpu_pids
        # [(pid, its ProcFiles key, (ppid, start ticks, comm, sid, pgid), its facts (ProcCache.static_facts))]
        self.roots = roots
        self.candidates = candidates  # the frame's (the same while the look at new pids finds none)
        self.found = found  # the candidates' pids (JobCandidates.found), as the frame's look left them
        self.tree_pids = tree_pids  # every watched process and descendant: a new child of one is a full sample's
        self.tails = tails
        self.dirs = dirs


class Probe(object):
    def __init__(self, options):
        self.interval = float(options.get("interval", 1.0))
        # A full /proc walk costs ~5 us per process on the host: amortise it.
        self.scan_interval = float(options.get("scan_interval", 5.0))
        self.slow_refresh = float(options.get("slow_refresh", 5.0))
        self.backlog = int(options.get("tail_backlog_bytes", 64 * 1024))
        self.prefer = options.get("gpu_source", "auto")
        self.lock = threading.Lock()
        self.want_pids = set()
        self.tails = {}
        self.dirs = {}
        self.matches = {}
        self.cache = ProcCache()
        self.files = ProcFiles()
        self.children_of = {}
        # The kernel's children lists of the last sample, kept while no pid is handed out (a process
        # adopted by a watched subreaper meanwhile waits for the next pid or walk).
        self.child_lists = {}  # (pid, start ticks) -> ([child pids], the children files read for them)
        self.child_lists_used = {}
        self.sample_pids = PidCursor()
        self.pids_handed_out = True
        self.tasks = PidCursor(tasks=True)
        self.tasks_moved = True  # this sample's tasks.changed
        # pid -> (Stat, read at, idle at its last two reads, its ProcFiles key) of the descendants: the last
        # sample's, and this one's (see IDLE_CHILD_READ_S)
        self.child_reads = {}
        self.child_reads_now = {}
        # (pid, start ticks) of a watched process -> its descendants' pids in walk order as the last walk found
        # them (see TREE_WALK_AT_LEAST_S). The last sample's, and this one's.
        self.trees = {}
        self.trees_now = {}
        self.walk_trees = True  # this sample walks every tree (the mark moved, a scan ran, or the safety net is due)
        self.trees_walked_at = 0.0  # when every tree was last walked
        self.now = 0.0  # the sample's time
        self.watched_now = set()  # the sample's watched pids
        self.tree_marks = {}  # watched pid -> (start, descendants, reaped children's CPU) last sample
        self.trees_moved_at = 0.0  # when a watched tree last started (or reaped) a process
        self.scanned_procs = 0
        self.last_scan = 0.0  # when a walk was last due (0: one is due now)
        self.wants_gen = 0  # bumped by each set_wants
        self.last_walk = 0.0  # when every process's stat was last read (a full walk)
        self.walk_pids = PidCursor()
        self.cpu_count = os.cpu_count()
        self.watched_keys = {}  # pid -> start of processes reported last frame
        self.match_pids = {}
        # Send fixed process facts only when they change: the client asks for it at start (an
        # older client never does and gets every fact every frame).
        self.deltas = FrameDeltas() if options.get("fact_deltas") else None
        self.candidates = JobCandidates()
        self.compiler_watch = CompilerWatch()
        self.compiler_polls = int(options.get("compiler_polls", 3))  # between two samples
        self.candidate_pids = {}  # pid -> why it is a job before it uses a GPU (last scan)
        self.gpu = NoGpu()
        self.host_cpu = HostCpu()
        # (through a lambda: HostCpu.percent as the class has it at each read, wrapped or not)
        # The first read has nothing to compare with: the second sample gives a first figure (over its interval).
        self.host_cpu_pct = EverySoOften(lambda: self.host_cpu.percent(), until_known=True)
        self.host_memory = EverySoOften(read_meminfo)
        self.own_cpu = EverySoOften(own_cpu_s)
        # A client that vanished without closing our stdin (a blackholed link) is noticed by its
        # missing pings: we then exit rather than linger on the host.
        self.idle_exit = float(options.get("idle_exit_s", 0) or 0)
        self.last_input = time.time()
        # The lean steady sample (lean_sample): allowed unless the options say not (a test compares both paths).
        self.lean_allowed = bool(options.get("lean_sample", True))
        self.lean = None  # LeanPlan, made by each full sample
        self.lean_samples = 0
        self.looked = False  # whether the sample's look at the new pids ran (look_at_new_pids)

    # settings, changed by requests (the dispatcher calls these on its reading thread) --------
    def set_wants(self, req):
        """What to watch besides GPU processes: pids, log tails, output dirs, cmdline matches."""
        with self.lock:
            self.want_pids = set(int(p) for p in req.get("pids", []))
            tails = req.get("tails", {})
            for key in list(self.tails):
                if key not in tails or tails[key] != self.tails[key].path:
                    self.tails.pop(key).close()
            for key, path in tails.items():
                if key not in self.tails:
                    self.tails[key] = Tail(key, path, self.backlog)
            self.dirs = dict(req.get("dirs", {}))
            self.matches = {}
            for key, spec in req.get("matches", {}).items():
                try:
                    rx = re.compile(spec["regex"]) if spec.get("regex") else None
                except re.error:
                    rx = None
                self.matches[key] = (rx, spec.get("pid_file"))
            self.last_scan = 0.0  # scan at the next tick
            self.wants_gen += 1

    def set_interval(self, seconds):
        self.interval = max(0.1, float(seconds))

    def heard_from_client(self):
        self.last_input = time.time()

    # sampling -------------------------------------------------------
    def scan(self, now, full=True):
        """/proc walk: parent links (for descendants) and cmdline matches.

        `full`: every process's stat is read. Otherwise only pids not seen before are (a pid's
        parent, start and name stay as they were while it lives): a pid reused within one walk
        interval, or a process adopted by another, is seen right at the next full walk."""
        known = {} if full else self.candidates.seen
        children_of = {}
        live = {}
        with self.lock:
            matches = dict(self.matches)
            gen = self.wants_gen
        matched = dict((key, []) for key in matches)
        me = self.candidates.me
        seen = {}
        listed = all_pids()
        for pid in listed:
            parent = known.get(pid) or read_parent(pid)
            if parent is None:
                continue
            ppid, start, comm = parent
            live[pid] = start
            if pid != me:
                seen[pid] = (ppid, start, comm)
            children_of.setdefault(ppid, []).append(pid)
            for key, (rx, _) in matches.items():
                if rx is None or pid == me:
                    continue
                cmd = " ".join(self.cache.static_facts(pid, start)["cmdline"])
                if cmd and rx.search(cmd):
                    matched[key].append(pid)
        for key, (_, pid_file) in matches.items():
            if pid_file:
                try:
                    pid = int(read_text(pid_file, 64).strip())
                    if pid in live:
                        matched[key].append(pid)
                except (OSError, IOError, ValueError):
                    pass
        self.children_of = children_of
        self.match_pids = matched
        self.candidates.scan(seen, now)
        # The walk linked every process it listed to its parent (children_of): the candidates' next look
        # at new pids starts from this listing (none of them read twice).
        self.candidates.listed = set(listed)
        # wants that came during this walk (new matches) were not looked for: walk again at once
        self.last_scan = now if gen == self.wants_gen else 0.0
        if full:
            self.last_walk = now
            self.cpu_count = os.cpu_count()
        self.scanned_procs = len(live)
        self.cache.forget_except(set(live.items()))

    def live_children(self, s, fresh=False):
        """Children of one process right now, from /proc/PID/task/TID/children.

        The full /proc scan runs every few seconds; compiler runs (gcc, cc1, ptxas) last less than
        that, so each sample also asks the kernel directly. A process with many threads (the
        training process itself) is asked through its main thread only, to keep a sample cheap.
        `fresh`: read its children files even where the last list could stand (an adoption).
        """
        key = (s.pid, s.ticks)
        known = self.child_lists.get(key)
        self.child_lists_used[key] = known
        new_parents = self.candidates.new_parents
        if known is not None and not fresh and (not self.pids_handed_out or
                                                (new_parents is not None and s.pid not in new_parents)):
            # No process was started since the last sample, or none by this one (the candidates' look
            # at the new pids found their parents): it has no new child. Its children files stay open
            # for the next sample that must read them (not closed and reopened).
            self.files.keep(known[1])
            return known[0]
        tids = [s.pid]
        if 1 < s.threads <= SMALL_THREAD_COUNT:
            try:
                tids = [int(t) for t in os.listdir("/proc/%d/task" % s.pid)]
            except OSError:
                pass
        out = []
        paths = []
        for tid in tids:
            path = "/proc/%d/task/%d/children" % (s.pid, tid)
            paths.append(path)
            raw = self.files.read(path, s.ticks)
            if raw:
                out.extend(int(c) for c in raw.split())
        self.child_lists_used[key] = (out, [(path, s.ticks) for path in paths])
        return out

    def descendants(self, root, fresh=False):
        """Live descendants of `root` (a Stat): the last scan's links plus the kernel's now; or the last
        walk's list while loadavg's mark stands (TREE_WALK_AT_LEAST_S). `fresh`: every children list read
        again (one of the last walk's processes is gone: its children may have a new parent)."""
        key = (root.pid, root.ticks)
        last = self.trees.get(key)
        walk = fresh or self.walk_trees or last is None
        out = []
        files, kept, reads, now = self.files, self.child_reads, self.child_reads_now, self.now
        quiet = not self.tasks_moved and not fresh  # (an adopted process's stat names its new parent)
        watched = self.watched_now
        gone_matters = last is not None and not fresh
        if walk:
            seen = set([root.pid])
            stack = list(self.children_of.get(root.pid, []))
            stack.extend(self.live_children(root, fresh))
        else:
            stack = last[::-1]
        while stack and len(out) < 512:
            child = stack.pop()
            if walk:
                if child in seen:
                    continue
                seen.add(child)
            prev = kept.get(child)
            if (prev is not None and prev[2] and quiet and 0.0 <= now - prev[1] < IDLE_CHILD_READ_S
                    and child not in watched):
                # idle, and no process started or reaped since: its last read stands (IDLE_CHILD_READ_S);
                # not a watched process (a rank below its launcher): that one is read every sample
                s = prev[0]
                reads[child] = prev
                files.used.add(prev[3])  # its descriptor stays open for the read to come
            else:
                s = read_stat(child, files)
                if s is None or s.state == "Z":
                    if gone_matters and child in last:
                        return self.descendants(root, True)
                    continue
                if prev is None:
                    reads[child] = (s, now, False, ("/proc/%d/stat" % child, None))
                else:
                    p = prev[0]
                    idle = s.state == "S" and p.state == "S" and s.cpu == p.cpu and s.ticks == p.ticks
                    reads[child] = (s, now, idle, prev[3])
            out.append(s)
            if walk:
                stack.extend(self.children_of.get(s.pid, []))
                stack.extend(self.live_children(s, fresh))
        # (a sample that walks no tree keeps every children list and descriptor for the next: see sample)
        self.trees_now[key] = [s.pid for s in out] if walk else last
        return out

    def sample(self):
        now = time.time()
        # Read once: the load average and every pid cursor of this sample use these bytes.
        loadavg = PROC_LOADAVG.read()
        self.files.begin_sample()
        if self.deltas is not None:
            self.deltas.begin(now)
        frame = {"type": "sample", "t": now, "gpu_source": self.gpu.name, "gpu_error": self.gpu.error}
        try:
            if self.deltas is not None and getattr(self.gpu, "leaves_known_facts_out", False):
                gpus = self.gpu.sample(self.deltas.known_gpu)
                gpu_pids = self.gpu.pids
            else:
                gpus = self.gpu.sample()
                gpu_pids = set(p["pid"] for g in gpus for p in g["processes"])
        except Exception as exc:
            gpus = []
            gpu_pids = set()
            frame["gpu_error"] = "%s: %s" % (self.gpu.name, exc)
        frame["gpus"] = gpus
        # loadavg's marks, asked once a sample for both paths: a pid handed out (and which), a task reaped
        before = self.sample_pids.last
        self.pids_handed_out = self.sample_pids.changed(loadavg)
        self.tasks_moved = self.tasks.changed(loadavg)
        span = handed_out_span(before, self.sample_pids.last) if self.pids_handed_out else None
        self.looked = False  # whether this sample's look at the new pids ran (lean_sample runs it first)
        if self.lean is not None and self.lean_allowed:
            lean = self.lean_sample(frame, now, loadavg, gpu_pids, span)
            if lean is not None:
                return lean
            self.files.begin_sample()  # (the full path reads afresh)
        with self.lock:
            want = set(self.want_pids)
            tails = list(self.tails.values())
            dirs = sorted(self.dirs.items())
            gen = self.wants_gen
        self.now = now
        # A sample that sends facts in full again (FACT_RESEND_S) is a full one anyway: the safety walk rides on
        # it (both every 30 s: one full sample for the two, not two).
        resend = self.deltas is not None and self.deltas.resend
        self.walk_trees = self.tasks_moved or resend or now - self.trees_walked_at >= TREE_WALK_AT_LEAST_S
        watched = gpu_pids | want
        # The /proc walk (scan): every WALK_AT_LEAST_S a full one reads every process's stat (a pid reused, a
        # process adopted, the host's process count). In between, each sample where a pid was handed out looks
        # at the new pids (JobCandidates.poll: a new job is found at once, before any GPU use) and links each
        # to its parent below (children_of, walked at once: a child of a non-main thread of a process with many
        # threads is found there, not in the children files read). So a walk between two full ones adds only
        # cmdline matches: it runs, on a tick where a pid was handed out since the last, only where they are
        # wanted. (Until round 10 it ran on every such tick, a full sample with its own /proc listing each.)
        # (A tick with nothing to scan is the lean path's too: lean_sample.)
        if now - self.last_scan >= self.scan_interval:
            moved = self.walk_pids.changed(loadavg)  # asked every time, so it always covers one interval
            full = self.last_scan == 0.0 or now - self.last_walk >= WALK_AT_LEAST_S
            if full or (moved and self.matches):
                self.scan(now, full)
                self.walk_trees = True  # the links it found are followed now
            else:
                self.last_scan = now
        for pids in self.match_pids.values():
            watched |= set(pids)
        candidates = self.candidates
        if not self.looked:
            self.look_at_new_pids(now, span)
        watched |= set(self.candidate_pids)
        self.watched_now = watched
        procs = []
        current = {}
        poll_tree = {}
        marks = {}
        for pid in sorted(watched):
            s = read_stat(pid, self.files)
            if s is None or s.state == "Z":
                # a zombie has exited; only its parent has not collected it yet. (A candidate that is gone is
                # one no more, as the next walk would find: not read again.)
                candidates.found.pop(pid, None)
                continue
            current[pid] = s.start
            below = self.descendants(s)
            # Polled children of the last interval (CompilerWatch.poll) plus the ones alive now.
            seen_between = self.compiler_watch.take(pid) if self.compiler_watch.seen else ()
            procs.append(proc_info(s, self.cache, below, now, self.slow_refresh, seen_between, self.deltas))
            poll_tree[pid] = (s, below)
            # A child that came or went since the last sample, or one reaped (its CPU added to
            # its parent's children CPU): this tree is starting processes.
            # (A tree seen for the first time is not: that is the probe starting, or a job found.)
            # (the pids are the tree's list as descendants keeps it: the same list while the walk is skipped)
            marks[pid] = (s.ticks, self.trees_now[(pid, s.ticks)], s.ccpu + sum([d.ccpu for d in below]))
            if seen_between or (pid in self.tree_marks and marks[pid] != self.tree_marks[pid]):
                self.trees_moved_at = now
        self.tree_marks = marks
        if self.walk_trees:
            self.child_lists, self.child_lists_used = self.child_lists_used, {}
            self.trees_walked_at = now
        else:  # the walk's lists stand, with those of trees walked for the first time (none is dropped till a walk)
            self.child_lists.update(self.child_lists_used)
            self.child_lists_used = {}
        self.child_reads, self.child_reads_now = self.child_reads_now, {}
        self.trees, self.trees_now = self.trees_now, {}
        self.compiler_watch.frame_done()
        # The polls between samples run only while a tree starts processes (see run): none to set up otherwise.
        if self.jobs_spawning(now):
            self.compiler_watch.set_targets(dict((pid, [s] + below) for pid, (s, below) in poll_tree.items()))
        elif self.compiler_watch.targets:
            self.compiler_watch.set_targets({})
        gone = []
        for pid, start in self.watched_keys.items():
            if current.get(pid) != start:
                gone.append({"pid": pid, "start_time": start, "seen_gone_at": now})
        self.watched_keys = current
        frame["procs"] = procs
        frame["gone"] = gone
        frame["matches"] = self.match_pids
        # A sample that walks no tree closes nothing: the walk's descriptors (children files, idle descendants'
        # stat) stand for the samples to come. A watched process's own stat that fails is closed as it fails.
        self.files.end_sample(close=self.walk_trees)
        known = self.candidates.seen
        frame["candidates"] = dict((str(pid), why) for pid, why in self.candidate_pids.items()
                                   if pid in current and known.get(pid, (0, None))[1] == current[pid])
        self.finish(frame, now, loadavg, tails, dirs)
        self.lean = self.lean_plan(frame, gen, gpu_pids, tails, dirs)
        return frame

    def look_at_new_pids(self, now, span):
        """The candidates' look at the pids handed out since the last sample (JobCandidates.poll); the new
        processes linked to their parents (children_of)."""
        candidates = self.candidates
        self.candidate_pids = candidates.poll(now, self.pids_handed_out, span)
        children_of = self.children_of
        for pid, ppid in candidates.born:
            children_of.setdefault(ppid, []).append(pid)
        self.looked = True

    def lean_plan(self, frame, gen, gpu_pids, tails, dirs):
        """What the next samples read while nothing structural is due (lean_sample), or None: no lean sample
        without fact deltas (a bare entry is one whose facts the client has) or a mark to read."""
        if self.deltas is None or self.tasks.fd is None or self.tasks.last is None:
            return None
        roots = []
        static = self.cache.static
        for proc in frame["procs"]:
            pid = proc["pid"]
            s = self.files.parsed.get("/proc/%d/stat" % pid)
            if s is None or s[1].ticks != proc["start_ticks"]:
                return None
            s = s[1]
            facts = static.get((pid, s.start))
            if facts is None or "slow_at" not in facts:
                return None
            roots.append((pid, ("/proc/%d/stat" % pid, None), (s.ppid, s.ticks, s.comm, s.sid, s.pgid), facts))
        tree_pids = set(pid for pid, _ in self.trees)
        for pids in self.trees.values():
            tree_pids.update(pids)
        return LeanPlan(gen, frozenset(gpu_pids), roots, frame["candidates"], frozenset(self.candidate_pids),
                        tree_pids, tails, dirs)

    def lean_sample(self, frame, now, loadavg, gpu_pids, span):
        """The sample while nothing structural is due: no /proc walk (a scan's tick with nothing to walk is
        taken here), tree walk or fact resend due, no candidate undecided, no compiler poll running, the same
        wants and GPU processes. One loop over the watched processes' kept stat descriptors and their last
        walk's descendants builds the entries the full path would (each fact known to the client: the bare
        entry); a process's slow facts due are read again in it. Where loadavg's mark moved (a process started
        or reaped somewhere), the look at the new pids runs first, and every descendant is read: the trees
        stand unless a new process's parent is in one (or a descendant reads gone, below). The frame, or None
        where anything reads unusual (a read failing, a zombie, a process's parent, start, name, session or
        group changed, its cwd or output moved, a reaped child's CPU, a new process below a watched one or a new
        job candidate): the full path then takes the sample, reading afresh (the look's result stands)."""
        plan = self.lean
        moved = self.tasks_moved
        # (each due time tested as the full path tests it, the same float expression)
        if (plan.gen != self.wants_gen or loadavg is None
                or gpu_pids != plan.gpu_pids or now - self.trees_walked_at >= TREE_WALK_AT_LEAST_S
                or self.deltas.resend or now - self.trees_moved_at < COMPILER_POLL_QUIET_S
                or self.compiler_watch.targets or self.compiler_watch.seen or self.compiler_watch.files.fds
                or self.candidates.undecided or self.candidates.files.fds):
            return None
        tick = now - self.last_scan >= self.scan_interval
        if tick and (self.last_scan == 0.0 or now - self.last_walk >= WALK_AT_LEAST_S
                     or (self.matches and self.walk_pids.read(loadavg) != self.walk_pids.last)):
            return None  # a walk is due: the full one, or cmdline matches with a pid handed out since the last
        if moved:
            self.look_at_new_pids(now, span)
            new_parents = self.candidates.new_parents
            if (new_parents is None or not new_parents.isdisjoint(plan.tree_pids)
                    or self.candidate_pids.keys() != plan.found):
                return None
        files = self.files
        cache, refresh = self.cache, self.slow_refresh
        kept, trees, watched = self.child_reads, self.trees, self.watched_now
        marks = self.tree_marks
        reads = {}
        procs = []
        for pid, key, fixed, facts in plan.roots:
            s = files.kept_stat(key, pid)
            if s is None:
                return None
            if s.state == "Z" or (s.ppid, s.ticks, s.comm, s.sid, s.pgid) != fixed:
                return None
            if now >= facts["slow_due"]:  # as proc_info has it: the client's facts must still hold
                slow = (facts["cwd"], facts["stdout"], facts["stderr"])
                cache.slow_facts(pid, s.start, now, refresh)
                if (facts["cwd"], facts["stdout"], facts["stderr"]) != slow:
                    return None
            pids = trees.get((pid, s.ticks))
            if pids is None:
                return None
            below = []
            children = []
            child_cpu = s.ccpu
            for child in pids:
                prev = kept.get(child)
                if prev is None:
                    return None
                if not moved and prev[2] and 0.0 <= now - prev[1] < IDLE_CHILD_READ_S and child not in watched:
                    d = prev[0]  # idle: its last read stands (IDLE_CHILD_READ_S), as descendants has it
                    reads[child] = prev
                else:
                    d = files.kept_stat(prev[3], child)
                    if d is None:
                        return None
                    p = prev[0]
                    if d.state == "Z" or d.ppid != p.ppid or d.ticks != p.ticks or d.comm != p.comm:
                        return None
                    reads[child] = (d, now, d.state == "S" and p.state == "S" and d.cpu == p.cpu, prev[3])
                below.append(d)
                child_cpu += d.cpu + d.ccpu
                children.append({"pid": d.pid, "state": d.state, "cpu_s": d.cpu_s, "start_ticks": d.ticks})
            # (as the full path sums it: a reaped child's CPU moved the tree's mark, a tree starting processes)
            if marks.get(pid) != (s.ticks, pids, s.ccpu + sum([d.ccpu for d in below])):
                return None
            procs.append({"pid": pid, "start_ticks": s.ticks, "state": s.state, "cpu_s": s.cpu_s,
                          "cpu_children_s": round(child_cpu, 2), "rss_bytes": s.rss, "threads": s.threads,
                          "children": children})
        # Nothing unusual: what the full path would have kept for the next sample.
        kept_roots, kept_children = self.deltas.kept_roots, self.deltas.kept_children
        for proc in procs:
            kept_roots[(proc["pid"], proc["start_ticks"])] = True
            for child in proc["children"]:
                kept_children[(child["pid"], child["start_ticks"])] = True
        self.child_reads = reads
        self.now = now
        if tick:  # as the full path's tick with nothing to scan
            self.walk_pids.changed(loadavg)
            self.last_scan = now
        self.walk_trees = False
        if not self.looked:
            self.candidates.new_parents = set()  # (no pid handed out: no process started)
        self.lean_samples += 1
        frame["procs"] = procs
        frame["gone"] = []
        frame["matches"] = self.match_pids
        frame["candidates"] = plan.candidates
        return self.finish(frame, now, loadavg, plan.tails, plan.dirs)

    def finish(self, frame, now, loadavg, tails, dirs):
        """The frame's fields after its processes, the same on both paths (the key order is the wire's)."""
        known = None if self.deltas is None else self.deltas.known_tail
        frame["tails"] = [t.poll(now, known) for t in tails]
        frame["dirs"] = [dir_stat(k, p) for k, p in dirs]
        frame["probe_cpu_s"] = self.own_cpu.get(now)  # our own cost, for the overhead figure
        frame["scanned_procs"] = self.scanned_procs
        load = load1(loadavg)
        if load is not None:
            frame["load1"] = load
        # What top shows first: host CPU busy %, RAM used/total; and the driver beside the GPU model.
        frame["cpu_pct"] = self.host_cpu_pct.get(now)  # a HOST_SLOW_READ_S average, repeated in between
        frame["cpu_count"] = self.cpu_count  # read again at each /proc walk (CPUs rarely come and go)
        frame["mem_total_kib"], frame["mem_avail_kib"] = self.host_memory.get(now)
        frame["driver"] = getattr(self.gpu, "driver", None)
        if self.deltas is not None:
            self.deltas.apply(frame, now, procs_done=True)
        return frame

    def jobs_spawning(self, now=None):
        """Did a watched tree start processes lately (the polls between samples can find something)?"""
        return (time.time() if now is None else now) - self.trees_moved_at < COMPILER_POLL_QUIET_S

    def exit_when_idle(self):
        # Wakes when the deadline can have passed, not every second: a wakeup is a cost of its own.
        while True:
            left = self.last_input + self.idle_exit - time.time()
            if left < 0:
                shutdown(0)
            time.sleep(max(0.05, left + 0.01))

    def run(self):
        self.gpu = open_gpu_source(self.prefer, self.interval)
        dispatch = importlib.import_module("dispatch")
        ops, op_errors = dispatch.load_ops(importlib.import_module, op_module_names())
        dispatcher = dispatch.Dispatcher(self, emit, ops, op_errors)
        emit({"type": "hello", "pid": os.getpid(), "python": sys.version.split()[0],
              "hostname": os.uname()[1], "gpu_source": self.gpu.name,
              "gpu_error": self.gpu.error, "cpu_count": os.cpu_count(), "boot_time": BOOT_TIME,
              "clk_tck": CLK_TCK, "ops": sorted(ops), "op_errors": op_errors,
              "fact_deltas": self.deltas is not None})
        reader = threading.Thread(target=dispatcher.read_requests,
                                  args=(sys.stdin.buffer, self.heard_from_client, lambda: shutdown(0)))
        reader.daemon = True
        reader.start()
        if self.idle_exit > 0:
            threading.Thread(target=self.exit_when_idle, daemon=True).start()
        next_tick = time.time()
        while True:
            emit(self.sample())
            next_tick += self.interval
            delay = next_tick - time.time()
            if delay < 0:
                next_tick = time.time()  # fell behind (suspended?): don't burst
                delay = 0
            polls = self.compiler_polls if self.compiler_watch.targets and self.jobs_spawning() else 0
            for _ in range(polls):
                time.sleep(delay / (polls + 1))
                self.compiler_watch.poll()
            time.sleep(max(0.0, next_tick - time.time()))


def main():
    # A terminal hangup or a closed pipe ends us quietly; SIGTERM too.
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        try:
            signal.signal(sig, lambda *_: shutdown(0))
        except (OSError, ValueError):
            pass
    options = BUNDLE.get("options", {})
    try:
        Probe(options).run()
    except KeyboardInterrupt:
        shutdown(0)
    except Exception as exc:
        emit({"type": "fatal", "error": "%s: %s" % (type(exc).__name__, exc)})
        shutdown(3)


if __name__ in ("__main__", "__gpuwatch_probe__"):
    main()
