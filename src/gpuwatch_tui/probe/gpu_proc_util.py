# gpuwatch probe: each process's share of a GPU that several processes share (its SM %), so that a job is
# judged by its own work and not by a neighbour's: on an H200 with four jobs on one GPU, the whole GPU's
# utilisation read a first torch.compile as training and a hung job as busy.
#
# NVML: nvmlDeviceGetProcessUtilization returns, per process that ran kernels since the timestamp given, its
# SM % (an idle process holding a context is left out: 0 %; no process at all is NVML_ERROR_NOT_FOUND). On an
# H200 it cost 1.5-4.6 ms a call from Python (nvidia-ml-py's wrapper: two calls, one to size the buffer; one
# here, into a buffer kept) against ~0.9 ms for the probe's whole 1 s sample there, so it is read only for
# GPUs with more than one process, one GPU a read, and the reads are spaced by what they cost: the time they
# take averages at most BUDGET_S_PER_S of each second, which keeps the probe near its 1 ms a sample (at
# 4.6 ms a call: one read per 31 s; at 1.5 ms, per 10 s). A GPU is read at most every MIN_EVERY_S (a cheap
# driver reads every shared GPU that often), and the least recently read shared GPU goes first; a GPU with a
# process its last read did not see is read at once (processes start seldom). A read's figures are kept until
# the GPU's next read is well overdue (KEEP_S, or three rounds of the shared GPUs).
#
# nvidia-smi: `nvidia-smi pmon -c 1 -s u` (one sample of every GPU's processes, ~1 s and a process start
# each: PMON_EVERY_S apart at least), parsed by its header line (columns move between driver versions).
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "gpu_proc_util".
import ctypes
import time

BUDGET_S_PER_S = 0.00015  # of each second, what the reads may take on average
ASSUMED_COST_S = 0.003  # a read's cost before one was measured (the H200's middle)
MIN_EVERY_S = 2.0
KEEP_S = 60.0
PMON_EVERY_S = 15.0
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
MAX_SAMPLES = 1024  # a buffer never grows past this many processes


class ProcessUtilizationSample(ctypes.Structure):
    """nvmlProcessUtilizationSample_t."""
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


def sm_by_pid(samples):
    """{pid: SM %} of (pid, sm) samples: a pid sampled more than once reads as its mean."""
    sums, counts = {}, {}
    for pid, sm in samples:
        sums[pid] = sums.get(pid, 0) + sm
        counts[pid] = counts.get(pid, 0) + 1
    return dict((pid, round(sums[pid] / float(counts[pid]), 1)) for pid in sums)


class ProcUtilReader(object):
    """Per GPU: the SM % of each process, as of its last read. `due(shared, now)` reads the one shared GPU
    whose turn it is, if the pace allows; `annotated(i, procs, now)` gives GPU i's process entries with
    their "sm_pct" (None where not known), the same list object while nothing changed."""

    def __init__(self, nvml, handles):
        self.fn = nvml._nvmlGetFunctionPointer("nvmlDeviceGetProcessUtilization")  # raises where absent
        self.handles = handles
        n = len(handles)
        self.supported = [True] * n
        self.last_seen = [0] * n  # the newest sample's timestamp of each GPU (NVML's CPU clock, us)
        self.read_at = [None] * n
        # Per GPU: (pids on its list when read, {pid: SM %}) of the last read, or None
        self.figures = [None] * n
        self.version = [0] * n  # moves with each read and when figures expire
        self.cache = [None] * n  # (input list, version, annotated list)
        self.size = 64
        self.buf = (ProcessUtilizationSample * self.size)()
        self.next_at = -1.0
        self.cost = ASSUMED_COST_S  # the reads' running mean cost
        self.cost_s = 0.0  # time spent in reads so far (the probe's cost, for the benchmark)
        self.reads = 0
        self.keep_s = KEEP_S  # how long figures stay: a round of the shared GPUs at the reads' pace, thrice

    def due(self, shared, now):
        """Read one GPU of `shared` ({index: its pids} of GPUs with more than one process) if the pace allows.
        A GPU with a process its last read did not see (one that just started there) is read first, and
        without waiting for the pace: until then that process has no share, and its job would be judged by
        the whole GPU's figures (a start-up beside a busy neighbour reading as busy). Processes start seldom."""
        if not shared:
            return
        best = None
        newcomer = False
        for i in shared:
            if not self.supported[i]:
                continue
            at = self.read_at[i]
            if at is not None and now - at < MIN_EVERY_S:
                continue
            fig = self.figures[i]
            if fig is None or not fig[0].issuperset(shared[i]):
                if not newcomer or at is None or (self.read_at[best] is not None and at < self.read_at[best]):
                    best, newcomer = i, True
                continue
            if newcomer or now < self.next_at:
                continue
            if best is None or at is None or (self.read_at[best] is not None and at < self.read_at[best]):
                best = i
        if best is None:
            return
        self.keep_s = max(KEEP_S, 3.0 * len(shared) * max(MIN_EVERY_S, self.cost / BUDGET_S_PER_S))
        pids = shared[best]
        t0 = time.perf_counter()
        got = self.read(best)
        took = time.perf_counter() - t0
        self.cost_s += took
        self.reads += 1
        self.cost = took if self.reads == 1 else 0.8 * self.cost + 0.2 * took
        self.next_at = now + self.cost / BUDGET_S_PER_S
        self.read_at[best] = now
        if got is not None:
            self.figures[best] = (frozenset(pids), got)
            self.version[best] += 1

    def read(self, i):
        """{pid: SM %} of GPU i since its last read; None where NVML refused (a GPU that refuses it is
        not asked again)."""
        count = ctypes.c_uint(self.size)
        rc = self.fn(self.handles[i], self.buf, ctypes.byref(count), ctypes.c_ulonglong(self.last_seen[i]))
        if rc == NVML_ERROR_INSUFFICIENT_SIZE and count.value <= MAX_SAMPLES:
            self.size = max(count.value, self.size * 2)
            self.buf = (ProcessUtilizationSample * self.size)()
            count = ctypes.c_uint(self.size)
            rc = self.fn(self.handles[i], self.buf, ctypes.byref(count), ctypes.c_ulonglong(self.last_seen[i]))
        if rc == NVML_ERROR_NOT_FOUND:
            return {}  # no process ran kernels since the last read
        if rc != 0:
            self.supported[i] = False
            return None
        samples = []
        newest = self.last_seen[i]
        for k in range(min(count.value, self.size)):
            s = self.buf[k]
            samples.append((int(s.pid), int(s.smUtil)))
            if s.timeStamp > newest:
                newest = s.timeStamp
        self.last_seen[i] = newest
        return sm_by_pid(samples)

    def annotated(self, i, procs, now):
        """GPU i's process entries with "sm_pct": the process's SM % where the last read (not older than
        `keep_s`) saw it on the GPU (0 where it ran nothing), None otherwise. `procs` itself while there is
        nothing to add."""
        fig = self.figures[i]
        if fig is not None and (len(procs) < 2 or now - self.read_at[i] > self.keep_s):
            self.figures[i] = fig = None  # alone on its GPU now, or too old
            self.version[i] += 1
        if fig is None:
            return procs
        cached = self.cache[i]
        if cached is not None and cached[0] is procs and cached[1] == self.version[i]:
            return cached[2]
        seen, sm = fig
        out = []
        for p in procs:
            q = dict(p)
            pid = p["pid"]
            q["sm_pct"] = sm.get(pid, 0) if pid in seen else None
            out.append(q)
        self.cache[i] = (procs, self.version[i], out)
        return out


def parse_pmon(text):
    """{GPU index: {pid: SM %}} from `nvidia-smi pmon -s u` output: a process whose SM column is "-" had
    no sample (0 %); a GPU with no process has a "-" pid. The columns are found by the "# gpu pid ..."
    header line."""
    cols = None
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "#":
            names = [f.lower() for f in fields[1:]]
            if cols is None and "gpu" in names and "pid" in names and "sm" in names:
                cols = (names.index("gpu"), names.index("pid"), names.index("sm"))
            continue
        if cols is None or len(fields) <= max(cols):
            continue
        try:
            gpu = int(fields[cols[0]])
        except ValueError:
            continue
        procs = out.setdefault(gpu, {})
        try:
            pid = int(fields[cols[1]])
        except ValueError:
            continue  # "-": no process on this GPU
        sm = fields[cols[2]]
        if sm == "-":
            value = 0.0  # no sample in the window: it ran nothing
        else:
            try:
                value = float(sm)
            except ValueError:
                continue
        procs[pid] = max(value, procs.get(pid, 0.0))
    return out
