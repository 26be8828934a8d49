"""Cut the engine-test windows out of the recorded `gpuwatch watch --json` runs on 2x H200.

    python tests/data/gpu_runs/extract.py   # rewrites h200_windows.json from benchmarks/results/

Per window and per one-second snapshot it keeps what the recording has: the job's GPU readings
(util, memory, power, limit), the CPU rates and compile-worker count the verdict's evidence showed,
the log's line count, and the verdict the engine gave at the time. Times are relative to the job's
first snapshot.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[2] / "benchmarks" / "results"
CPU = re.compile(r"^CPU (?:flat \()?\+(?P<all>[\d.]+) cores(?: \((?P<kids>[\d.]+) in children\))?")
RANK = re.compile(r"^one rank spins (?P<cores>[\d.]+) cores")
WORKERS = re.compile(r"^inductor compile workers: (\d+)")

# window name: (recording, job name, first and last snapshot index of the job to keep, what the script logs)
WINDOWS = {
    "flex_compile": ("phase-timeline-h200x2", "flex_train.py", 12, 45,
                     "scripts/gpu_jobs/flex_train.py under nohup python -u: torch.compile of a flex_attention "
                     "model (first step 14.3 s), then training with HF-style dict lines"),
    "buffered_quiet": ("phase-timeline-h200-buffered", "quiet_buffered.py", 4, 48,
                       "a buffered_train.py-style loop under nohup python without -u: full-power training, "
                       "log empty until exit"),
    "hang": ("phase-timeline-h200x2", "hang_gpu.py", 70, 120,
             "scripts/gpu_jobs/hang_gpu.py under nohup python -u: 5 logged steps, then blocks on a lock"),
    "nccl_spin": ("phase-timeline-h200x2", "nccl_hang.py", 131, 185,
                  "scripts/gpu_jobs/nccl_hang.py under nohup torchrun --nproc_per_node 2: all-reduce loop, "
                  "rank 1 SIGSTOPs itself after 12 s, rank 0 spins in the collective"),
}


def load(name: str) -> list[dict]:
    with gzip.open(RESULTS / f"{name}.watch.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def window(name: str, rec: str, job_name: str, lo: int, hi: int, about: str) -> dict:
    frames = load(rec)
    t0 = None
    samples = []
    meta: dict = {}
    for i in range(lo, hi + 1):
        snap = frames[i]
        jobs = [j for j in snap["jobs"] if j["name"] == job_name and j["alive"]]
        if not jobs:
            continue
        job = max(jobs, key=lambda j: len(j["pids"]))  # the merged job where the ranks showed split
        pids = set(job["pids"])
        if t0 is None:
            t0 = snap["time"]
            started = next((h["since"] for h in job["history"] if h["phase"] == "starting"), job["since"])
            meta = {"started_at": round(started - t0, 2), "log": job["log"], "stall_after_s": job["stall_after_s"]}
        gpus = [[g["index"], g["util_pct"], g["mem_used_mib"], g["power_w"], g["power_limit_w"]]
                for g in snap["hosts"][0]["gpus"]
                if any(p["pid"] in pids for p in g["processes"]) or g["index"] in job["gpus"]]
        cpu = kids = rank = None
        workers = 0
        for e in job["evidence"]:
            m = CPU.match(e)
            if m:
                kids = float(m["kids"] or 0.0)
                cpu = round(float(m["all"]) - kids, 2)
            m = RANK.match(e)
            if m:
                rank = float(m["cores"])
            m = WORKERS.match(e)
            if m:
                workers = int(m[1])
        samples.append({"t": round(snap["time"] - t0, 2), "gpus": gpus, "cpu_cores": cpu, "child_cores": kids,
                        "max_rank_cores": rank,
                        "compile_workers": workers, "log_lines": job["log_lines"],
                        "recorded": [job["phase"], job["detail"]]})
    return {"recording": f"benchmarks/results/{rec}.watch.jsonl.gz", "job": job_name, "about": about,
            **meta, "samples": samples}


def main() -> None:
    out = {"recorded_on": "2x NVIDIA H200 (700 W limit), gpuwatch watch --json, sample_interval 1 s, "
                          "stall_after 30s (20s for the buffered run), 2026-11-30",
           "windows": {name: window(name, *spec) for name, spec in WINDOWS.items()}}
    path = HERE / "h200_windows.json"
    text = json.dumps(out, separators=(",", ":"))
    # one sample per line: small and diffable
    text = text.replace(',{"t":', ',\n{"t":').replace('[{"t":', '[\n{"t":')
    path.write_text(text + "\n")
    print(path, len(text), "bytes")


if __name__ == "__main__":
    main()
