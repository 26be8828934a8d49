#!/bin/bash
# On a GPU host (python3 with torch and CUDA, nvidia-ml-py, the project's dependencies; nvitop if installed), in
# about 3 minutes: what the dashboard costs through a real pty with this machine as its only host (local
# transport, real NVML) while one GPU trains (a bf16 matmul loop), beside `nvitop --interval 1` on the same
# GPUs, every size of both at once: CPU, bytes a minute, RSS, first frame, key->frame, at 200x50, 80x24 and
# 300x80, once the default 120-sample history has filled (and, apart, seconds 30-90 while it fills).
# Usage: scripts/gpu_jobs/dash_cost_h200.sh OUTDIR   (writes dash-pty-h200.json, its log and the GPU list there)
# SIZES, SECONDS_EACH and SETTLE override the sizes, the measured window and the wait before it; BENCH_ARGS adds
# bench_dash_pty.py options (--reps 2, --raw DIR to keep the bytes for scripts/pty_bytes_by_row.py).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-${OUT:-}}
[ -n "$out" ] || { echo "usage: dash_cost_h200.sh OUTDIR (or set OUT)" >&2; exit 2; }
mkdir -p "$out"
nvidia-smi -L > "$out/dash-pty-h200-gpus.txt" 2>&1

# The busy GPU the dashboard and nvitop both show; stopped by its pid when the measurements end.
timeout 580 python3 -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("load: bf16 matmul loop on", torch.cuda.get_device_name(0), flush=True)
while True:
    for _ in range(50):
        b = a @ a
    torch.cuda.synchronize()
' > "$out/dash-pty-h200-load.log" 2>&1 &
load=$!

nvitop_flag="--nvitop --sizes-together"
python3 -c "import nvitop" 2>/dev/null || { nvitop_flag=; echo "nvitop is not installed: gpuwatch only" | tee -a "$out/dash-pty-h200.log"; }
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" timeout 570 \
    python3 "$root/benchmarks/bench_dash_pty.py" --this-machine $nvitop_flag --sizes "${SIZES:-200x50,80x24,300x80}" \
    --seconds "${SECONDS_EACH:-30}" --settle "${SETTLE:-125}" --keys 5 --show ${BENCH_ARGS:-} \
    --out "$out/dash-pty-h200.json" 2>&1 | tee -a "$out/dash-pty-h200.log"
status=${PIPESTATUS[0]}
kill "$load" 2>/dev/null
wait "$load" 2>/dev/null
exit "$status"
