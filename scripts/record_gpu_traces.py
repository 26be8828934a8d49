"""Record real nvidia-smi CSV streams and compare the probe's NVML numbers with nvidia-smi.

Run on a GPU host (needs torch for the 'held' and 'training' phases):
    python scripts/record_gpu_traces.py OUTDIR
Writes OUTDIR/h200-<phase>.gpu.csv and .apps.csv (raw `nvidia-smi ... -lms 500` output, what the
test stand-in replays) and OUTDIR/nvml-vs-smi.json (probe NVML sample and nvidia-smi side by side).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv  # noqa: E402

GPU_Q = ("--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,"
         "power.draw,power.limit,clocks.sm")
APP_Q = "--query-compute-apps=timestamp,gpu_uuid,pid,used_memory"
WORKLOADS = {
    "idle": None,
    "held": "import torch,time; x=torch.ones(1<<28,device='cuda'); torch.cuda.synchronize(); print('ready',flush=True); time.sleep(600)",
    "training": ("import torch,time; a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); b=a.clone();"
                 "print('ready',flush=True)\nwhile True:\n  c=a@b\n  torch.cuda.synchronize()"),
}


def smi_once() -> list[list[str]]:
    out = subprocess.run(["nvidia-smi", GPU_Q, "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    return [[f.strip() for f in line.split(",")] for line in out.strip().splitlines()]


def main(outdir: str) -> None:
    os.makedirs(outdir, exist_ok=True)
    comparison = []
    for phase, code in WORKLOADS.items():
        work = None
        if code:
            work = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            work.stdout.readline()
            time.sleep(3)
        gpu_f = open(os.path.join(outdir, f"h200-{phase}.gpu.csv"), "w")
        app_f = open(os.path.join(outdir, f"h200-{phase}.apps.csv"), "w")
        streams = [subprocess.Popen(["nvidia-smi", q, "--format=csv,noheader,nounits", "-lms", "500"], stdout=f)
                   for q, f in ((GPU_Q, gpu_f), (APP_Q, app_f))]
        probe = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        probe.stdin.write(build_payload({"interval": 1.0}))
        probe.stdin.flush()
        hello = json.loads(probe.stdout.readline())
        for _ in range(6):
            frame = json.loads(probe.stdout.readline())
            smi = smi_once()
            comparison.append({"phase": phase, "source": hello["gpu_source"], "probe": frame["gpus"], "nvidia_smi": smi})
        probe.stdin.close()
        probe.wait()
        for s in streams:
            s.terminate()
            s.wait()
        gpu_f.close()
        app_f.close()
        if work:
            work.kill()
            work.wait()
        time.sleep(2)
    with open(os.path.join(outdir, "nvml-vs-smi.json"), "w") as f:
        json.dump(comparison, f, indent=1)
    # Human summary: first GPU, per phase, last pair.
    for row in comparison[5::6]:
        g, s = row["probe"][0], row["nvidia_smi"][0]
        print(f"{row['phase']:9s} probe[{row['source']}]: util {g['util_pct']}% mem {g['mem_used_mib']}/{g['mem_total_mib']} MiB "
              f"temp {g['temp_c']} C power {g['power_w']}/{g['power_limit_w']} W sm {g['sm_clock_mhz']} MHz procs {len(g['processes'])}")
        print(f"{'':9s} nvidia-smi:   util {s[3]}% mem {s[4]}/{s[5]} MiB temp {s[6]} C power {s[7]}/{s[8]} W sm {s[9]} MHz")


if __name__ == "__main__":
    main(sys.argv[1])
