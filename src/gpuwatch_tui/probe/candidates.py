# gpuwatch probe: job candidates: Python processes that are jobs before they touch a GPU.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "candidates".
import os

from procfs import SPAN_LOOK_MAX, ProcFiles, all_pids, maps_have, pid_leaders, read_parent, read_vsize


# A job is seen from its first sample, not only once it opens a CUDA context (seconds later): a Python
# process whose stdout goes to a file and that has the torch / CUDA / NCCL libraries mapped, or one a
# launcher started, is reported as a job candidate.
CANDIDATE_LIBS = (b"libtorch", b"libcudart", b"libnccl")
LAUNCHER_COMMS = frozenset(("pt_elastic", "torchrun", "accelerate", "deepspeed", "mpirun", "mpiexec", "orterun",
                            "prterun", "prted", "orted", "hydra_pmi_proxy", "horovodrun"))
CANDIDATE_YOUNG_S = 30.0  # libraries load late (import torch takes seconds): re-check while this young
CANDIDATE_CHECKS = 20  # ... at most this many times
CANDIDATE_RECHECK_S = 1.0  # ... at most this often
CANDIDATE_MIN_VSIZE = 256 << 20  # address space below which torch cannot be loaded (libtorch_cpu: 400+ MiB)


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
