# gpuwatch probe: NVML GPM counters (Hopper and later): SM activity, tensor pipe activity and DRAM
# bandwidth, what tells a GPU that works from one whose kernel waits (a rank spinning in a collective
# reads 100% util at ~0.8% SM active, no DRAM traffic, on an H200).
#
# A GPM read is dear: nvmlGpmSampleGet ~0.2 ms and nvmlGpmMetricsGet 1.2-3.7 ms from Python on an H200,
# against ~0.03 ms for a whole NVML sample. So one GPU is read per READ_EVERY_S at most, all GPUs taken
# together: (0.2 + 3.7 ms) / 4 s keeps the average cost per 1 s sample under 1 ms at worst (~0.6 ms at the
# median metrics cost), however many GPUs a host has. The GPUs whose
# readings are ambiguous come first: high util at low power could be a spin or a small kernel working,
# and only GPM can tell them apart. Other busy GPUs are read in turn, each at most every BUSY_EVERY_S and
# at least every other slot (an ambiguous GPU never starves them), for the JSON and the export; idle GPUs
# are not read (their SM activity is 0 and says nothing new), and lose the figures of their busy time.
# A GPU's figures are those of the window between its last two reads, kept until KEEP_S old.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "gpu_gpm".

import time

READ_EVERY_S = 4.0
BUSY_EVERY_S = 15.0
KEEP_S = 120.0  # (8 GPUs all ambiguous: each is read every 32 s)
BUSY_UTIL = 50  # below this a GPU is not read
SPIN_UTIL = 90  # util at or above this ...
LOW_POWER_FRACTION = 0.35  # ... at power below this share of the limit: ambiguous, read first
# nvidia-ml-py's NVML_GPM_METRIC_* ids of the metrics read, and the frame keys (gpu_metrics rows)
METRICS = (("NVML_GPM_METRIC_SM_UTIL", 2, "sm_active_pct"),
           ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5, "tensor_active_pct"),
           ("NVML_GPM_METRIC_DRAM_BW_UTIL", 10, "dram_active_pct"))
KEYS = tuple(m[2] for m in METRICS)
EMPTY = tuple((k, None) for k in KEYS)


class GpmReader(object):
    """Per GPU: two GPM sample buffers (the last read and the one before), the figures of the window
    between them and when they were taken. `figures(i)`: the (key, value) pairs of GPU i for its frame
    entry. `due(entries, limits, now)`: reads the one GPU whose turn it is, if a read is due."""

    def __init__(self, nvml, handles):
        self.nvml = nvml
        self.handles = handles
        self.supported = []
        for h in handles:
            try:
                self.supported.append(bool(nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice))
            except Exception:
                self.supported.append(False)
        if not any(self.supported):
            raise RuntimeError("no GPU here supports GPM")
        self.ids = tuple(getattr(nvml, name, default) for name, default, _ in METRICS)
        self.last = [None] * len(handles)  # (sample, monotonic time) of each GPU's last read
        self.kept = [EMPTY] * len(handles)
        self.kept_at = [None] * len(handles)
        self.read_at = -READ_EVERY_S
        self.turn = 0  # where the round of busy GPUs goes on
        self.last_read = [None] * len(handles)  # when each GPU was last read
        self.took_ambiguous = False  # whether the last slot went to an ambiguous GPU
        self.cost_s = 0.0  # time spent in GPM reads so far (the probe's cost, for the benchmark)
        self.reads = 0

    def figures(self, i, now):
        at = self.kept_at[i]
        if at is None or now - at > KEEP_S:
            return EMPTY
        return self.kept[i]

    def due(self, utils, power_fractions, now):
        """Read the GPU whose turn it is, if READ_EVERY_S has passed since the last read. `utils`,
        `power_fractions`: this sample's readings per GPU (None: unknown)."""
        n = len(self.handles)
        for i in range(n):
            if utils[i] is not None and utils[i] < BUSY_UTIL and self.last[i] is not None:
                self._forget(i)  # what it did while busy says nothing of it now
        if now - self.read_at < READ_EVERY_S:
            return
        ambiguous, busy = [], []
        for k in range(n):
            i = (self.turn + k) % n
            u = utils[i]
            if not self.supported[i] or u is None or u < BUSY_UTIL:
                continue
            pf = power_fractions[i]
            if u >= SPIN_UTIL and (pf is None or pf < LOW_POWER_FRACTION):
                ambiguous.append(i)
            elif self.last_read[i] is None or now - self.last_read[i] >= BUSY_EVERY_S:
                busy.append(i)
        if ambiguous and busy:
            pick = busy if self.took_ambiguous else ambiguous
        else:
            pick = ambiguous or busy
        if not pick:
            return
        i = pick[0]
        self.took_ambiguous = pick is ambiguous
        self.last_read[i] = now
        self.turn = (i + 1) % n
        self.read_at = now
        self._read(i, now)

    def _forget(self, i):
        self.kept_at[i] = None
        self.last_read[i] = None
        prev, self.last[i] = self.last[i], None
        if prev is not None:
            try:
                self.nvml.nvmlGpmSampleFree(prev[0])
            except Exception:
                pass

    def _read(self, i, now):
        nvml = self.nvml
        t0 = time.perf_counter()
        try:
            sample = nvml.nvmlGpmSampleAlloc()
            nvml.nvmlGpmSampleGet(self.handles[i], sample)
        except Exception:
            self.supported[i] = False  # refused once: not asked again
            return
        prev = self.last[i]
        self.last[i] = (sample, now)
        if prev is not None:
            try:
                if now - prev[1] <= KEEP_S:
                    self.kept[i] = self._metrics(prev[0], sample)
                    self.kept_at[i] = now
            finally:
                try:
                    nvml.nvmlGpmSampleFree(prev[0])
                except Exception:
                    pass
        self.cost_s += time.perf_counter() - t0
        self.reads += 1

    def _metrics(self, first, second):
        nvml = self.nvml
        mg = nvml.c_nvmlGpmMetricsGet_t()
        mg.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1)
        mg.numMetrics = len(self.ids)
        mg.sample1 = first
        mg.sample2 = second
        for k, metric_id in enumerate(self.ids):
            mg.metrics[k].metricId = metric_id
        try:
            nvml.nvmlGpmMetricsGet(mg)
        except Exception:
            return EMPTY
        out = []
        for k, key in enumerate(KEYS):
            m = mg.metrics[k]
            value = m.value
            ok = m.nvmlReturn == 0 and value == value and 0.0 <= value <= 100.0001  # (NaN, a wild value: unknown)
            out.append((key, round(value, 2) if ok else None))
        return tuple(out)

    def close(self):
        for kept in self.last:
            if kept is not None:
                try:
                    self.nvml.nvmlGpmSampleFree(kept[0])
                except Exception:
                    pass
        self.last = [None] * len(self.handles)
