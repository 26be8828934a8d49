# gpuwatch probe: which GPU source a host gets: NVML, then nvidia-smi streaming, then none
# (a clean state, not an error), saying why each was passed over.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "gpu_choice".
import importlib
import shutil

from gpu_nvml import NvmlSource
from gpu_smi import SmiSource


class NoGpu(object):
    name = "none"
    driver = None

    def __init__(self, reason=None):
        self.error = reason

    def sample(self):
        return []

    def close(self):
        pass


def nvml_library_loads():
    import ctypes
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        raise RuntimeError("libnvidia-ml.so.1 not found (no NVIDIA driver here)")


def open_gpu_source(prefer, interval):
    """NVML, then nvidia-smi streaming, then none; say why each was passed over."""
    reasons = []
    if prefer in ("auto", "nvml"):
        try:
            nvml_library_loads()  # cheap; compiling pynvml (~120 ms) is not
            nvml = importlib.import_module("pynvml")  # the bundle's, else the host's
            source = NvmlSource(nvml)
            if source.handles or prefer == "nvml":
                return source
            reasons.append("NVML: no devices")
        except Exception as exc:
            reasons.append("NVML: %s" % (str(exc) or type(exc).__name__))
    if prefer in ("auto", "nvidia-smi"):
        exe = shutil.which("nvidia-smi")
        if exe is None:
            reasons.append("nvidia-smi: not on PATH")
        else:
            try:
                source = SmiSource(exe, interval)
                source.check_started()
                return source
            except Exception as exc:
                try:
                    source.close()
                except Exception:
                    pass
                msg = str(exc)
                if "No devices were found" in msg:
                    reasons.append("nvidia-smi: no devices")
                else:
                    reasons.append(msg)
    return NoGpu("; ".join(reasons) or None)
