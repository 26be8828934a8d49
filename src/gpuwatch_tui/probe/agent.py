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

from action_notes import ActionNotes  # noqa: E402 - shipped: found through the finder above
from candidates import JobCandidates  # noqa: E402
from compiler_watch import CompilerWatch  # noqa: E402
from ml_libs import MlLibs  # noqa: E402
from frame_deltas import FrameDeltas  # noqa: E402
from gpu_choice import NoGpu, open_gpu_source  # noqa: E402
from host_facts import BOOT_TIME, CLK_TCK, PROC_LOADAVG, HostReadings, load1  # noqa: E402
from lean import LeanPath  # noqa: E402
from output import emit, shutdown  # noqa: E402
from process_facts import ProcCache, proc_info  # noqa: E402
from procfs import ProcFiles, read_stat  # noqa: E402
from tails import dir_stat  # noqa: E402
from tree_walk import TreeWalk  # noqa: E402
from wants import Wants  # noqa: E402


def op_module_names():
    """The request handlers that came in the bundle: every ops_*.py but the shared base."""
    return [n for n in BUNDLE_MODULES if n.startswith("ops_") and n != "ops_base"]


# ---------------------------------------------------------------- the loop

class Probe(object):
    """The sample loop: each concern owns its state in a module of its own (what the client asked for:
    Wants; the process trees: TreeWalk; the lean sample: LeanPath); this puts a frame together from them."""

    def __init__(self, options):
        self.slow_refresh = float(options.get("slow_refresh", 5.0))
        self.prefer = options.get("gpu_source", "auto")
        self.compiler_polls = int(options.get("compiler_polls", 3))  # between two samples
        self.cache = ProcCache()
        self.files = ProcFiles()
        # Send fixed process facts only when they change: the client asks for it at start (an
        # older client never does and gets every fact every frame).
        self.deltas = FrameDeltas() if options.get("fact_deltas") else None
        self.candidates = JobCandidates()
        self.compiler_watch = CompilerWatch()
        self.ml_libs = MlLibs()
        self.gpu = NoGpu()
        self.host = HostReadings()
        self.wants = Wants(options)
        self.walk = TreeWalk(options, self.wants, self.files, self.cache, self.candidates, self.host)
        self.wants.on_change = self.walk.scan_soon  # (new matches are looked for at the next tick)
        self.lean = LeanPath(options, self.walk, self.wants, self.deltas, self.files, self.cache, self.candidates,
                             self.compiler_watch, self.slow_refresh)
        self.watched_keys = {}  # pid -> start of processes reported last frame
        self.notes = ActionNotes()  # what a gpuwatch did to processes here (kill, restart), for every watcher

    def set_wants(self, req):
        self.wants.set_wants(req)

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
        walk = self.walk
        span = walk.read_marks(loadavg)
        if self.lean.plan is not None and self.lean.allowed:
            lean = self.lean.sample(frame, now, loadavg, gpu_pids, span)
            if lean is not None:
                return self.finish(lean, now, loadavg, self.lean.plan.tails, self.lean.plan.dirs)
            self.files.begin_sample()  # (the full path reads afresh)
        want, tails, dirs, gen = self.wants.snapshot()
        walk.begin_full(now, self.deltas is not None and self.deltas.resend)
        watched = gpu_pids | want
        walk.scan_if_due(now, loadavg)
        for pids in walk.match_pids.values():
            watched |= set(pids)
        candidates = self.candidates
        if not walk.looked:
            walk.look_at_new_pids(now, span)
        watched |= set(walk.candidate_pids)
        walk.watched_now = watched
        procs = []
        current = {}
        poll_tree = {}
        marks = {}
        ml = []  # watched Python processes off the GPU with an ML runtime mapped (they train: MlLibs)
        for pid in sorted(watched):
            s = read_stat(pid, self.files)
            if s is None or s.state == "Z":
                # a zombie has exited; only its parent has not collected it yet. (A candidate that is gone is
                # one no more, as the next walk would find: not read again.)
                candidates.found.pop(pid, None)
                continue
            current[pid] = s.start
            below = walk.descendants(s)
            # Polled children of the last interval (CompilerWatch.poll) plus the ones alive now.
            seen_between = self.compiler_watch.take(pid) if self.compiler_watch.seen else ()
            procs.append(proc_info(s, self.cache, below, now, self.slow_refresh, seen_between, self.deltas))
            poll_tree[pid] = (s, below)
            if pid not in gpu_pids and self.cache.static[(pid, s.start)]["kind"][1] and \
                    self.ml_libs.loaded(pid, s.start, now):
                ml.append(pid)
            walk.mark_tree(pid, s, below, seen_between, now, marks)
        walk.end_full(now, marks)
        self.compiler_watch.frame_done()
        # The polls between samples run only while a tree starts processes (see run): none to set up otherwise.
        if walk.jobs_spawning(now):
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
        frame["matches"] = walk.match_pids
        # A sample that walks no tree closes nothing: the walk's descriptors (children files, idle descendants'
        # stat) stand for the samples to come. A watched process's own stat that fails is closed as it fails.
        self.files.end_sample(close=walk.walk_trees)
        known = self.candidates.seen
        frame["candidates"] = dict((str(pid), why) for pid, why in walk.candidate_pids.items()
                                   if pid in current and known.get(pid, (0, None))[1] == current[pid])
        frame["ml"] = ml
        self.ml_libs.forget_except(set(current.items()))
        self.finish(frame, now, loadavg, tails, dirs)
        self.lean.plan = self.lean.make_plan(frame, gen, gpu_pids, tails, dirs)
        return frame

    def finish(self, frame, now, loadavg, tails, dirs):
        """The frame's fields after its processes, the same on both paths (the key order is the wire's)."""
        known = None if self.deltas is None else self.deltas.known_tail
        frame["tails"] = [t.poll(now, known) for t in tails]
        frame["dirs"] = [dir_stat(k, p) for k, p in dirs]
        host = self.host
        frame["probe_cpu_s"] = host.own_cpu.get(now)
        frame["scanned_procs"] = self.walk.scanned_procs
        load = load1(loadavg)
        if load is not None:
            frame["load1"] = load
        # What top shows first: host CPU busy %, RAM used/total; and the driver beside the GPU model.
        frame["cpu_pct"] = host.cpu_pct.get(now)  # a HOST_SLOW_READ_S average, repeated in between
        frame["cpu_count"] = host.cpu_count
        frame["mem_total_kib"], frame["mem_avail_kib"] = host.memory.get(now)
        frame["driver"] = getattr(self.gpu, "driver", None)
        # The records of actions on the processes of this frame, and on those it found gone (a kill's target).
        notes = self.notes.poll([p["pid"] for p in frame.get("procs", ())] + [g["pid"] for g in frame.get("gone", ())])
        if notes:
            frame["notes"] = notes
        if self.deltas is not None:
            self.deltas.apply(frame, now, procs_done=True)
        return frame

    def exit_when_idle(self):
        # Wakes when the deadline can have passed, not every second: a wakeup is a cost of its own.
        while True:
            left = self.wants.last_input + self.wants.idle_exit - time.time()
            if left < 0:
                shutdown(0)
            time.sleep(max(0.05, left + 0.01))

    def run(self):
        self.gpu = open_gpu_source(self.prefer, self.wants.interval)
        dispatch = importlib.import_module("dispatch")
        ops, op_errors = dispatch.load_ops(importlib.import_module, op_module_names())
        dispatcher = dispatch.Dispatcher(self.wants, emit, ops, op_errors)
        emit({"type": "hello", "pid": os.getpid(), "python": sys.version.split()[0],
              "hostname": os.uname()[1], "gpu_source": self.gpu.name,
              "gpu_error": self.gpu.error, "cpu_count": os.cpu_count(), "boot_time": BOOT_TIME,
              "clk_tck": CLK_TCK, "ops": sorted(ops), "op_errors": op_errors,
              "fact_deltas": self.deltas is not None})
        reader = threading.Thread(target=dispatcher.read_requests,
                                  args=(sys.stdin.buffer, self.wants.heard_from_client, lambda: shutdown(0)))
        reader.daemon = True
        reader.start()
        if self.wants.idle_exit > 0:
            threading.Thread(target=self.exit_when_idle, daemon=True).start()
        next_tick = time.time()
        while True:
            emit(self.sample())
            next_tick += self.wants.interval
            delay = next_tick - time.time()
            if delay < 0:
                next_tick = time.time()  # fell behind (suspended?): don't burst
                delay = 0
            polls = self.compiler_polls if self.compiler_watch.targets and self.walk.jobs_spawning() else 0
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
