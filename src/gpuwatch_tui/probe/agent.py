# gpuwatch probe: runs ON a watched host, shipped over the SSH channel at connect.
#
# Standard library only, Python 3.6+, Linux /proc. It never installs anything and writes no
# files. It reads newline-delimited JSON requests on stdin and writes newline-delimited JSON
# frames on stdout, and it exits as soon as stdin closes, so a dropped connection cannot
# leave it behind.
#
# When shipped, the bundle puts BUNDLE = {"modules": {...}, "options": {...}} in globals: every other
# module of the probe comes in it, by the plain name it is imported as here (see ShippedModules).
import importlib
import importlib.machinery
import os
import re
import signal
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

from candidates import JobCandidates  # noqa: E402 - shipped: found through the finder above
from compiler_watch import COMPILER_POLL_QUIET_S, CompilerWatch  # noqa: E402
from frame_deltas import FrameDeltas  # noqa: E402
from gpu_choice import NoGpu, open_gpu_source  # noqa: E402
from host_facts import BOOT_TIME, CLK_TCK, PROC_LOADAVG, HostReadings, load1, read_text  # noqa: E402
from output import emit, shutdown  # noqa: E402
from process_facts import ProcCache, proc_info  # noqa: E402
from procfs import PidCursor, ProcFiles, all_pids, handed_out_span, read_parent, read_stat  # noqa: E402
from tails import Tail, dir_stat  # noqa: E402

SMALL_THREAD_COUNT = 16  # processes with at most this many threads have every thread's children read


# Every process's stat is read again this often (a full /proc walk); in between, every new pid is looked at at
# the sample after it was handed out (JobCandidates.poll). What only a full walk sees: a pid that ended and
# was handed out again between two looks (the pid space wrapping within a second), a process adopted by
# another (trees follow adoption themselves: TREE_WALK_AT_LEAST_S), and the host's process count. A full
# walk reads ~200 stats on an idle VM, 3.5 ms of CPU on the H200 host; a busy node has thousands of processes.
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
# A watched process's descendants are not walked again (no children list,
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
# sample, and any other case this reasoning missed is picked up within this interval. Not shorter: each
# walk is a full sample (Probe.lean_sample cannot walk), and every other reason to walk is read at the sample
# it happens.
TREE_WALK_AT_LEAST_S = 30.0


def op_module_names():
    """The request handlers that came in the bundle: every ops_*.py but the shared base."""
    return [n for n in BUNDLE_MODULES if n.startswith("ops_") and n != "ops_base"]


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
        self.host = HostReadings()
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
            self.host.count_cpus()
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
        # wanted.
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
        host = self.host
        frame["probe_cpu_s"] = host.own_cpu.get(now)
        frame["scanned_procs"] = self.scanned_procs
        load = load1(loadavg)
        if load is not None:
            frame["load1"] = load
        # What top shows first: host CPU busy %, RAM used/total; and the driver beside the GPU model.
        frame["cpu_pct"] = host.cpu_pct.get(now)  # a HOST_SLOW_READ_S average, repeated in between
        frame["cpu_count"] = host.cpu_count
        frame["mem_total_kib"], frame["mem_avail_kib"] = host.memory.get(now)
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
