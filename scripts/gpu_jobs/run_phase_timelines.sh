#!/bin/bash
# On a 2-GPU host: run real jobs under nohup the way people do and record `gpuwatch watch --json`.
# Usage: scripts/gpu_jobs/run_phase_timelines.sh OUTDIR   (gpuwatch importable; torch with CUDA)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1; mkdir -p "$out/work"; cd "$out/work"
cat > hosts.toml <<TOML
[settings]
sample_interval = 1.0
stall_after = "30s"
[[hosts]]
name = "gpu-host"
local = true
TOML
python3 -m gpuwatch_tui.cli watch --json --config hosts.toml > "$out/watch.jsonl" 2> "$out/watch.err" &
watch_pid=$!
sleep 2
CUDA_VISIBLE_DEVICES=0 nohup python3 -u "$here/flex_train.py" --seconds 110 > flex.log 2>&1 &
flex_pid=$!
CUDA_VISIBLE_DEVICES=1 env -u PYTHONUNBUFFERED nohup python3 "$here/buffered_train.py" --seconds 55 > buffered.log 2>&1 &
buf_pid=$!
sleep 65
CUDA_VISIBLE_DEVICES=1 nohup python3 -u "$here/hang_gpu.py" > hang.log 2>&1 &
hang_pid=$!
sleep 55
kill $hang_pid 2>/dev/null
wait $flex_pid
# NCCL: 2 ranks, rank 1 stops itself after 20 s; rank 0 spins in the collective.
nohup torchrun --nproc_per_node 2 "$here/nccl_hang.py" --stop-after 12 > nccl.log 2>&1 &
tr_pid=$!
sleep 62
for p in $(ps -o pid= --ppid $tr_pid); do kill -9 $p; done
kill -9 $tr_pid 2>/dev/null; wait $tr_pid 2>/dev/null
sleep 3
kill -INT $watch_pid; wait $watch_pid
echo "flex.log:"; head -5 flex.log; tail -3 flex.log
echo "buffered.log bytes: $(wc -c < buffered.log)"
echo "nccl.log:"; tail -4 nccl.log
