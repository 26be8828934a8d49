#!/bin/bash
# A hang named in a minute, on one H100/H200 at gpuwatch's default settings (about 7 minutes): a fast-stepping
# job that blocks, a slow-stepping one, a silent one, and on the GPU in turn a torch.cuda._sleep spin, a bf16
# matmul loop and a data-loader-bound job, watched by `gpuwatch watch --json` through the local transport;
# then the probe's cost per NVML sample with GPM on and off. Needs python3 with torch + CUDA, nvidia-ml-py and
# psutil (no sshd, no py-spy). Without torch+CUDA the GPU parts are skipped. Writes under OUTDIR: summary.json,
# summary.txt, watch.jsonl (every snapshot, stamped), probe_cost.json, events/, jobs/ (each job's log).
# Usage: scripts/gpu_jobs/hang_h200.sh OUTDIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-}}
[ -n "$out" ] || { echo "usage: hang_h200.sh OUTDIR (or set OUT)" >&2; exit 2; }
mkdir -p "$out"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv; } > "$out/gpus.txt" 2>&1
python3 -c "import pynvml; print('nvidia-ml-py', pynvml.nvmlInit() or pynvml.nvmlSystemGetDriverVersion())" \
    >> "$out/gpus.txt" 2>&1
timeout 470 python3 "$here/hang_h200.py" "$out" 2>&1 | tee "$out/hang_h200.log"
exit "${PIPESTATUS[0]}"
