# gpuwatch probe: the wire contract, read by the probe and by the client's frame parser alike.
#
# A frame is one line of compact JSON with its protocol version in "v". Whatever changes what a frame
# means changes PROTOCOL_VERSION; the client refuses a frame of another version.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "wire".
import json

if __package__:  # the client's copy (gpuwatch_tui.probe.wire)
    from . import gpu_metrics
else:  # shipped: a sibling module, found through the bundle's finder
    import gpu_metrics


PROTOCOL_VERSION = 1

# One encoder for every frame: json.dumps with options builds a JSONEncoder per call. (No circular check:
# a frame is a tree the probe builds.)
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def encode_frame(frame):
    """A frame as written: one line of compact JSON, version stamped."""
    frame["v"] = PROTOCOL_VERSION
    return (_ENCODER.encode(frame) + "\n").encode()


# With fact deltas on, a frame carries these fields of a process, a GPU or a log tail only when they are
# new or changed since the frame that last sent them (see FrameDeltas); the client fills them back in
# (probe_frames.FactCache). They are the ones that change rarely: comparing a field costs the probe about
# what encoding it does, so the ones that move every sample (CPU, power, ...) are always sent.
ROOT_FACTS = ("cmdline", "cwd", "stdout", "stderr", "unbuffered", "unbuffered_reason", "is_python",
              "env_readable", "uid", "user", "dist", "ppid", "start_time", "name", "sid", "pgid")
CHILD_FACTS = ("cmdline", "uid", "user", "ppid", "name", "start_time")
# A GPU's: its names and the metric table's facts (gpu_metrics.FACTS), which a GPU source reads its own way.
GPU_FACTS = ("uuid", "name") + gpu_metrics.FACTS + ("processes",)
# (Not the size: a growing log's moves at every poll, and with it in, its facts never compared equal at once and
# every tail took the slow way in _strip, each sample. Sent every frame; the client keeps it as a fact still.)
TAIL_FACTS = ("path", "mtime", "error")
# Per-frame events, not state: left out when empty (the client reads them as empty).
TAIL_EVENTS = (("data", ""), ("reset", False), ("skipped", 0), ("cut", []))
# What the client keeps of a tail from frame to frame: its facts, and its size (sent every frame).
TAIL_KEPT = TAIL_FACTS + ("size",)

# The frames the probe writes ("type"), and the keys of each part of them. A frame with fact deltas on lacks
# the facts the client has; a key not listed here is one the client does not know (it ignores it), and a key
# the client reads that is not listed is one no probe sends (tests/probe/test_wire_contract.py holds both
# sides to these lists).
FRAME_TYPES = ("hello", "sample", "reply", "pong", "error", "fatal")
HELLO_KEYS = ("type", "v", "pid", "python", "hostname", "gpu_source", "gpu_error", "cpu_count", "boot_time",
              "clk_tck", "ops", "op_errors", "fact_deltas")
SAMPLE_KEYS = ("type", "v", "t", "gpu_source", "gpu_error", "gpus", "procs", "gone", "matches", "candidates", "ml",
               "tails", "dirs", "probe_cpu_s", "scanned_procs", "load1", "cpu_pct", "cpu_count", "mem_total_kib",
               "mem_avail_kib", "driver", "notes")
PROC_KEYS = ("pid", "start_ticks", "state", "cpu_s", "cpu_children_s", "rss_bytes", "threads", "children",
             "compilers_seen") + ROOT_FACTS
CHILD_KEYS = ("pid", "state", "cpu_s", "start_ticks") + CHILD_FACTS
FD_TARGET_KEYS = ("path", "kind", "append")  # a process's stdout and stderr
GONE_KEYS = ("pid", "start_time", "seen_gone_at")
GPU_KEYS = ("index",) + gpu_metrics.READINGS + GPU_FACTS  # every reading of the metric table, every frame
# sm_pct: the process's share of its GPU's SM time (gpu_proc_util.py), read only where a GPU has more than one
# process; None where not read
GPU_PROCESS_KEYS = ("pid", "mem_used_mib", "sm_pct")
TAIL_KEYS = ("key", "data", "reset", "skipped", "size", "cut") + TAIL_FACTS
# A record of what a gpuwatch did to processes here (action_notes.py), sent once per probe, only in frames
# that have one: targets are [pid, start_ticks] pairs, time is the host's.
NOTE_KEYS = ("id", "action", "user", "time", "targets", "host_uid", "status_file", "finding")
DIR_KEYS = ("key", "path", "exists", "files", "total_bytes", "newest_mtime", "newest_name", "error")


# The compilers a first torch.compile (or a CUDA extension build) runs as children of a job: the probe reports
# the ones it sees between samples (CompilerWatch), and the phase engine reads a job as compiling by them.
COMPILER_NAMES = frozenset((
    "gcc", "cc", "cc1", "cc1plus", "g++", "c++", "clang", "clang++", "ld", "ld.lld", "as", "collect2",
    "ptxas", "nvcc", "cicc", "nvlink", "fatbinary", "cudafe++", "ninja", "nvdisasm",
))
