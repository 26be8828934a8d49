# gpuwatch probe: host-wide facts: boot time, CPU busy share, memory, load average, the
# probe's own CPU time; read through descriptors kept open, the slow ones every few seconds.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "host_facts".
import os
import time


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_text(path, limit=65536):
    with open(path, "rb") as f:
        return f.read(limit).decode("utf-8", "replace")


def boot_time():
    for line in read_text("/proc/stat", 1 << 20).splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return time.time() - float(read_text("/proc/uptime").split()[0])


BOOT_TIME = boot_time()


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


class HostReadings(object):
    """The host-wide figures of a sample frame besides the load average: CPU busy %, CPU count, RAM and the
    probe's own CPU time, each read only as often as it moves (HOST_SLOW_READ_S; the CPU count at each full
    /proc walk: count_cpus)."""

    def __init__(self):
        self.cpu_count = os.cpu_count()
        self.cpu = HostCpu()
        # (through a lambda: HostCpu.percent as the class has it at each read, wrapped or not)
        # The first read has nothing to compare with: the second sample gives a first figure (over its interval).
        self.cpu_pct = EverySoOften(lambda: self.cpu.percent(), until_known=True)
        self.memory = EverySoOften(read_meminfo)
        self.own_cpu = EverySoOften(own_cpu_s)  # our own cost, for the overhead figure

    def count_cpus(self):
        self.cpu_count = os.cpu_count()
