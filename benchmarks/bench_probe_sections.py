"""Where one probe sample's CPU goes, by part, on a real host: the probe's Probe.sample runs in this
process (not shipped), at 1 Hz, beside 8 real watched jobs (bench_probe_cost.HostJobs, 4 of them on a
GPU where there is one), and each part's thread CPU time is summed over the samples. Then the cost of
single system calls and NVML calls, each timed cold (one per 0.1 s, as a 1 Hz probe makes them) and hot.

    python benchmarks/bench_probe_sections.py [--jobs 8] [--torch-jobs 4] [--samples 30] [--json OUT]

The parts nest (read_stat runs inside descendants; Tail.poll's own calls are in Tail.poll): each line is
inclusive. Timing every part costs two clock reads a call: the unwrapped sample's CPU is given first.
Also: how often loadavg's mark moved between two samples (the descendant walk is skipped while it stands),
the calls a sample makes (Python functions, os calls ~ system calls; profile hook), and the intrinsic
floor: the reads no sample can leave out (a stat per watched process, a pread per grown log, the NVML
readings, loadavg) at their cold costs, printed last as a line of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from bench_probe_cost import HostJobs  # noqa: E402

from gpuwatch_tui.transport.probe_bundle import LoadedProbe  # noqa: E402

# The probe loaded as a host loads it (agent.py with its shipped modules); with nvidia-ml-py where installed.
PROBE = LoadedProbe(with_nvml=True)


def probe_name(name: str):
    """A name of the probe's: agent.py's, else that of the shipped module defining it."""
    if name in PROBE.ns:
        return PROBE.ns[name]
    for module in PROBE.loaded_modules():
        if name in vars(module):
            return vars(module)[name]
    raise KeyError(name)


CPU = time.thread_time_ns


def timed(totals: dict, name: str, fn):
    def wrapper(*args, **kwargs):
        t0 = CPU()
        try:
            return fn(*args, **kwargs)
        finally:
            cell = totals.setdefault(name, [0, 0])
            cell[0] += CPU() - t0
            cell[1] += 1
    return wrapper


def wrap_parts(probe, totals: dict) -> None:
    for name in ("read_stat", "proc_info", "dir_stat", "parse_stat", "read_parent", "all_pids"):
        PROBE.set_global(name, timed(totals, name, probe_name(name)))  # wherever the probe calls it from
    for cls, names in ((probe_name("TreeWalk"), ("scan", "descendants", "live_children")),
                       (probe_name("Tail"), ("poll",)), (probe_name("FrameDeltas"), ("apply", "begin")),
                       (probe_name("JobCandidates"), ("poll",)), (probe_name("ProcCache"), ("static_facts",)),
                       (probe_name("ProcFiles"), ("read", "end_sample")), (probe_name("KeptFile"), ("read",)),
                       (probe_name("HostCpu"), ("percent",)), (probe_name("CompilerWatch"), ("set_targets", "take"))):
        for name in names:
            setattr(cls, name, timed(totals, f"{cls.__name__}.{name}", getattr(cls, name)))
    gpu = probe.gpu
    for name in ("sample", "readings", "memory", "processes"):
        if hasattr(gpu, name):
            setattr(gpu, name, timed(totals, f"gpu.{name}", getattr(gpu, name)))


def encode(frame: dict) -> bytes:
    return probe_name("encode_frame")(frame)  # as the probe writes it


def median_us(per: list[int] | None) -> int | None:
    return sorted(per)[len(per) // 2] // 1000 if per else None


def run_samples(probe, n: int, interval: float, sink, seen: dict | None = None) -> list[int]:
    """Thread CPU of each sample (with its encode and write). `seen`: counts what each sample found (the
    mark moved, the trees walked, watched processes, logs that grew), summed into it."""
    per = []
    lean_taken = [0]  # samples that took the lean path: counted around LeanPath.sample (it keeps no count)
    lean_sample = probe.lean.sample

    def counted(*args):
        frame = lean_sample(*args)
        lean_taken[0] += frame is not None
        return frame

    if seen is not None:
        probe.lean.sample = counted
    next_tick = time.time()
    for _ in range(n):
        lean_before = lean_taken[0]
        t0 = CPU()
        frame = probe.sample()
        sink.write(encode(frame))
        sink.flush()
        per.append(CPU() - t0)
        if seen is not None:
            lean = lean_taken[0] != lean_before
            seen.setdefault("lean_ns" if lean else "full_ns", []).append(per[-1])
            for name, value in (("mark_moved", probe.walk.tasks_moved), ("trees_walked", probe.walk.walk_trees),
                                ("lean", lean), ("watched_procs", len(frame["procs"])),
                                ("logs_grown", sum(1 for t in frame["tails"] if t.get("data")))):
                seen[name] = seen.get(name, 0) + value
        next_tick += interval
        time.sleep(max(0.0, next_tick - time.time()))
    probe.lean.sample = lean_sample
    return per


def count_calls(probe, n: int, interval: float, sink) -> dict:
    """Calls per sample (with encode and write), from a profile hook over `n` samples at `interval`: Python
    functions run (and how many distinct ones), C functions, and the os module's (about one system call
    each: pread, open, close, listdir, readlink, stat, write; ctypes calls into NVML are not seen)."""
    py, distinct, c_calls, os_calls = [0], set(), [0], {}

    def hook(frame, event, arg):
        if event == "call":
            py[0] += 1
            distinct.add(frame.f_code)
        elif event == "c_call":
            c_calls[0] += 1
            if getattr(arg, "__module__", None) == "posix":
                os_calls[arg.__name__] = os_calls.get(arg.__name__, 0) + 1

    next_tick = time.time()
    for _ in range(n):
        sys.setprofile(hook)
        try:
            sink.write(encode(probe.sample()))
            sink.flush()
        finally:
            sys.setprofile(None)
        next_tick += interval
        time.sleep(max(0.0, next_tick - time.time()))
    return {"python_calls": round(py[0] / n, 1), "distinct_python_functions": len(distinct),
            "c_calls": round(c_calls[0] / n, 1), "os_calls": round(sum(os_calls.values()) / n, 1),
            "os_calls_by_name": {k: round(v / n, 1) for k, v in sorted(os_calls.items(), key=lambda kv: -kv[1])}}


def intrinsic_floor(seen: dict, samples: int, gpus: int, calls: dict) -> dict:
    """The reads no sample can leave out, each at its measured cold cost: a stat per watched process, a pread
    per log that grew, the NVML readings per GPU (util, memory, power, clock: gpu.readings), loadavg.
    "us": the stats and log reads at their cost one a job in a row (as a sample makes them); "us_each_cold":
    every one at the cost of a single cold call (an upper bound: a sample's second stat read is warmer)."""
    def cold(name):
        return calls.get(name, {}).get("cold_us_median", 0.0)

    procs, logs = seen["watched_procs"] / samples, seen["logs_grown"] / samples
    nvml, loadavg = gpus * cold("gpu.readings (direct, no temp)"), cold("pread kept /proc/loadavg")
    terms = {
        "stat per watched process": (procs, cold("pread kept /proc/PID/stat, one a job in a row (per call)")),
        "pread per grown log": (logs, cold("pread kept log (no fstat), one a job in a row (per call)")),
        "NVML readings per GPU": (gpus, cold("gpu.readings (direct, no temp)")),
        "loadavg": (1, loadavg),
    }
    each_cold = procs * cold("pread kept /proc/PID/stat") + logs * cold("pread kept log (no fstat)") + nvml + loadavg
    return {"us": round(sum(n * us for n, us in terms.values()), 1), "us_each_cold": round(each_cold, 1),
            "terms": {name: {"per_sample": round(n, 2), "cold_us": us} for name, (n, us) in terms.items()}}


def call_costs(jobs: HostJobs, gpu) -> dict:
    """Single calls, µs each: cold (one per 0.1 s) and hot (back to back)."""
    pid = jobs.pids[0]
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    log_fd = os.open(jobs.logs[0], os.O_RDONLY)
    loadavg_fd = os.open("/proc/loadavg", os.O_RDONLY)
    log_end = os.fstat(log_fd).st_size
    # One call a job in a row, as a sample makes them: the first is cold, the next share its warm code
    # (each reads another process's or file's data). Timed per call.
    stat_fds = [os.open(f"/proc/{p}/stat", os.O_RDONLY) for p in jobs.pids]
    log_fds = [os.open(log, os.O_RDONLY) for log in jobs.logs]
    log_ends = [os.fstat(f).st_size for f in log_fds]
    per_job = len(jobs.pids)

    def stats_in_a_row():
        for f in stat_fds:
            os.pread(f, 4096, 0)

    def logs_in_a_row():
        for f, end in zip(log_fds, log_ends):
            os.pread(f, 65536, end)
    calls = {
        "pread kept /proc/PID/stat": lambda: os.pread(fd, 4096, 0),
        "pread kept /proc/loadavg": lambda: os.pread(loadavg_fd, 128, 0),
        "pread kept log (no fstat)": lambda: os.pread(log_fd, 65536, log_end),
        "pread kept /proc/PID/stat, one a job in a row (per call)": stats_in_a_row,
        "pread kept log (no fstat), one a job in a row (per call)": logs_in_a_row,
        "open+read+close /proc/PID/stat": lambda: probe_name("read_raw")(f"/proc/{pid}/stat"),
        "pread kept log (at its end)": lambda: os.pread(log_fd, 65536, os.fstat(log_fd).st_size),
        "stat a log path": lambda: os.stat(jobs.logs[0]),
        "readlink /proc/PID/cwd": lambda: os.readlink(f"/proc/{pid}/cwd"),
        "listdir /proc": lambda: os.listdir("/proc"),
        "time.time": time.time,
        "thread_time_ns": CPU,
    }
    if isinstance(gpu, probe_name("NvmlSource")) and gpu.handles:
        nvml, h = gpu.nvml, gpu.handles[0]
        calls.update({
            "nvmlDeviceGetUtilizationRates": lambda: nvml.nvmlDeviceGetUtilizationRates(h),
            "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(h),
            "nvmlDeviceGetPowerUsage": lambda: nvml.nvmlDeviceGetPowerUsage(h),
            "nvmlDeviceGetClockInfo": lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "nvmlDeviceGetTemperature": lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "nvmlDeviceGetComputeRunningProcesses": lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h),
        })
        if gpu.direct is not None:
            calls["gpu.readings (direct, no temp)"] = lambda: gpu.readings(0, h, False)
    out = {}
    for name, fn in calls.items():
        fn()
        cold = []
        for _ in range(10):
            time.sleep(0.1)
            t0 = CPU()
            fn()
            cold.append(CPU() - t0)
        t0 = CPU()
        for _ in range(200):
            fn()
        hot = (CPU() - t0) / 200
        cold.sort()
        per = per_job if "in a row" in name else 1
        out[name] = {"cold_us_median": round(cold[len(cold) // 2] / 1000 / per, 1),
                     "hot_us": round(hot / 1000 / per, 1)}
    for f in stat_fds + log_fds:
        os.close(f)
    os.close(fd)
    os.close(log_fd)
    os.close(loadavg_fd)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--torch-jobs", type=int, default=4)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuwatch-probe-parts-") as tmp:
        jobs = HostJobs(tmp, args.jobs, args.torch_jobs)
        try:
            ready = jobs.wait_ready(90)
            probe = probe_name("Probe")({"interval": 1.0, "fact_deltas": True})
            probe.gpu = probe_name("open_gpu_source")("auto", 1.0)
            probe.set_wants({"pids": jobs.pids, "tails": jobs.tails(), "dirs": {}, "matches": {}})
            sink = open(os.devnull, "wb")
            run_samples(probe, 5, 0.2, sink)
            # past the young-job window (CANDIDATE_YOUNG_S), as bench_probe_cost's 1 Hz stage
            time.sleep(max(0.0, jobs.started + 35 - time.time()))
            seen: dict = {}
            plain = run_samples(probe, args.samples, 1.0, sink, seen)
            plain_20hz = run_samples(probe, args.samples * 4, 0.05, sink)
            calls_1hz = count_calls(probe, min(args.samples, 10), 1.0, sink)
            totals: dict = {}
            wrap_parts(probe, totals)
            wrapped = run_samples(probe, args.samples, 1.0, sink)
            result = {
                "gpu_source": probe.gpu.name, "gpus": len(getattr(probe.gpu, "handles", []) or []),
                "jobs": args.jobs, "jobs_ready_after_s": ready, "samples": args.samples,
                "sample_us_median_1hz": median_us(plain),
                "sample_us_mean_1hz": round(sum(plain) / len(plain) / 1000),  # what the probe costs over time
                "sample_us_median_20hz": median_us(plain_20hz),
                "wrapped_sample_us_median_1hz": median_us(wrapped),
                # at 1 Hz: how often loadavg's mark (tasks total, last pid) moved since the last sample, and
                # how often the descendants were walked (the mark moved, a scan ran, facts sent again or the 30 s safety net)
                "mark_moved_per_sample": round(seen["mark_moved"] / args.samples, 2),
                "trees_walked_per_sample": round(seen["trees_walked"] / args.samples, 2),
                # the share of samples that took the lean path (LeanPath.sample), and each path's CPU
                # (thread CPU with encode and write, median; None where no sample took it)
                "lean_per_sample": round(seen["lean"] / args.samples, 2),
                "lean_sample_us_median_1hz": median_us(seen.get("lean_ns")),
                "full_sample_us_median_1hz": median_us(seen.get("full_ns")),
                "watched_procs_per_sample": round(seen["watched_procs"] / args.samples, 2),
                "logs_grown_per_sample": round(seen["logs_grown"] / args.samples, 2),
                "calls_per_sample_1hz": calls_1hz,
                "parts_us_per_sample": {name: {"us": round(ns / args.samples / 1000, 1),
                                               "calls": round(calls / args.samples, 1)}
                                        for name, (ns, calls) in sorted(totals.items(), key=lambda kv: -kv[1][0])},
                "single_calls": call_costs(jobs, probe.gpu),
            }
            result["intrinsic_floor"] = intrinsic_floor(seen, args.samples, result["gpus"], result["single_calls"])
        finally:
            jobs.stop()
    text = json.dumps(result, indent=1)
    print(text)
    floor = result["intrinsic_floor"]
    print("intrinsic floor: %.1f us per sample (%s; %.1f us with every call as cold as a single one)" % (
        floor["us"], ", ".join("%s %.2f x %.1f us" % (name, t["per_sample"], t["cold_us"])
                               for name, t in floor["terms"].items()), floor["us_each_cold"]))
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
