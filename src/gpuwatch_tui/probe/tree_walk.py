# gpuwatch probe: the process-tree walk: which processes are below each watched one, and their stats.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "tree_walk".
# One TreeWalk per probe, used by the sampler only: the /proc walk (scan) links every process to its parent,
# the look at new pids links the ones handed out since, and each sample's descendants walk follows those
# links and the kernel's children files below every watched process, or repeats the last walk's list while
# loadavg's mark says nothing can have changed.
import os
import time

from compiler_watch import COMPILER_POLL_QUIET_S
from host_facts import read_text
from procfs import PidCursor, all_pids, handed_out_span, read_parent, read_stat

SMALL_THREAD_COUNT = 16  # processes with at most this many threads have every thread's children read


# Every process's stat is read again this often (a full /proc walk); in between, every new pid is looked at at
# the sample after it was handed out (JobCandidates.poll). What only a full walk sees: a pid that ended and
# was handed out again between two looks (the pid space wrapping within a second), a process adopted by
# another (trees follow adoption themselves: TREE_WALK_AT_LEAST_S), and the host's process count. A full
# walk reads ~200 stats on an idle VM, 3.5 ms of CPU on the H200 host; a busy node has thousands of processes.
WALK_AT_LEAST_S = 300.0
# The comm of the wrapper a restart starts a job under (ops_spawn.WRAPPER_NAME). Its child carries it from the fork
# to the exec of the job: a process seen by that name may still become the job (its cmdline, environment change).
RESTART_WRAPPER = "gpuwatch-run"
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
# walk is a full sample (LeanPath.sample cannot walk), and every other reason to walk is read at the sample
# it happens.
TREE_WALK_AT_LEAST_S = 30.0


class TreeWalk(object):
    """The tree walk's state between samples, and the walk itself. `files`, `cache`, `candidates` and
    `host` are the probe's (shared with the sample); `wants` is read for the cmdline matches."""

    def __init__(self, options, wants, files, cache, candidates, host):
        # A full /proc walk costs ~5 us per process on the host: amortise it.
        self.scan_interval = float(options.get("scan_interval", 5.0))
        self.wants = wants
        self.files = files
        self.cache = cache
        self.candidates = candidates
        self.host = host
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
        self.scanned_procs = 0  # the last walk's process count (a wire field: the host's process count)
        self.last_scan = 0.0  # when a walk was last due (0: one is due now)
        self.last_walk = 0.0  # when every process's stat was last read (a full walk)
        self.walk_pids = PidCursor()
        self.match_pids = {}
        self.pre_exec = set()  # (pid, start) of processes whose facts were read while they had the wrapper's name
        self.candidate_pids = {}  # pid -> why it is a job before it uses a GPU (last look)
        self.looked = False  # whether the sample's look at the new pids ran (look_at_new_pids)

    def scan_soon(self):
        """New wants: walk at the next tick (their cmdline matches are looked for)."""
        self.last_scan = 0.0

    def read_marks(self, loadavg):
        """loadavg's marks, asked once a sample for both paths: a pid handed out (and which), a task reaped.
        The span of pids handed out since the last sample, or None."""
        before = self.sample_pids.last
        self.pids_handed_out = self.sample_pids.changed(loadavg)
        self.tasks_moved = self.tasks.changed(loadavg)
        self.looked = False  # whether this sample's look at the new pids ran (the lean path runs it first)
        return handed_out_span(before, self.sample_pids.last) if self.pids_handed_out else None

    def begin_full(self, now, resend):
        """A full sample starts. `resend`: it sends facts in full again (FACT_RESEND_S), a full one anyway: the
        safety walk rides on it (both every 30 s: one full sample for the two, not two)."""
        self.now = now
        self.walk_trees = self.tasks_moved or resend or now - self.trees_walked_at >= TREE_WALK_AT_LEAST_S

    def scan_if_due(self, now, loadavg):
        """The /proc walk (scan): every WALK_AT_LEAST_S a full one reads every process's stat (a pid reused, a
        process adopted, the host's process count). In between, each sample where a pid was handed out looks
        at the new pids (JobCandidates.poll: a new job is found at once, before any GPU use) and links each
        to its parent below (children_of, walked at once: a child of a non-main thread of a process with many
        threads is found there, not in the children files read). So a walk between two full ones adds only
        cmdline matches: it runs, on a tick where a pid was handed out since the last, only where they are
        wanted. (A tick with nothing to scan is the lean path's too: LeanPath.sample.)"""
        if now - self.last_scan >= self.scan_interval:
            moved = self.walk_pids.changed(loadavg)  # asked every time, so it always covers one interval
            full = self.last_scan == 0.0 or now - self.last_walk >= WALK_AT_LEAST_S
            if full or (moved and self.wants.matches):
                self.scan(now, full)
                self.walk_trees = True  # the links it found are followed now
            else:
                self.last_scan = now

    def scan(self, now, full=True):
        """/proc walk: parent links (for descendants) and cmdline matches.

        `full`: every process's stat is read. Otherwise only pids not seen before are (a pid's
        parent, start and name stay as they were while it lives): a pid reused within one walk
        interval, or a process adopted by another, is seen right at the next full walk."""
        known = {} if full else self.candidates.seen
        children_of = {}
        live = {}
        matches, gen = self.wants.matches_now()
        matched = dict((key, []) for key in matches)
        me = self.candidates.me
        seen = {}
        listed = all_pids()
        for pid in listed:
            parent = known.get(pid)
            if parent is None or parent[2] == RESTART_WRAPPER:
                was = parent
                parent = read_parent(pid)  # (the wrapper's child may have exec'd the job since)
                if was is not None and parent is not None and parent[2] != was[2]:
                    self.pre_exec.add((pid, parent[1]))
            if parent is None:
                continue
            ppid, start, comm = parent
            if comm == RESTART_WRAPPER:
                self.pre_exec.add((pid, start))
            elif (pid, start) in self.pre_exec:  # exec'd since its facts were read: read them again
                self.pre_exec.discard((pid, start))
                self.cache.static.pop((pid, start), None)
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
        self.last_scan = now if gen == self.wants.gen else 0.0
        if full:
            self.last_walk = now
            self.host.count_cpus()
        self.scanned_procs = len(live)
        live_keys = set(live.items())
        self.cache.forget_except(live_keys)
        self.pre_exec &= live_keys

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

    def look_at_new_pids(self, now, span):
        """The candidates' look at the pids handed out since the last sample (JobCandidates.poll); the new
        processes linked to their parents (children_of)."""
        candidates = self.candidates
        self.candidate_pids = candidates.poll(now, self.pids_handed_out, span)
        children_of = self.children_of
        for pid, ppid in candidates.born:
            children_of.setdefault(ppid, []).append(pid)
        self.looked = True

    def mark_tree(self, pid, s, below, seen_between, now, marks):
        """A child that came or went since the last sample, or one reaped (its CPU added to its parent's
        children CPU): this tree is starting processes. (A tree seen for the first time is not: that is the
        probe starting, or a job found.) (the pids are the tree's list as descendants keeps it: the same list
        while the walk is skipped)"""
        marks[pid] = (s.ticks, self.trees_now[(pid, s.ticks)], s.ccpu + sum([d.ccpu for d in below]))
        if seen_between or (pid in self.tree_marks and marks[pid] != self.tree_marks[pid]):
            self.trees_moved_at = now

    def end_full(self, now, marks):
        """What a full sample leaves for the next."""
        self.tree_marks = marks
        if self.walk_trees:
            self.child_lists, self.child_lists_used = self.child_lists_used, {}
            self.trees_walked_at = now
        else:  # the walk's lists stand, with those of trees walked for the first time (none is dropped till a walk)
            self.child_lists.update(self.child_lists_used)
            self.child_lists_used = {}
        self.child_reads, self.child_reads_now = self.child_reads_now, {}
        self.trees, self.trees_now = self.trees_now, {}

    def jobs_spawning(self, now=None):
        """Did a watched tree start processes lately (the polls between samples can find something)?"""
        return (time.time() if now is None else now) - self.trees_moved_at < COMPILER_POLL_QUIET_S
