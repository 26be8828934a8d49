#!/bin/bash
# On a GPU host (python3 with torch and CUDA, nvidia-ml-py, nvidia-smi on PATH), in under 280 s: the probe's
# CPU per sample through the local transport at 20 Hz and at 1 Hz with 8 watched real jobs (4 on the GPU),
# two 30-sample windows of a young probe (its first 33 s) and one of the second probe once 80 s old (steady),
# one `nvidia-smi --query-gpu` spawn's CPU, and the probe's NVML numbers beside nvidia-smi's.
# Usage: scripts/gpu_jobs/probe_cost_h200.sh [OUTDIR]   (default: $OUT; writes probe-cost-h200-local.json,
#        its log and the GPU list there; about 160 s)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-${OUT:-}}
[ -n "$out" ] || { echo "usage: probe_cost_h200.sh OUTDIR (or set OUT)" >&2; exit 2; }
mkdir -p "$out"
nvidia-smi -L > "$out/probe-cost-h200-gpus.txt" 2>&1
PYTHONPATH="$root/src:$root/benchmarks${PYTHONPATH:+:$PYTHONPATH}" timeout 275 \
    python3 "$root/benchmarks/bench_probe_cost.py" --host --jobs 8 --torch-jobs 4 \
    --samples 200 --slow-samples 30 --repeats 2 --steady-after 80 --spawns 30 \
    --json "$out/probe-cost-h200-local.json" 2>&1 | tee "$out/probe-cost-h200-local.log"
exit "${PIPESTATUS[0]}"
