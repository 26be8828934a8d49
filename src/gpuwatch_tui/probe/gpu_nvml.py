# gpuwatch probe: the NVML GPU source (nvidia-ml-py's pynvml module, shipped along when it is
# installed where gpuwatch runs).
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "gpu_nvml".
import time

import gpu_metrics
from gpu_gpm import EMPTY as NO_GPM, GpmReader
from gpu_proc_util import ProcUtilReader
from wire import GPU_FACTS


# A GPU's process list (nvmlDeviceGetComputeRunningProcesses, ~310 us on an H200, the dearest NVML call) is
# kept while the GPU's memory used does not change, and read again this often anyway. A process that starts
# or ends on a GPU takes or frees memory, so the list follows it at the next sample as before; what waits up
# to this long is only a change that moves no memory at all. No verdict changes: the engine reads a job's GPU
# from its pid being on the list, and a job that gets on or off a GPU moves the memory used.
PROCS_MAX_AGE_S = 30.0
# A GPU's display-only readings (the table's DISPLAY cadence: temperature, clocks) are read this often and
# repeated in between: a die's temperature moves over seconds, and only the grid, the history, the JSON and the
# metrics export show them (no rule of the engine reads one). A driver call per metric and GPU saved most
# samples (a cold one is ~50 us on an H200).
DISPLAY_READ_EVERY_S = 5.0


def nvml_scalar_reads(nvml, cadence):
    """(metric name, C function name, its constant's value or None, divisor, digits) of each metric of
    `cadence` that NVML gives as one unsigned int, as the table names its call. A metric whose
    constant this nvidia-ml-py lacks is left out (NvmlSource.unread: it reads as None)."""
    out = []
    for m in gpu_metrics.nvml_reads(cadence):
        fn, const = m.nvml
        if const is not None and not hasattr(nvml, const):
            continue
        out.append((m.name, fn, None if const is None else getattr(nvml, const), m.nvml_divisor, m.digits))
    return tuple(out)


def scaled(value, divisor, digits):
    """An NVML number in the metric's unit (a power in mW: divisor 1000), rounded to `digits`. (Written out
    in NvmlSource.sample for the readings of every sample.)"""
    if value is None or divisor == 1:
        return value
    return round(value / float(divisor), digits)


class NvmlDirect(object):
    """The readings a sample takes of every GPU (utilisation, memory v1, and each metric of the table
    NVML gives as one number: `reads`, the (name, function, constant, ...) of nvml_scalar_reads),
    through NVML's C functions as nvidia-ml-py resolved them, into structs made once per GPU.

    The same calls as nvidia-ml-py's wrappers make, without what they add per call (a function
    lookup under a lock, a new struct, a return-code check that raises): about half of a GPU's share
    of a sample's Python time. A call that fails reads as None, as a failed wrapper call does.
    Raises (and the wrappers are used) where nvidia-ml-py does not look as expected."""

    def __init__(self, nvml, handles, every, display):
        import ctypes
        get = nvml._nvmlGetFunctionPointer
        self.util_fn = get("nvmlDeviceGetUtilizationRates")
        self.mem_fn = get("nvmlDeviceGetMemoryInfo")
        fns = dict((r[1], get(r[1])) for r in every + display)
        self.gpus = []
        for h in handles:
            util, mem = nvml.c_nvmlUtilization_t(), nvml.c_nvmlMemory_t()
            # The struct fields read through plain ctypes views of their bytes: nvidia-ml-py's structs
            # read a field through a __getattribute__ of their own (a Python call per field).
            views = (self.field(util, "gpu"), self.field(mem, "used"), self.field(mem, "total"))
            calls = []
            for reads in (every, display):
                made = []
                for _, fn, const, _, _ in reads:
                    out = ctypes.c_uint()
                    args = (h, ctypes.byref(out)) if const is None else (h, ctypes.c_uint(const), ctypes.byref(out))
                    made.append((fns[fn], args, out))
                calls.append(tuple(made))
            self.gpus.append((h, ctypes.byref(util), ctypes.byref(mem)) + views + tuple(calls))

    @staticmethod
    def field(struct, name):
        """A ctypes value sharing the bytes of `struct`'s field `name`."""
        kind = dict(type(struct)._fields_)[name]
        return kind.from_buffer(struct, getattr(type(struct), name).offset)

    def read(self, i, with_display=True):
        """(util %, (memory used, total) as v1 reports them, the `every` readings, the `display` readings
        or None where `with_display` is False), raw as NVML gives them."""
        h, util_ref, mem_ref, util_gpu, mem_used, mem_total, every, display = self.gpus[i]
        return (util_gpu.value if self.util_fn(h, util_ref) == 0 else None,
                (mem_used.value, mem_total.value) if self.mem_fn(h, mem_ref) == 0 else None,
                [out.value if fn(*args) == 0 else None for fn, args, out in every],
                [out.value if fn(*args) == 0 else None for fn, args, out in display] if with_display else None)


class NvmlSource(object):
    name = "nvml"

    def __init__(self, nvml):
        self.nvml = nvml
        self.error = None
        nvml.nvmlInit()
        self.handles = []
        for i in range(nvml.nvmlDeviceGetCount()):
            self.handles.append(nvml.nvmlDeviceGetHandleByIndex(i))
        self.static = []
        for h in self.handles:
            self.static.append({
                "uuid": _s(nvml.nvmlDeviceGetUUID(h)),
                "name": _s(nvml.nvmlDeviceGetName(h)),
                "total": None,
            })
        self.limits = [None] * len(self.handles)
        self.limits_at = 0.0
        # Per GPU: (memory used, when read, its compute processes). Listing processes is the dearest NVML
        # call (two driver round trips and a struct per process: a fifth of the probe's CPU on an H200 in a
        # sandbox); a process that starts, ends or grows changes the memory used, so the list is read again
        # then, and at least every PROCS_MAX_AGE_S.
        self.gpu_procs = [None] * len(self.handles)
        self.mem_v2 = hasattr(nvml, "nvmlMemory_v2")
        # Per GPU: (bytes v1 counts as used that v2 leaves out, v2's total). v2 memory costs ~80 us
        # on an H200 one second apart, v1 ~10 us: v1 is read each sample and this taken off it.
        self.reserved = [None] * len(self.handles)
        # The table's metrics NVML gives as one number: read every sample, or every DISPLAY_READ_EVERY_S.
        self.every = nvml_scalar_reads(nvml, gpu_metrics.SAMPLE)
        self.display_reads = nvml_scalar_reads(nvml, gpu_metrics.DISPLAY)
        # Per GPU: the last display readings, scaled, as (name, value) pairs (DISPLAY_READ_EVERY_S).
        self.display = [tuple((r[0], None) for r in self.display_reads)] * len(self.handles)
        # The table's NVML readings this nvidia-ml-py has no constant for: None in every entry, as a failed read.
        read = set(r[0] for r in self.every + self.display_reads)
        self.unread = tuple((m.name, None) for m in gpu_metrics.METRICS
                            if m.nvml is not None and m.kind == gpu_metrics.READING and m.name not in read)
        self.facts = [None] * len(self.handles)  # (memory total, power limit, process list, their GPU_FACTS)
        self.display_at = -DISPLAY_READ_EVERY_S
        self.driver = _s(self._try(nvml.nvmlSystemGetDriverVersion) or "") or None
        try:
            self.direct = NvmlDirect(nvml, self.handles, self.every, self.display_reads)
        except Exception:
            self.direct = None  # an NVML module unlike nvidia-ml-py's: through its functions, as they are
        try:
            self.gpm = GpmReader(nvml, self.handles)
        except Exception:
            self.gpm = None  # no GPM here (before Hopper, an older driver or nvidia-ml-py): the power signal alone
        try:
            self.proc_util = ProcUtilReader(nvml, self.handles)
        except Exception:
            self.proc_util = None  # no per-process utilisation here: a shared GPU is judged as a whole

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    def readings(self, i, h, with_display=True):
        """(util %, (memory used, total) per v1, the `every` readings, the display readings or None where
        `with_display` is False), raw as NVML gives them; None where unreadable."""
        if self.direct is not None:
            return self.direct.read(i, with_display)
        nvml, get = self.nvml, self._try
        util = get(nvml.nvmlDeviceGetUtilizationRates, h)
        mem = get(nvml.nvmlDeviceGetMemoryInfo, h)

        def read(reads):  # (a function this module lacks: None, as a failed call)
            return [get(getattr(nvml, fn, None), h) if const is None else get(getattr(nvml, fn, None), h, const)
                    for _, fn, const, _, _ in reads]
        return (None if util is None else util.gpu, None if mem is None else (mem.used, mem.total),
                read(self.every), read(self.display_reads) if with_display else None)

    def memory(self, i, h, v1):
        """(used, total) in bytes as v2 reports them (what nvidia-smi shows: v2 excludes memory the
        driver reserves), v1's where there is no v2; None if unreadable. `v1`: (used, total) as the
        v1 call read them this sample."""
        nvml = self.nvml
        if v1 is None:
            return None
        if not self.mem_v2:
            return v1
        reserved = self.reserved[i]
        if reserved is not None:
            return max(0, v1[0] - reserved[0]), reserved[1]
        try:
            v2 = nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
        except Exception:
            self.mem_v2 = False  # no v2 here: v1 as it is, from now on
            return v1
        # Two equal v1 readings around the v2 one: nothing was allocated in between, so the
        # difference is the reservation alone (else it is measured again at the next sample).
        after = self._try(nvml.nvmlDeviceGetMemoryInfo, h)
        if after is not None and after.used == v1[0] and v1[0] >= v2.used:
            self.reserved[i] = (v1[0] - v2.used, v2.total)
        return v2.used, v2.total

    def processes(self, h):
        procs = []
        for p in self._try(self.nvml.nvmlDeviceGetComputeRunningProcesses, h) or []:
            used = getattr(p, "usedGpuMemory", None)
            procs.append({"pid": int(p.pid),
                          "mem_used_mib": None if not isinstance(used, int) or used >= (1 << 60)
                          else round(used / 1048576.0, 1),
                          "sm_pct": None})
        return procs

    # sample() takes `known` (FrameDeltas.known_gpu): a GPU whose facts the client has is built without them
    leaves_known_facts_out = True

    def sample(self, known=None):
        """The GPUs' entries. `known(index, facts)`: whether the client has these GPU_FACTS values (a tuple
        in that order); a GPU's entry leaves them out, unbuilt, where it has (None: every fact, every
        frame). `self.pids`: the pids on the GPUs, as the entries' process lists (built or not) name them."""
        nvml = self.nvml
        now = time.time()
        mono = time.monotonic()
        self.pids = pids = set()
        if now - self.limits_at > 30:
            self.limits = [self._try(nvml.nvmlDeviceGetEnforcedPowerLimit, h) for h in self.handles]
            self.reserved = [None] * len(self.handles)  # measured again now and then
            self.limits_at = now
        with_display = not 0.0 <= mono - self.display_at < DISPLAY_READ_EVERY_S
        if with_display:
            self.display_at = mono
        display, every, display_reads, unread = self.display, self.every, self.display_reads, self.unread
        direct, reserved, last_facts = self.direct, self.reserved, self.facts
        proc_util = self.proc_util
        if proc_util is not None:
            # (the GPUs shared as of the last sample: their lists are kept until memory moves)
            shared = dict((i, [p["pid"] for p in kept[2]]) for i, kept in enumerate(self.gpu_procs)
                          if kept is not None and len(kept[2]) > 1)
            if shared:
                proc_util.due(shared, mono)
        out = []
        for i, h in enumerate(self.handles):
            # (the usual case inline, a call each fewer a GPU: the direct read, and v1's figures less what the
            # driver reserves, once measured: see memory)
            util, v1, now_read, display_read = direct.read(i, with_display) if direct is not None else \
                self.readings(i, h, with_display)
            if display_read is not None:
                display[i] = tuple([(r[0], scaled(v, r[3], r[4])) for r, v in zip(display_reads, display_read)])
            r = reserved[i]
            mem = (max(0, v1[0] - r[0]), r[1]) if r is not None and v1 is not None else self.memory(i, h, v1)
            limit = self.limits[i]
            mem_used = None if mem is None else mem[0]
            kept = self.gpu_procs[i]
            if kept is None or kept[0] != mem_used or mem_used is None or mono - kept[1] >= PROCS_MAX_AGE_S:
                kept = self.gpu_procs[i] = (mem_used, mono, self.processes(h))
            listed = kept[2] if proc_util is None else proc_util.annotated(i, kept[2], mono)
            for p in listed:
                pids.add(p["pid"])
            entry = {"index": i, "util_pct": util,
                     "mem_used_mib": None if mem is None else round(mem[0] / 1048576.0, 1)}
            for (name, _, _, divisor, digits), value in zip(every, now_read):
                entry[name] = value if value is None or divisor == 1 else round(value / float(divisor), digits)
            entry.update(display[i])
            if unread:
                entry.update(unread)
            # GPU_FACTS, made again only when what they are made of moved (the same tuple: compared at once)
            total = None if mem is None else mem[1]
            last = last_facts[i]
            if last is not None and last[0] == total and last[1] == limit and last[2] is listed:
                facts = last[3]
            else:
                static = self.static[i]
                facts = (static["uuid"], static["name"], None if total is None else round(total / 1048576.0, 1),
                         None if limit is None else round(limit / 1000.0, 2), listed)
                last_facts[i] = (total, limit, listed, facts)
            if known is None or not known(i, facts):
                entry.update(zip(GPU_FACTS, facts))
                # each frame its own list: whoever edits one leaves the kept list
                entry["processes"] = [dict(p) for p in listed]
            out.append(entry)
        gpm = self.gpm
        if gpm is None:
            for entry in out:
                entry.update(NO_GPM)
            return out
        limits = self.limits
        gpm.due([e["util_pct"] for e in out],
                [e["power_w"] * 1000.0 / limits[e["index"]] if e.get("power_w") is not None and limits[e["index"]]
                 else None for e in out], mono)
        for entry in out:
            entry.update(gpm.figures(entry["index"], mono))
        return out

    def close(self):
        if self.gpm is not None:
            self.gpm.close()
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def _s(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
