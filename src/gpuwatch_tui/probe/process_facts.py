# gpuwatch probe: what a watched process's entry says: its command line, owner, environment
# (the few variables that matter), cwd and output targets, whether its stdout is unbuffered; and the entry
# itself, with its descendants.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "process_facts".
from operator import is_
import os

from ops_base import fd_target as read_fd_target
from wire import CHILD_FACTS, ROOT_FACTS


def fd_target(pid, fd):
    """ops_base.fd_target (one helper for the sampler and the capture op); None if unreadable."""
    try:
        return read_fd_target(pid, fd)
    except OSError:
        return None


FD_FLAGS_REFRESH_S = 60.0  # an fd's open flags (fdinfo) are read again this often while its target stays


def fd_target_again(pid, fd, last, now):
    """fd_target for a target read before (`last`, or None): while the link names the same path, its
    open flags cannot have changed short of an fcntl (re-read every FD_FLAGS_REFRESH_S): one system call
    instead of 5 (readlink, fdinfo open/read/close, stat). None if unreadable."""
    if last is None or now - last.get("flags_at", 0.0) >= FD_FLAGS_REFRESH_S:
        target = fd_target(pid, fd)
        if target is not None:
            target["flags_at"] = now
        return target
    try:
        path = os.readlink("/proc/%d/fd/%d" % (pid, fd))
    except OSError:
        return None
    if path != last["path"]:
        target = fd_target(pid, fd)
        if target is not None:
            target["flags_at"] = now
        return target
    return last


def fd_fact(target):
    """A target as the frame carries it (without the probe's own bookkeeping). Not its file's size: nothing
    reads it (the engine reads a target's path and kind), and keeping it current cost a stat per process
    every few seconds, and an entry whose facts changed every time it did."""
    if target is None:
        return None
    return {"path": target["path"], "kind": target["kind"], "append": target["append"]}


def python_unbuffered(cmdline, environ):
    """Is stdout unbuffered for this Python process: (-u or PYTHONUNBUFFERED, reason)."""
    if environ is not None and environ.get("PYTHONUNBUFFERED"):
        return True, "PYTHONUNBUFFERED=" + environ["PYTHONUNBUFFERED"][:8]
    args = cmdline[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-" or arg == "--":
            break  # the script: later arguments belong to it
        if arg.startswith("--"):
            i += 1
            continue
        for j, ch in enumerate(arg[1:]):
            if ch == "u":
                return True, "-u"
            if ch in "cm":
                return False, ""  # -c CMD / -m MOD: the rest is the program's
            if ch in "WXQ":
                if j == len(arg) - 2:
                    i += 1  # "-W ignore": the value is the next argument
                break
        i += 1
    return False, ""


def is_python(comm, cmdline):
    argv0 = os.path.basename(cmdline[0]) if cmdline else ""
    return comm.startswith("python") or argv0.startswith("python") or argv0 == "pypy3"


_USER_NAMES = {}


def user_name(uid):
    """The login name of `uid` on this host, looked up once per uid (None: unknown uid)."""
    if uid is None:
        return None
    if uid not in _USER_NAMES:
        try:
            import pwd
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _USER_NAMES[uid] = None
    return _USER_NAMES[uid]


# The variables that tie the processes of one run together across hosts (a Slurm allocation, a
# torchrun rendezvous) and give each its rank: the only part of a job's environment the probe sends.
DIST_ENV = frozenset((b"SLURM_JOB_ID", b"SLURM_PROCID", b"SLURM_NODEID", b"TORCHELASTIC_RUN_ID",
                      b"MASTER_ADDR", b"MASTER_PORT", b"RANK", b"LOCAL_RANK", b"WORLD_SIZE",
                      b"GROUP_RANK", b"NODE_RANK", b"LOCAL_WORLD_SIZE"))
DIST_VALUE_MAX = 256


# A process's cwd and stdout/stderr targets are read again `slow_refresh` (5 s) after they were read, then
# twice as long after each read that found them the same, up to this many times `slow_refresh` (60 s): on a
# host of long jobs that is 3 readlinks per job a minute instead of 36 (at a fixed 5 s they were 17% of a
# sample's system calls). A change starts over at `slow_refresh`, and a new process is read at once, so a
# job that moves its cwd or output early in its life (Hydra's chdir) is seen within seconds as before.
SLOW_FACTS_BACKOFF = 12


class ProcCache(object):
    """Facts that do not change while a process lives, keyed by (pid, start)."""

    def __init__(self):
        self.static = {}

    def static_facts(self, pid, start):
        key = (pid, start)
        facts = self.static.get(key)
        if facts is None:
            facts = {}
            try:
                raw = open("/proc/%d/cmdline" % pid, "rb").read()
                facts["cmdline"] = [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]][:256]
            except (OSError, IOError):
                facts["cmdline"] = []
            environ = None
            dist = {}
            try:
                raw = open("/proc/%d/environ" % pid, "rb").read()
                environ = {}
                for item in raw.split(b"\0"):
                    k, _, v = item.partition(b"=")
                    if k in (b"PYTHONUNBUFFERED",):
                        environ[k.decode()] = v.decode("utf-8", "replace")
                    elif k in DIST_ENV:
                        dist[k.decode()] = v[:DIST_VALUE_MAX].decode("utf-8", "replace")
            except (OSError, IOError):
                pass
            facts["env_readable"] = environ is not None
            facts["environ"] = environ
            facts["dist"] = dist or None
            # The owner never changes while the process lives (setuid happens before exec in
            # practice): read once per (pid, start), so a sample pays nothing for it.
            try:
                facts["uid"] = os.stat("/proc/%d" % pid).st_uid
            except OSError:
                facts["uid"] = None
            facts["user"] = user_name(facts["uid"])
            self.static[key] = facts
        return facts

    def slow_facts(self, pid, start, now, refresh):
        """cwd and stdout/stderr targets: they rarely change, so re-read `refresh` s after they were read, and
        each time they read the same, twice as long after, up to SLOW_FACTS_BACKOFF times `refresh`; a change
        starts over at `refresh`. Due when `now >= facts["slow_due"]` (absent: never read)."""
        facts = self.static_facts(pid, start)
        if now >= facts.get("slow_due", 0.0):
            before = (facts.get("cwd"), facts.get("stdout"), facts.get("stderr"))
            try:
                facts["cwd"] = os.readlink("/proc/%d/cwd" % pid)
            except OSError:
                facts["cwd"] = None
            out = facts["stdout_target"] = fd_target_again(pid, 1, facts.get("stdout_target"), now)
            err = facts["stderr_target"] = fd_target_again(pid, 2, facts.get("stderr_target"), now)
            facts["stdout"], facts["stderr"] = fd_fact(out), fd_fact(err)
            every = facts.get("slow_every")
            if every is None or (facts["cwd"], facts["stdout"], facts["stderr"]) != before:
                every = refresh
            else:
                every = min(2 * every, SLOW_FACTS_BACKOFF * refresh)
            facts["slow_every"] = every
            facts["slow_at"] = now
            facts["slow_due"] = now + every
        return facts

    def forget_except(self, live_keys):
        for key in list(self.static):
            if key not in live_keys:
                del self.static[key]


def proc_info(stat, cache, descendants, now, refresh, compilers_seen=(), deltas=None):
    """A watched process's entry in a frame, its descendants' in it. `deltas` (FrameDeltas, begun for
    this frame): the facts the client has are left out, unbuilt; None: every fact, every frame."""
    facts = slow = cache.static_facts(stat.pid, stat.start)
    if now >= facts.get("slow_due", 0.0):  # (slow_facts keeps them in the static facts' dict)
        cache.slow_facts(stat.pid, stat.start, now, refresh)
    # The last sample's entry, where it was built from these very Stats and slow facts and left every fact
    # out: while the client still has them all, it is this sample's entry too, not built again (an idle
    # job's stat and its children's read the same sample after sample). Treat a frame as read-only.
    memo = facts.get("entry")  # (stat, descendants, slow_at, entry, ROOT_FACTS, [(child key, CHILD_FACTS)])
    if (memo is not None and deltas is not None and not compilers_seen and memo[0] is stat
            and memo[2] == slow["slow_at"] and len(memo[1]) == len(descendants)
            and all(map(is_, memo[1], descendants)) and deltas.known_root((stat.pid, stat.ticks), memo[4])
            and all(deltas.known_child(key, known) for key, known in memo[5])):
        return memo[3]
    cmdline = facts["cmdline"]
    kind = facts.get("kind")
    if kind is None or kind[0] != stat.comm:  # cmdline and environ are fixed for (pid, start)
        py = is_python(stat.comm, cmdline)
        kind = facts["kind"] = (stat.comm, py) + (python_unbuffered(cmdline, facts["environ"]) if py else (False, ""))
    _, py, unbuffered, reason = kind
    children = []
    child_known = []
    bare = deltas is not None  # every fact left out (the entry can stand for the next sample's)
    child_cpu = stat.ccpu
    static = cache.static
    for d in descendants:
        # d.ccpu: a worker's reaped children (short compiler runs) count too
        child_cpu += d.cpu + d.ccpu
        dfacts = static.get((d.pid, d.start)) or cache.static_facts(d.pid, d.start)
        child = {"pid": d.pid, "state": d.state, "cpu_s": d.cpu_s, "start_ticks": d.ticks}
        kept = d.child_facts
        if kept is not None and kept[0] is dfacts:
            known = kept[1]
        else:
            known = (dfacts["cmdline"][:16], dfacts["uid"], dfacts["user"], d.ppid, d.comm, d.start)  # CHILD_FACTS
            d.child_facts = (dfacts, known)
        key = (d.pid, d.ticks)
        child_known.append((key, known))
        if deltas is None or not deltas.known_child(key, known):
            bare = False
            child.update(zip(CHILD_FACTS, known))
            if deltas is not None:
                deltas.strip_child(child, key)
        children.append(child)
    entry = {
        "pid": stat.pid, "start_ticks": stat.ticks, "state": stat.state,
        "cpu_s": stat.cpu_s, "cpu_children_s": round(child_cpu, 2),
        "rss_bytes": stat.rss, "threads": stat.threads, "children": children,
    }
    if compilers_seen or deltas is None:
        entry["compilers_seen"] = list(compilers_seen)
    known = (cmdline, slow["cwd"], slow["stdout"], slow["stderr"], unbuffered, reason, py,  # ROOT_FACTS
             facts["env_readable"], facts["uid"], facts["user"], facts["dist"], stat.ppid, stat.start,
             stat.comm, stat.sid, stat.pgid)
    key = (stat.pid, stat.ticks)
    if deltas is None or not deltas.known_root(key, known):
        bare = False
        entry.update(zip(ROOT_FACTS, known))
        if deltas is not None:
            deltas.strip_root(entry, key)
    bare = bare and not compilers_seen
    facts["entry"] = (stat, descendants, slow["slow_at"], entry, known, child_known) if bare else None
    return entry
