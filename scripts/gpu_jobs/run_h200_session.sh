#!/bin/bash
# On a 1-GPU host: real jobs one after another under `gpuwatch watch --json`, each writing its own ground
# truth (truth.py), and gpuwatch's actions used on them as a person would: restart the buffered job with -u,
# py-spy dump the hung job, kill. Then score the verdicts (scripts/score_timeline.py).
# Usage: scripts/gpu_jobs/run_h200_session.sh OUTDIR   (gpuwatch importable; torch with CUDA; py-spy)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1; mkdir -p "$out/work"; cd "$out/work"
export GPUWATCH_TRUTH=$out/truth.jsonl
: > "$GPUWATCH_TRUTH"
cat > hosts.toml <<TOML
[settings]
sample_interval = 1.0
stall_after = "30s"
[[hosts]]
name = "gpu-host"
local = true
TOML
gw() { timeout 120 python3 -m gpuwatch_tui.cli --config hosts.toml "$@"; }
stamp() { echo "+$(( $(date +%s) - t0 ))s $*" | tee -a "$out/actions.log"; }
# started directly (not through a shell function) so that $! is gpuwatch itself and SIGINT reaches it
python3 -m gpuwatch_tui.cli --config hosts.toml watch --json > "$out/watch.jsonl" 2> "$out/watch.err" &
watch_pid=$!
t0=$(date +%s)
sleep 2

stamp "flex_train: torch.compile + flex_attention, 40 s of training"
timeout 150 nohup python3 -u "$here/flex_train.py" --seconds 40 > flex.log 2>&1 &
wait $!

stamp "buffered_train: no -u, stdout to a file"
env -u PYTHONUNBUFFERED nohup python3 "$here/buffered_train.py" --seconds 300 > buffered.log 2>&1 &
buf_pid=$!
sleep 35
stamp "buffered.log bytes before restart: $(wc -c < buffered.log)"
stamp "gpuwatch restart gpu-host buffered_train.py --yes"
gw restart gpu-host buffered_train.py --yes > "$out/restart.txt" 2>&1; stamp "restart exit $?"
sleep 25
stamp "buffered.log bytes 25 s after restart: $(wc -c < buffered.log); new process: $(pgrep -af buffered_train.py | grep -v gpuwatch-run | head -3)"
stamp "gpuwatch kill gpu-host buffered_train.py --yes"
gw kill gpu-host buffered_train.py --yes > "$out/kill-buffered.txt" 2>&1; stamp "kill exit $?"
sleep 5

stamp "hang_gpu: 5 logged steps, then blocks on a lock"
nohup python3 -u "$here/hang_gpu.py" > hang.log 2>&1 &
hang_pid=$!
sleep 50
stamp "gpuwatch dump gpu-host hang_gpu.py --yes"
gw dump gpu-host hang_gpu.py --yes > "$out/dump-hang.txt" 2>&1; stamp "dump exit $?"
stamp "hang state after dump: $(awk '{print $3}' /proc/$hang_pid/stat 2>/dev/null)"
gw kill gpu-host hang_gpu.py --yes > "$out/kill-hang.txt" 2>&1; stamp "kill exit $?"
sleep 5

stamp "oom_train: doubles its memory until CUDA OOM"
timeout 90 nohup python3 -u "$here/oom_train.py" --grow-every 5 > oom.log 2>&1 &
wait $!
sleep 8
kill -INT $watch_pid; timeout 20 tail --pid=$watch_pid -f /dev/null || kill -9 $watch_pid
stamp "done"
python3 "$here/../score_timeline.py" "$out/watch.jsonl" "$GPUWATCH_TRUTH" --stall-after 30 --json "$out/score.json" | tee "$out/score.txt"
gzip -f "$out/watch.jsonl"
tail -5 oom.log > "$out/oom-tail.txt"
