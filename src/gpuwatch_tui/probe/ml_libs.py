# gpuwatch probe: which watched Python processes have an ML runtime mapped (torch, JAX, TensorFlow, CUDA).
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "ml_libs".
# The client tells a training process (its children are its workers: one job) from a driver that only
# starts runs (each run its own job) by this: a parent with torch loaded trains, one without drives.
# Only watched processes off the GPU are asked (a GPU process trains anyway): the ranks' launchers and
# the parents the client asks for, a handful per host.
from procfs import maps_have, read_vsize

ML_LIBS = (b"libtorch", b"libcudart", b"libnccl", b"xla_extension", b"jaxlib", b"libtensorflow")
ML_MIN_VSIZE = 256 << 20  # an address space below this cannot hold any of them (libtorch_cpu alone: 400+ MiB)
ML_MAX_READS = 20  # maps reads per process before "not loaded" is final (a maps read costs ~100x a stat)
ML_RECHECK_S = 5.0  # a process without them is looked at again at most this often, and only when it grew


class MlLibs(object):
    """(pid, start) -> whether an ML runtime is mapped; "loaded" is final, "not loaded" is asked again
    while the address space grows (an import comes late), at most ML_MAX_READS maps reads."""

    def __init__(self):
        self.judged = {}  # (pid, start) -> [loaded, vsize at the last maps read, maps reads, asked at]

    def loaded(self, pid, start, now):
        key = (pid, start)
        state = self.judged.get(key)
        if state is None:
            state = self.judged[key] = [False, None, 0, None]
        elif state[0] or state[2] >= ML_MAX_READS or now - state[3] < ML_RECHECK_S:
            return state[0]
        state[3] = now
        vsize = read_vsize(pid)
        if vsize is None or vsize < ML_MIN_VSIZE or vsize == state[1]:
            return state[0]
        state[1] = vsize
        state[2] += 1
        state[0] = maps_have(pid, ML_LIBS)
        return state[0]

    def forget_except(self, live):
        """Keep only the (pid, start) keys in `live`."""
        for key in list(self.judged):
            if key not in live:
                del self.judged[key]
