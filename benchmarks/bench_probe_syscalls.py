"""System calls per sample of the running probe at 1 Hz: 8 GPUs from the nvidia-smi stand-in, 8 real jobs
each with a child and a tailed log (as bench_probe_cost.py --fleet), `strace -c -f` attached to the probe
(all its threads) for N samples once the jobs are past the young-job window.

    python benchmarks/bench_probe_syscalls.py [--samples 10] [--nvml-standin] [--json OUT]

--nvml-standin: the GPUs through the probe's NVML path (as on a GPU host) from the stand-in
libnvidia-ml.so.1 built from tests/support/fake_nvml.c (no ioctl: the driver's calls are left out).

Where a system call is dear (a sandboxed kernel), their count is most of a sample's cost. Needs strace and
ptrace permission on the probe (it is our own child).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_fleet_jobs import JobFleet, send

YOUNG_WINDOW_S = 36.0  # past the probe's CANDIDATE_YOUNG_S (30 s): steady state


def count(samples: int, nvml_standin: bool = False) -> dict:
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed")
    with tempfile.TemporaryDirectory(prefix="gpuwatch-probe-syscalls-") as tmp:
        fleet = JobFleet(Path(tmp), 8, 8)
        try:
            if nvml_standin:
                from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env

                env = fake_nvml_env(build_fake_nvml(Path(tmp) / "nvml"), 8, fleet.pids, fleet.env())
                probe = fleet.start_probe(1.0, gpu_source="nvml", env=env)
            else:
                probe = fleet.start_probe(1.0)
            send(probe, {"op": "want", "pids": fleet.pids, "tails": fleet.tails(), "dirs": {}, "matches": {}})
            probe.stdout.readline()  # hello
            started = time.time()
            while time.time() - started < YOUNG_WINDOW_S:
                probe.stdout.readline()
            out = Path(tmp) / "strace.txt"
            tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(probe.pid), "-o", str(out)],
                                      stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached to every thread
            probe.stdout.readline()  # from the end of one sample ...
            begin = time.time()
            sizes = [len(probe.stdout.readline()) for _ in range(samples)]  # ... to the end of the last
            elapsed = time.time() - begin
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=10)
            probe.stdin.close()
            probe.wait(timeout=10)
            text = out.read_text()
        finally:
            fleet.stop()
    calls = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and re.match(r"^[\d.]+$", fields[0]) and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    # The trace ran ~1 s before the first sample and until just after the last: per interval of 1 s.
    intervals = elapsed + 1.0
    return {"samples": samples, "gpu_source": "nvml stand-in" if nvml_standin else "nvidia-smi stand-in",
            "load_average_after": " ".join("%.2f" % x for x in os.getloadavg()), "traced_s": round(intervals, 1),
            "syscalls_per_sample": round(sum(calls.values()) / intervals, 1),
            "by_call_per_sample": {k: round(v / intervals, 1) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])},
            "frame_bytes_median": sorted(sizes)[len(sizes) // 2]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--nvml-standin", action="store_true", help="GPUs through the NVML path (stand-in library)")
    args = ap.parse_args()
    result = count(args.samples, args.nvml_standin)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
