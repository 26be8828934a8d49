# gpuwatch probe ops: signal processes named by (pid, start_ticks), and take a whole job down.
# Standard library only, Python 3.6+, Linux. Shipped to the host and imported as "ops_signal".
#
# A pid alone may have been reused by the time a request arrives, so every target is first pinned:
# a pidfd is opened (os.pidfd_open, Python 3.9+ on Linux 5.3+), THEN the start time is re-checked.
# From then on the pidfd names that one process for good: a signal sent through it can never reach
# a newcomer that got the same pid. Where pidfds are missing the check is followed by os.kill, which
# leaves a window of microseconds instead of seconds.
#
# Nothing here ever signals a process that is not in the request's targets: the host side decides
# what the job is (launcher, descendants, GPU-memory holders); this module only acts, and reports.
import errno
import os
import select
import signal
import time

from ops_base import OpError, check_ref, read_stat_fields

_POLL_S = 0.05


def signal_number(name):
    """'TERM', 'SIGTERM' or 15 -> 15; anything else is a clear error."""
    if isinstance(name, int) and not isinstance(name, bool):
        if 0 < name < 65:
            return name
        raise OpError("bad-args", "signal number out of range: %d" % name)
    if not isinstance(name, str):
        raise OpError("bad-args", "signal must be a name like TERM or KILL, got %r" % (name,))
    upper = name.upper()
    if not upper.startswith("SIG"):
        upper = "SIG" + upper
    number = getattr(signal, upper, None)
    if not isinstance(number, int) or upper.startswith("SIG_"):
        raise OpError("bad-args", "unknown signal %r" % (name,))
    return int(number)


def parse_targets(args):
    """args["targets"] -> [(pid, start_ticks)], refusing anything that is not a list of such pairs."""
    raw = args.get("targets")
    if not isinstance(raw, list) or not raw:
        raise OpError("bad-args", "targets must be a non-empty list of {pid, start_ticks}")
    out = []
    for t in raw:
        try:
            pid, ticks = int(t["pid"]), int(t["start_ticks"])
        except (TypeError, KeyError, ValueError):
            raise OpError("bad-args", "each target needs an integer pid and start_ticks, got %r" % (t,))
        if pid <= 1:
            raise OpError("bad-args", "refusing to signal pid %d" % pid)
        if (pid, ticks) not in out:
            out.append((pid, ticks))
    return out


class Target(object):
    """One process pinned by a pidfd where the kernel has them; outcome is None while it lives."""

    def __init__(self, pid, ticks, role=""):
        self.pid = pid
        self.ticks = ticks
        self.role = role
        self.fd = None
        self.outcome = None
        self.message = ""
        self.term_at = None
        self.kill_at = None
        self.ended_at = None
        self.continued = False
        self.name = ""

    def pin(self):
        """Open the pidfd, then check the start time. False (with the outcome set) when refused."""
        if hasattr(os, "pidfd_open"):
            try:
                self.fd = os.pidfd_open(self.pid)
            except OSError as exc:
                if exc.errno == errno.ESRCH:
                    return self._end("gone", "process %d has exited" % self.pid)
                if exc.errno not in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
                    return self._end("error", "pidfd_open(%d): %s" % (self.pid, os.strerror(exc.errno)))
                self.fd = None  # a kernel without pidfds: fall back to check + kill
        try:
            check_ref(self.pid, self.ticks)
        except OpError as exc:
            self.close()
            return self._end(exc.code, exc.message)
        return True

    def send(self, signum):
        """Signal it; True when delivered. Refusals set the outcome instead of raising."""
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signum)
            else:
                check_ref(self.pid, self.ticks)  # the fallback's only guard: as late as possible
                os.kill(self.pid, signum)
            return True
        except OpError as exc:
            self._end(exc.code, exc.message)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                self._end("gone", "process %d has exited" % self.pid)
            elif exc.errno == errno.EPERM:
                self._end("permission-denied", "%s: %s" % (signal_name(signum), os.strerror(exc.errno)))
            else:
                self._end("error", "%s: %s" % (signal_name(signum), os.strerror(exc.errno)))
        return False

    def exited(self):
        """Has it exited (a zombie counts: it runs no more)? A pidfd turns readable at exit."""
        if self.fd is not None:
            p = select.poll()
            p.register(self.fd, select.POLLIN)
            return bool(p.poll(0))
        try:
            check_ref(self.pid, self.ticks)
            return False
        except OpError:
            return True

    def stopped(self):
        try:
            fields = check_ref(self.pid, self.ticks)
        except OpError:
            return False
        return fields[0] in (b"T", b"t")

    def _end(self, outcome, message=""):
        self.outcome = outcome
        self.message = message
        return False

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def report(self, t0):
        def rel(t):
            return None if t is None else round(t - t0, 3)
        out = {"pid": self.pid, "start_ticks": self.ticks, "outcome": self.outcome or "survived",
               "message": self.message, "term_at_s": rel(self.term_at), "kill_at_s": rel(self.kill_at),
               "ended_at_s": rel(self.ended_at), "via_pidfd": self.fd is not None}
        if self.role:
            out["role"] = self.role
        if self.name:
            out["name"] = self.name
        if self.continued:
            out["continued"] = True
        return out


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except (ValueError, AttributeError):
        return "signal %d" % signum


def op_signal(args):
    """Send one signal to each target: signalled / gone / reused / permission-denied, per target."""
    signum = signal_number(args.get("signal", "TERM"))
    results = []
    for pid, ticks in parse_targets(args):
        t = Target(pid, ticks)
        try:
            if t.pin() and t.send(signum):
                t.outcome = "signalled"
            results.append({"pid": pid, "start_ticks": ticks, "outcome": t.outcome, "message": t.message,
                            "via_pidfd": t.fd is not None})
        finally:
            t.close()
    return {"signal": signal_name(signum), "results": results}


class TreeFollower(object):
    """Finds processes the targets start while they are being taken down (a SIGTERM handler that forks
    helpers and exits): children of a target, and members of a process group or session that a target
    leads (they stay there when their parent exits and they are re-parented). Each is pinned by pid and
    start time before it is signalled, like the targets the request named.
    """

    def __init__(self, targets):
        self.targets = targets
        self.known_pids = set(t.pid for t in targets)  # looked at already (pinned, or refused)
        self.parents = dict((t.pid, t.ticks) for t in targets)  # pid -> start ticks of every tree member
        self.leaders = {}  # group / session id -> the leader's start ticks
        self.adopted = []
        for t in targets:
            fields = read_stat_fields(t.pid)
            if fields is not None and len(fields) > 19 and int(fields[19]) == t.ticks:
                if int(fields[2]) == t.pid or int(fields[3]) == t.pid:
                    self.leaders[t.pid] = t.ticks

    def adopt(self, signum):
        """Pin and signal every new member of the tree; returns the new Targets."""
        new = []
        try:
            names = os.listdir("/proc")
        except OSError:
            return new
        me = os.getpid()
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            if pid == me or pid in self.known_pids:
                continue
            fields = read_stat_fields(pid)
            if fields is None or len(fields) < 20 or fields[0] == b"Z":
                continue
            ppid, pgrp, sid, ticks = int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
            if not self._belongs(ppid, pgrp, sid, ticks):
                continue
            t = Target(pid, ticks, "child")
            t.name = _comm(pid)
            self.known_pids.add(pid)
            if not t.pin():
                continue
            self.parents[pid] = ticks
            if pgrp == pid or sid == pid:  # a child that made its own group or session leads what it starts
                self.leaders[pid] = ticks
            if t.send(signum):
                if signum == signal.SIGKILL:
                    t.kill_at = time.time()
                else:
                    t.term_at = time.time()
            new.append(t)
        self.targets.extend(new)
        self.adopted.extend(new)
        return new

    def _belongs(self, ppid, pgrp, sid, ticks):
        # A child starts after its parent: an older process under a reused parent pid is not ours.
        parent = self.parents.get(ppid)
        if parent is not None and ticks >= parent:
            return True
        for group in (pgrp, sid):
            leader = self.leaders.get(group)
            if leader is not None and ticks >= leader and not _led_by_another(group, leader):
                return True
        return False


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid, "rb") as f:
            return f.read().strip().decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def _led_by_another(group, leader_ticks):
    """The group's id is a live process's pid that is not the leader we pinned (the pid was reused)."""
    fields = read_stat_fields(group)
    return fields is not None and len(fields) > 19 and int(fields[19]) != leader_ticks


def _wait_all(targets, deadline, follow=None, signum=signal.SIGTERM):
    """Until every pending target has exited or the deadline passes; marks the ones that exit. With a
    TreeFollower, processes the tree starts meanwhile are signalled with `signum` and waited for too."""
    while True:
        if follow is not None:
            follow.adopt(signum)
        now = time.time()
        pending = []
        for t in targets:
            if t.outcome is None and t.ended_at is None:
                if t.exited():
                    t.ended_at = now
                else:
                    pending.append(t)
        if not pending or now >= deadline:
            return pending
        fds = [t.fd for t in pending if t.fd is not None]
        # While following the tree, look for new members often: a child re-parented after its parent
        # exits is only recognisable by its group or session.
        slow = 0.5 if follow is None else _POLL_S
        wait = min(_POLL_S if len(fds) < len(pending) else slow, max(0.0, deadline - now))
        if fds:
            p = select.poll()
            for fd in fds:
                p.register(fd, select.POLLIN)
            p.poll(wait * 1000.0)
        else:
            time.sleep(wait)


def _term(targets):
    for t in targets:
        if t.outcome is None and t.ended_at is None:
            if t.send(signal.SIGTERM):
                t.term_at = time.time()
                # A stopped process keeps SIGTERM pending until it runs again.
                if t.stopped() and t.send(signal.SIGCONT):
                    t.continued = True


def op_kill_tree(args):
    """SIGTERM the targets (launchers first), wait up to grace_s, SIGKILL survivors, wait again.

    Per process: exited (went after TERM), killed (needed KILL), survived (still there after KILL),
    gone / reused (refused: not the process that was asked for), permission-denied.
    """
    try:
        grace = float(args.get("grace_s", 10.0))
        after_kill = float(args.get("kill_wait_s", 3.0))
    except (TypeError, ValueError):
        raise OpError("bad-args", "grace_s and kill_wait_s must be numbers of seconds")
    if not (0 <= grace <= 3600 and 0 <= after_kill <= 600):
        raise OpError("bad-args", "grace_s must be within 0..3600 and kill_wait_s within 0..600")
    order = args.get("order", "launcher-first")
    if order not in ("launcher-first", "together"):
        raise OpError("bad-args", "order must be launcher-first or together, got %r" % (order,))
    roles = {}
    for t in args.get("targets") or []:
        if isinstance(t, dict) and isinstance(t.get("role"), str):
            roles[(t.get("pid"), t.get("start_ticks"))] = t["role"]
    targets = [Target(pid, ticks, roles.get((pid, ticks), "")) for pid, ticks in parse_targets(args)]
    t0 = time.time()
    follow = None
    try:
        live = [t for t in targets if t.pin()]
        deadline = t0 + grace
        follow = TreeFollower(live)  # `live` grows: children the tree starts meanwhile join it
        if order == "launcher-first":
            # The agent tears its workers down in order when it can; give it a head start.
            first = [t for t in live if t.role == "launcher"]
            _term(first)
            if first:
                _wait_all(first, min(deadline, time.time() + min(2.0, grace / 2.0)), follow)
        _term(live)
        survivors = _wait_all(live, deadline, follow)
        for t in live:
            if t.outcome is None and t.ended_at is not None:
                t.outcome = "exited"
        for t in survivors:
            if t.send(signal.SIGKILL):
                t.kill_at = time.time()
        follow.targets = survivors  # from now on new members get SIGKILL at once
        _wait_all(survivors, time.time() + after_kill, follow, signal.SIGKILL)
        # Until the tree is empty: a last look for anything started in the very last moment.
        late = follow.adopt(signal.SIGKILL)  # (they join `survivors` too)
        if late:
            _wait_all(late, time.time() + after_kill)
        for t in survivors:
            if t.outcome is None:
                t.outcome = "killed" if t.ended_at is not None else "survived"
                if t.outcome == "survived":
                    t.message = "still there %.1f s after SIGKILL (state D, or stuck in the kernel)" % after_kill
        return {"grace_s": grace, "elapsed_s": round(time.time() - t0, 3),
                "results": [t.report(t0) for t in targets + follow.adopted]}
    finally:
        for t in targets + (follow.adopted if follow is not None else []):
            t.close()


OPS = {"signal": op_signal, "kill_tree": op_kill_tree}
