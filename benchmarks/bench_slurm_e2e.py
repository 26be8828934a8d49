"""Time from a rank stopping to the culprit being named, under a real Slurm: runs the end-to-end test
tests/slurm/test_e2e_two_node_batch.py (sbatch -N 2, srun torchrun over two namespaced sshd nodes) a few
times and writes its figures as the "slurm_e2e" entry of benchmarks/results/multinode-culprit.json.

    python benchmarks/bench_slurm_e2e.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/slurm/test_e2e_two_node_batch.py"


def one_run() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        env = dict(os.environ, GPUWATCH_BENCH_OUT=str(out))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", TEST],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"the test failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "multinode-culprit.json")
    args = ap.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    entry = {
        "setup": "real Slurm 22.05 (munged, slurmctld, two slurmd each started with nsenter into one sshd node's "
                 "PID/mount/UTS namespaces); sbatch -N 2 -o ddp-%j-%N.out; srun --ntasks-per-node=1 torchrun "
                 "--nnodes 2 --nproc_per_node 1 (gloo, CPU); gpuwatch with [slurm] login = local, nodes mapped to "
                 "the sshd hosts; rank 1 SIGSTOPped by pid; kill = scancel",
        "sample_interval_s": 0.2,
        "stall_after_s": 3.0,
        "stopped_grace_s": 3.0,
        "cpus": os.cpu_count(),
        "named_median_s": round(statistics.median(r["named_s"] for r in runs), 3),
        "named_max_s": max(r["named_s"] for r in runs),
        "stalled_median_s": round(statistics.median(r["stalled_s"] for r in runs), 3),
        "stalled_max_s": max(r["stalled_s"] for r in runs),
        "runs": runs,
    }
    data = json.loads(args.json.read_text()) if args.json.exists() else {}
    data["slurm_e2e"] = entry
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(entry, indent=1))


if __name__ == "__main__":
    main()
