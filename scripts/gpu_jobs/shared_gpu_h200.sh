#!/bin/bash
# Four real jobs sharing GPU 0 (a first torch.compile, a hang, a buffered job, a training job), each judged by its
# own share of the GPU, on one H100/H200 in about 5 minutes: `gpuwatch watch --json` through the local transport at
# stall_after 30 s, every job's verdicts scored against its own truth (goal >= 95 % each), and the probe's cost per
# NVML sample with per-process reads on. Needs python3 with torch + CUDA, nvidia-ml-py and psutil (no sshd, no
# py-spy). Without torch+CUDA it runs a reduced mode (CPU stand-ins; GPU parts skipped). Writes under OUTDIR:
# summary.json, summary.txt, score.txt, watch.jsonl, truth.jsonl, probe_cost.json, jobs/NAME/train.log.
# Usage: scripts/gpu_jobs/shared_gpu_h200.sh OUTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-}}
[ -n "$out" ] || { echo "usage: shared_gpu_h200.sh OUTDIR (or set OUT)" >&2; exit 2; }
mkdir -p "$out"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv; } > "$out/gpus.txt" 2>&1
python3 -c "import pynvml; print('nvidia-ml-py', pynvml.nvmlInit() or pynvml.nvmlSystemGetDriverVersion())" \
    >> "$out/gpus.txt" 2>&1
timeout 400 python3 "$here/shared_gpu_h200.py" "$out" 2>&1 | tee "$out/shared_gpu_h200.log"
exit "${PIPESTATUS[0]}"
