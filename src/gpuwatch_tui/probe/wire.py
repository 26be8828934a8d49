# gpuwatch probe: the wire contract, read by the probe and by the client's frame parser alike.
#
# A frame is one line of compact JSON with its protocol version in "v". Whatever changes what a frame
# means changes PROTOCOL_VERSION; the client refuses a frame of another version.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "wire".
import json


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
# (frames.FactCache). They are the ones that change rarely: comparing a field costs the probe about
# what encoding it does, so the ones that move every sample (CPU, power, ...) are always sent.
ROOT_FACTS = ("cmdline", "cwd", "stdout", "stderr", "unbuffered", "unbuffered_reason", "is_python",
              "env_readable", "uid", "user", "dist", "ppid", "start_time", "name", "sid", "pgid")
CHILD_FACTS = ("cmdline", "uid", "user", "ppid", "name", "start_time")
GPU_FACTS = ("uuid", "name", "mem_total_mib", "power_limit_w", "processes")
# (Not the size: a growing log's moves at every poll, and with it in, its facts never compared equal at once and
# every tail took the slow way in _strip, each sample. Sent every frame; the client keeps it as a fact still.)
TAIL_FACTS = ("path", "mtime", "error")
# Per-frame events, not state: left out when empty (the client reads them as empty).
TAIL_EVENTS = (("data", ""), ("reset", False), ("skipped", 0), ("cut", []))


# The compilers a first torch.compile (or a CUDA extension build) runs as children of a job: the probe reports
# the ones it sees between samples (CompilerWatch), and the phase engine reads a job as compiling by them.
COMPILER_NAMES = frozenset((
    "gcc", "cc", "cc1", "cc1plus", "g++", "c++", "clang", "clang++", "ld", "ld.lld", "as", "collect2",
    "ptxas", "nvcc", "cicc", "nvlink", "fatbinary", "cudafe++", "ninja", "nvdisasm",
))
