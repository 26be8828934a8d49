#!/bin/bash
# On a GPU host: `torchrun --nproc_per_node N` under `gpuwatch watch --json` (stall_after 30 s); after the
# ranks train, one rank is SIGSTOPped; then gpuwatch's own CLI dumps every rank (py-spy) and kills the job.
# Records the probe's CPU per sample and, alongside, `nvidia-smi -lms 1000`'s.
# Usage: scripts/gpu_jobs/run_rank_stop.sh OUTDIR [NPROC=8] [VICTIM_RANK=3]
#        (gpuwatch importable; torch with CUDA; py-spy on PATH)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1; nproc=${2:-8}; victim=${3:-3}
mkdir -p "$out/work"; cd "$out/work"
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
stamp() { echo "$(date +%s.%N) +$(( $(date +%s) - t0 ))s $*" | tee -a "$out/timeline.log"; }
task_cpu_ms() { cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.3f", s / 1e6}'; }
per_s() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {printf "%.3f", (b - a) / n}'; }
python3 -m gpuwatch_tui.cli --config hosts.toml watch --json > "$out/watch.jsonl" 2> "$out/watch.err" &
watch_pid=$!
t0=$(date +%s)
stamp "torchrun --nproc_per_node $nproc rank_stop.py"
nohup torchrun --nproc_per_node "$nproc" "$here/rank_stop.py" > ranks.log 2>&1 &
agent=$!
for i in $(seq 120); do [ "$(grep -c ' step ' ranks.log)" -ge $((nproc * 2)) ] && break; sleep 0.5; done
stamp "training: $(grep -c ' step ' ranks.log) step lines; $(grep -m1 'rank0' ranks.log)"
sleep 10
probe=$(ps -o pid=,args= --ppid $watch_pid | awk '/probe|gpuwatch_probe|python/ {print $1; exit}')
stamp "probe pid ${probe:-?}: 30 s at 1 Hz with $nproc ranks"
p0=$(task_cpu_ms "$probe"); sleep 30; p1=$(task_cpu_ms "$probe")
stamp "probe CPU over 30 s: $(per_s "$p0" "$p1" 30) ms per sample"
nvidia-smi -lms 1000 > /dev/null 2>&1 &
smi=$!
sleep 2; s0=$(task_cpu_ms $smi); p0=$(task_cpu_ms "$probe"); sleep 30; s1=$(task_cpu_ms $smi); p1=$(task_cpu_ms "$probe")
kill $smi; wait $smi 2>/dev/null
stamp "alongside: nvidia-smi -lms 1000 CPU $(per_s "$s0" "$s1" 30) ms per sample; probe $(per_s "$p0" "$p1" 30) ms per sample"
vpid=""
for c in $(ps -o pid= --ppid $agent); do grep -qz "^RANK=$victim\$" /proc/$c/environ && vpid=$c; done
stamp "SIGSTOP rank $victim pid $vpid"
echo "$(date +%s.%N) $victim $vpid" > "$out/stop.txt"
kill -STOP "$vpid"
sleep 45
stamp "gpuwatch dump gpu-host rank_stop.py --yes --json"
gw dump gpu-host rank_stop.py --yes --json > "$out/dump.json" 2> "$out/dump.err"; stamp "dump exit $?"
stamp "rank $victim state after dump: $(awk '{print $3}' /proc/$vpid/stat 2>/dev/null)"
pids="$agent $(ps -o pid= --ppid $agent | tr '\n' ' ')"
stamp "GPU before kill: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader | tr '\n' ' ')"
stamp "gpuwatch kill gpu-host rank_stop.py --yes --json"
gw kill gpu-host rank_stop.py --yes --json > "$out/kill.json" 2> "$out/kill.err"; stamp "kill exit $?"
left=""; for p in $pids; do [ -d /proc/$p ] && left="$left $p"; done
stamp "processes left of [$pids]: [${left# }]"
sleep 2
stamp "GPU after kill: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader | tr '\n' ' '); compute apps: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
sleep 3
kill -INT $watch_pid; timeout 20 tail --pid=$watch_pid -f /dev/null || kill -9 $watch_pid
stamp "done"
python3 "$here/summarize_rank_stop.py" "$out" | tee "$out/summary.txt"
gzip -f "$out/watch.jsonl"
