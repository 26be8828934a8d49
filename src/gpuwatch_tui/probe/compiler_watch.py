# gpuwatch probe: compiler runs below the watched processes, polled between samples.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "compiler_watch".
from procfs import PidCursor, ProcFiles, read_raw
from wire import COMPILER_NAMES


# A first compile can take 3 s and its compiler runs (g++, cc1plus, ptxas) less than one sample
# interval each: between samples the watched processes' children are polled a few times, and any
# compiler seen is reported with the next frame.
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
                if name in COMPILER_NAMES:
                    self.seen.setdefault(top, set()).add(name)

    def take(self, pid):
        return sorted(self.seen.pop(pid, ()))

    def frame_done(self):
        self.seen = {}
        self.files.end_sample()  # closes the files of processes no longer polled
        if len(self.known) > 4096:
            self.known = set()
