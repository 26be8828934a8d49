# gpuwatch probe: the lean sample, taken while nothing structural is due.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "lean".
# Each full sample leaves a LeanPlan; the samples after it read only the watched processes' kept stat
# descriptors and their last walk's descendants, and build the entries the full path would. Anything
# unusual hands the sample back to the full path.
from compiler_watch import COMPILER_POLL_QUIET_S
from tree_walk import IDLE_CHILD_READ_S, TREE_WALK_AT_LEAST_S, WALK_AT_LEAST_S


class LeanPlan(object):
    """What a full sample leaves for the lean ones after it (LeanPath.sample): the watched processes'
    stat descriptor keys and the facts a change of which the full path must see, in the frame's order."""

    __slots__ = ("gen", "gpu_pids", "roots", "candidates", "found", "tree_pids", "tails", "dirs", "ml")

    def __init__(self, gen, gpu_pids, roots, candidates, found, tree_pids, tails, dirs, ml=()):
        self.gen = gen  # the wants it was made for (Wants.gen)
        self.gpu_pids = gpu_pids
        # [(pid, its ProcFiles key, (ppid, start ticks, comm, sid, pgid), its facts (ProcCache.static_facts))]
        self.roots = roots
        self.candidates = candidates  # the frame's (the same while the look at new pids finds none)
        self.found = found  # the candidates' pids (JobCandidates.found), as the frame's look left them
        self.tree_pids = tree_pids  # every watched process and descendant: a new child of one is a full sample's
        self.tails = tails
        self.dirs = dirs
        self.ml = ml  # the frame's ML-runtime pids (looked at again by the next full sample)


class LeanPath(object):
    """The lean path's plan and its use. `walk` (TreeWalk), `wants` and the rest are the probe's."""

    def __init__(self, options, walk, wants, deltas, files, cache, candidates, compiler_watch, slow_refresh):
        # Allowed unless the options say not (a test compares both paths).
        self.allowed = bool(options.get("lean_sample", True))
        self.plan = None  # LeanPlan, made by each full sample
        self.walk = walk
        self.wants = wants
        self.deltas = deltas
        self.files = files
        self.cache = cache
        self.candidates = candidates
        self.compiler_watch = compiler_watch
        self.slow_refresh = slow_refresh

    def make_plan(self, frame, gen, gpu_pids, tails, dirs):
        """What the next samples read while nothing structural is due (sample), or None: no lean sample
        without fact deltas (a bare entry is one whose facts the client has) or a mark to read."""
        walk = self.walk
        if self.deltas is None or walk.tasks.fd is None or walk.tasks.last is None:
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
        tree_pids = set(pid for pid, _ in walk.trees)
        for pids in walk.trees.values():
            tree_pids.update(pids)
        return LeanPlan(gen, frozenset(gpu_pids), roots, frame["candidates"], frozenset(walk.candidate_pids),
                        tree_pids, tails, dirs, frame["ml"])

    def sample(self, frame, now, loadavg, gpu_pids, span):
        """The sample while nothing structural is due: no /proc walk (a scan's tick with nothing to walk is
        taken here), tree walk or fact resend due, no candidate undecided, no compiler poll running, the same
        wants and GPU processes. One loop over the watched processes' kept stat descriptors and their last
        walk's descendants builds the entries the full path would (each fact known to the client: the bare
        entry); a process's slow facts due are read again in it. Where loadavg's mark moved (a process started
        or reaped somewhere), the look at the new pids runs first, and every descendant is read: the trees
        stand unless a new process's parent is in one (or a descendant reads gone, below). The frame with its
        processes (Probe.finish adds the rest), or None where anything reads unusual (a read failing, a zombie, a process's parent, start, name, session or
        group changed, its cwd or output moved, a reaped child's CPU, a new process below a watched one or a new
        job candidate): the full path then takes the sample, reading afresh (the look's result stands)."""
        plan = self.plan
        walk = self.walk
        moved = walk.tasks_moved
        # (each due time tested as the full path tests it, the same float expression)
        if (plan.gen != self.wants.gen or loadavg is None
                or gpu_pids != plan.gpu_pids or now - walk.trees_walked_at >= TREE_WALK_AT_LEAST_S
                or self.deltas.resend or now - walk.trees_moved_at < COMPILER_POLL_QUIET_S
                or self.compiler_watch.targets or self.compiler_watch.seen or self.compiler_watch.files.fds
                or self.candidates.undecided or self.candidates.files.fds):
            return None
        tick = now - walk.last_scan >= walk.scan_interval
        if tick and (walk.last_scan == 0.0 or now - walk.last_walk >= WALK_AT_LEAST_S
                     or (self.wants.matches and walk.walk_pids.read(loadavg) != walk.walk_pids.last)):
            return None  # a walk is due: the full one, or cmdline matches with a pid handed out since the last
        if moved:
            walk.look_at_new_pids(now, span)
            new_parents = self.candidates.new_parents
            if (new_parents is None or not new_parents.isdisjoint(plan.tree_pids)
                    or walk.candidate_pids.keys() != plan.found):
                return None
        files = self.files
        cache, refresh = self.cache, self.slow_refresh
        kept, trees, watched = walk.child_reads, walk.trees, walk.watched_now
        marks = walk.tree_marks
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
        walk.child_reads = reads
        walk.now = now
        if tick:  # as the full path's tick with nothing to scan
            walk.walk_pids.changed(loadavg)
            walk.last_scan = now
        walk.walk_trees = False
        if not walk.looked:
            self.candidates.new_parents = set()  # (no pid handed out: no process started)
        frame["procs"] = procs
        frame["gone"] = []
        frame["matches"] = walk.match_pids
        frame["candidates"] = plan.candidates
        frame["ml"] = plan.ml
        return frame
