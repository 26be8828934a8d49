"""Every GPU metric gpuwatch knows, declared once: one row each.

The probe reads this table to know what to read (NVML and nvidia-smi) and under which key a frame
carries it; the local side reads it for the GPU record's fields, the frame parser, `status --json`,
the `status` table, the recording's columns, the Prometheus export and the DCGM feed's mapping.
A new metric is one row here plus, where the row cannot name it, its read in the GPU source.

Shipped to hosts: stdlib only, Python 3.6 grammar.
"""

# How often a source reads a metric (its cost class):
SAMPLE = "sample"  # every sample: what the phase engine judges (utilisation, memory, power)
DISPLAY = "display"  # every few seconds, repeated in between: only shown, never judged (temperature, clocks)
SLOW = "slow"  # dear reads taken seldom (GPM counters, per-process utilisation); a source skips a cadence it lacks
CADENCES = (SAMPLE, DISPLAY, SLOW)

# What a row is in a frame: a reading is sent every frame; a fact only when it changes (GPU_FACTS).
READING = "reading"
FACT = "fact"

# How a host's GPUs are summed up in one figure (a host's chart), and what a window of history shows.
SUMMARIES = ("mean", "sum", "max", "latest")


class GpuMetric(object):
    """One row. `nvml` is (C function, constant name or None) for a reading NVML returns as one
    unsigned int, `nvml_divisor` of them to the metric's unit (mW: 1000 to a W), rounded to
    `digits`; None where the NVML source reads it its own way (a struct, or a fact). `smi` is the `nvidia-smi --query-gpu` field (csv, nounits: the
    metric's unit). `dcgm`: the dcgm-exporter series. `prom`: (name, help, scale to its base unit).
    `column`/`suffix`: the `status` table's header and unit text; `of`: the metric it is shown
    against there ("used/total"), which then has no column of its own. `grid`: (header, format,
    text when unknown) of its column in the dashboard's GPU grid, None for none (the grid draws
    utilisation and memory with their histories itself). `level`: the colour rule (ui/levels.py:
    util, mem, temp; load: percent of the metric that is `of` it) where one applies."""

    __slots__ = ("name", "unit", "label", "kind", "cadence", "nvml", "nvml_divisor", "digits", "smi", "dcgm",
                 "summary", "prom", "column", "suffix", "of", "grid", "level")

    def __init__(self, name, unit, label, kind=READING, cadence=SAMPLE, nvml=None, nvml_divisor=1, digits=None,
                 smi=None, dcgm=None, summary="mean", prom=None, column=None, suffix="", of=None, grid=None, level=None):
        if cadence not in CADENCES:
            raise ValueError("%s: cadence %r is none of %s" % (name, cadence, ", ".join(CADENCES)))
        if summary not in SUMMARIES:
            raise ValueError("%s: summary %r is none of %s" % (name, summary, ", ".join(SUMMARIES)))
        self.name = name
        self.unit = unit
        self.label = label
        self.kind = kind
        self.cadence = cadence
        self.nvml = nvml
        self.nvml_divisor = nvml_divisor
        self.digits = digits
        if nvml_divisor != 1 and digits is None:
            raise ValueError("%s: a scaled NVML reading needs its digits" % name)
        self.smi = smi
        self.dcgm = dcgm
        self.summary = summary
        self.prom = prom
        self.column = column
        self.suffix = suffix
        self.of = of
        self.grid = grid
        self.level = level

    def __repr__(self):
        return "GpuMetric(%r)" % self.name


# The order is the GPU record's field order after (index, uuid, name): add new rows at the end.
METRICS = (
    GpuMetric("util_pct", "%", "utilization", smi="utilization.gpu", dcgm="DCGM_FI_DEV_GPU_UTIL",
              prom=("gpuwatch_gpu_utilization_percent", "GPU utilization", 1),
              column="UTIL", suffix="%", level="util"),
    # NVML: memory v1 each sample, less what v2 leaves out (the NVML source's own read).
    GpuMetric("mem_used_mib", "MiB", "memory used", smi="memory.used", dcgm="DCGM_FI_DEV_FB_USED",
              prom=("gpuwatch_gpu_memory_used_bytes", "GPU memory in use", 1024 * 1024),
              column="MEM USED/TOTAL", suffix=" MiB", level="mem"),
    # DCGM: used + free + reserved (the feed adds them up).
    GpuMetric("mem_total_mib", "MiB", "memory total", kind=FACT, smi="memory.total", summary="sum",
              prom=("gpuwatch_gpu_memory_total_bytes", "GPU memory in all", 1024 * 1024),
              suffix=" MiB", of="mem_used_mib"),
    GpuMetric("temp_c", "C", "temperature", cadence=DISPLAY, nvml=("nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU"),
              smi="temperature.gpu", dcgm="DCGM_FI_DEV_GPU_TEMP", summary="max",
              prom=("gpuwatch_gpu_temperature_celsius", "GPU temperature", 1),
              column="TEMP", suffix="C", grid=("tmp", "{:>3.0f}°", "  -"), level="temp"),
    GpuMetric("power_w", "W", "power", nvml=("nvmlDeviceGetPowerUsage", None), nvml_divisor=1000, digits=2,
              smi="power.draw", dcgm="DCGM_FI_DEV_POWER_USAGE", summary="sum",
              prom=("gpuwatch_gpu_power_watts", "GPU power draw", 1),
              column="POWER/LIMIT", suffix=" W", grid=("power", "{:>4.0f}W", "    -"), level="load"),
    # NVML: the enforced limit, read every 30 s (the NVML source's own read).
    GpuMetric("power_limit_w", "W", "power limit", kind=FACT, smi="power.limit", dcgm="DCGM_FI_DEV_POWER_MGMT_LIMIT",
              summary="sum", suffix=" W", of="power_w"),
    GpuMetric("sm_clock_mhz", "MHz", "SM clock", cadence=DISPLAY, nvml=("nvmlDeviceGetClockInfo", "NVML_CLOCK_SM"),
              smi="clocks.sm", dcgm="DCGM_FI_DEV_SM_CLOCK",
              prom=("gpuwatch_gpu_sm_clock_hertz", "GPU SM clock", 1e6),
              column="SM CLK", suffix=" MHz"),
    GpuMetric("mem_clock_mhz", "MHz", "memory clock", cadence=DISPLAY, nvml=("nvmlDeviceGetClockInfo", "NVML_CLOCK_MEM"),
              smi="clocks.mem", dcgm="DCGM_FI_DEV_MEM_CLOCK",
              prom=("gpuwatch_gpu_memory_clock_hertz", "GPU memory clock", 1e6),
              column="MEM CLK", suffix=" MHz"),
)

BY_NAME = dict((m.name, m) for m in METRICS)
# metric -> the metric it is shown against (power_w -> power_limit_w)
TOTALS = dict((m.of, m.name) for m in METRICS if m.of)
NAMES = tuple(m.name for m in METRICS)
# What a frame carries every sample, and what only when it changed (after the GPU's uuid and name).
READINGS = tuple(m.name for m in METRICS if m.kind == READING)
FACTS = tuple(m.name for m in METRICS if m.kind == FACT)
# The nvidia-smi fields of the probe's query, in this order after index, uuid and name.
SMI_METRICS = tuple(m for m in METRICS if m.smi)
# The recording's GPU row before its header named its columns (format version 1), and the UI fixtures'.
V1_ROW = ("util_pct", "mem_used_mib", "temp_c", "power_w", "sm_clock_mhz")


def nvml_reads(cadence):
    """The rows of one cadence that NVML gives as one number through the row's own call."""
    return tuple(m for m in METRICS if m.nvml is not None and m.cadence == cadence and m.kind == READING)


def summarise(name, values):
    """One figure for `values` (None: not measured) by the metric's summary rule; None if none is known."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    rule = BY_NAME[name].summary
    if rule == "mean":
        return sum(known) / len(known)
    if rule == "sum":
        return sum(known)
    if rule == "max":
        return max(known)
    return known[-1]
