# gpuwatch probe: ops that read processes. Standard library only, Python 3.6+, Linux /proc.
#
# Shipped inside the probe bundle as the module "ops_procs"; see ops_base for the request framing.
#
#   proc_tree {"pid": int, "start_ticks": int}
#       -> {"root": PID, "processes": [PROC, ...], "truncated": bool}
#       the process and every live descendant, parents before their children, each
#       {"pid", "ppid", "start_ticks", "start_time", "name", "cmdline", "state", "uid", "user",
#        "cpu_s", "rss_bytes", "threads", "pgid", "sid"}; refused ("gone", "reused") when the
#       process that started at start_ticks is no longer there.
import os

import ops_base

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TREE_CAP = 2048  # processes in one answer; a fork bomb must not make a frame of megabytes
CMDLINE_CAP = 256  # arguments kept per process


def _boot_time():
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return None


BOOT_TIME = _boot_time()


def _stat(pid):
    """(comm, fields after the comm) of /proc/PID/stat, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
    except (OSError, IOError):
        return None
    lpar, rpar = raw.find(b"("), raw.rfind(b")")
    fields = raw[rpar + 2:].split()
    if lpar < 0 or len(fields) < 22:
        return None
    return raw[lpar + 1:rpar].decode("utf-8", "replace"), fields


def _uid(pid):
    """The real uid from /proc/PID/status (the owner a person thinks of), or None."""
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, IOError, ValueError, IndexError):
        pass
    return None


def _user(uid, names):
    if uid is None:
        return None
    if uid not in names:
        try:
            import pwd
            names[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            names[uid] = None  # a uid from another user database (a container's)
    return names[uid]


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except (OSError, IOError):
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]][:CMDLINE_CAP]


def _describe(pid, comm, fields, names):
    ticks = int(fields[19])
    uid = _uid(pid)
    return {
        "pid": pid,
        "ppid": int(fields[1]),
        "start_ticks": ticks,
        "start_time": None if BOOT_TIME is None else round(BOOT_TIME + ticks / float(CLK_TCK), 2),
        "name": comm,
        "cmdline": _cmdline(pid),
        "state": fields[0].decode("ascii", "replace"),
        "uid": uid,
        "user": _user(uid, names),
        "cpu_s": round((int(fields[11]) + int(fields[12])) / float(CLK_TCK), 2),
        "rss_bytes": int(fields[21]) * PAGE_SIZE,
        "threads": int(fields[17]),
        "pgid": int(fields[2]),
        "sid": int(fields[3]),
    }


def _children_map():
    """ppid -> [pid] over every process now: one /proc walk (a few ms), exact at this moment."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        st = _stat(pid)
        if st is not None:
            children.setdefault(int(st[1][1]), []).append((pid, st))
    return children


def proc_tree(args):
    pid = ops_base.int_arg(args, "pid", minimum=1)
    ticks = ops_base.int_arg(args, "start_ticks", minimum=0)
    ops_base.check_ref(pid, ticks)
    root = _stat(pid)
    if root is None:
        raise ops_base.OpError("gone", "process %d has exited" % pid)
    if int(root[1][19]) != ticks:  # replaced between the check and this read
        raise ops_base.OpError("reused", "pid %d changed hands while being read: refused" % pid)
    children = _children_map()
    names = {}
    out = [_describe(pid, root[0], root[1], names)]
    # A child is read once, in the walk: its facts and its parent link are of the same moment.
    queue = [pid]
    truncated = False
    while queue:
        parent = queue.pop(0)
        for child, (comm, fields) in sorted(children.get(parent, [])):
            if len(out) >= TREE_CAP:
                truncated = True
                break
            out.append(_describe(child, comm, fields, names))
            queue.append(child)
    return {"root": pid, "processes": out, "truncated": truncated}


OPS = {"proc_tree": proc_tree}
