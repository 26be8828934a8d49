# gpuwatch probe: what the client asked for, and when it was last heard from.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "wants".
# Set by the dispatcher on its reading thread, read by the sampler: the watch list is changed and read
# under one lock, and each change bumps `gen` so a sample can tell what it was made for is still current.
import re
import threading
import time

from tails import Tail


class Wants(object):
    """What to watch besides GPU processes (pids, log tails, output dirs, cmdline matches), how often to
    sample, and the client's last sign of life."""

    def __init__(self, options):
        self.lock = threading.Lock()
        self.pids = set()
        self.tails = {}
        self.dirs = {}
        self.matches = {}
        self.gen = 0  # bumped by each set_wants
        self.backlog = int(options.get("tail_backlog_bytes", 64 * 1024))
        self.interval = float(options.get("interval", 1.0))
        # A client that vanished without closing our stdin (a blackholed link) is noticed by its
        # missing pings: we then exit rather than linger on the host.
        self.idle_exit = float(options.get("idle_exit_s", 0) or 0)
        self.last_input = time.time()
        self.on_change = lambda: None  # called under the lock by set_wants: what new wants make due at once

    # the dispatcher's side (its reading thread) --------
    def set_wants(self, req):
        """What to watch besides GPU processes: pids, log tails, output dirs, cmdline matches."""
        with self.lock:
            self.pids = set(int(p) for p in req.get("pids", []))
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
            self.on_change()
            self.gen += 1

    def set_interval(self, seconds):
        self.interval = max(0.1, float(seconds))

    def heard_from_client(self):
        self.last_input = time.time()

    # the sampler's side --------
    def snapshot(self):
        """(watched pids, tails, sorted dirs, gen): one consistent view for a sample."""
        with self.lock:
            return set(self.pids), list(self.tails.values()), sorted(self.dirs.items()), self.gen

    def matches_now(self):
        """(cmdline matches, gen) for a /proc walk."""
        with self.lock:
            return dict(self.matches), self.gen
