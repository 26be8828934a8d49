"""Writes fleet.json: a recorded fleet for the UI tests and screenshots (deterministic).

Numbers follow DESIGN.md's H200 measurements: idle 0% / ~78 W / 345 MHz; context held but idle
0% / ~119 W / 1980 MHz; training 98-100% / ~690 W; an NCCL spin 100% at ~121 W.
Run: python tests/ui/data/make_fleet_fixture.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NOW = 1764500000.0  # fixed clock of the recording
N = 60  # samples per GPU (1 Hz)
H200_MIB = 143771
rng = random.Random(7)


def series(n, fn):
    return [fn(i) for i in range(n)]


def training(i):
    return [rng.uniform(97, 100), 138920 + rng.uniform(-40, 40), rng.uniform(63, 71), rng.uniform(676, 699), 1980]


def ctx_idle(mem):
    return lambda i: [0, mem, rng.uniform(36, 39), rng.uniform(117, 121), 1980]


def idle(i):
    return [0, 0, rng.uniform(30, 33), rng.uniform(76, 80), 345]


def gpu(index, samples, procs=()):
    return {
        "index": index,
        "uuid": f"GPU-{index:02d}{rng.randrange(16**6):06x}-h200",
        "name": "NVIDIA H200",
        "mem_total_mib": H200_MIB,
        "power_limit_w": 700,
        "samples": samples,
        "processes": [{"pid": p, "mem_used_mib": samples[-1][1]} for p in procs],
    }


def proc(pid, ppid, name, cmdline, state, cpu_s, rss_gb, threads, start, *, children=(), stdout=None,
         unbuffered=True, reason="-u", cwd="/home/ml"):
    return {
        "pid": pid, "ppid": ppid, "start_time": start, "name": name, "cmdline": cmdline, "cwd": cwd,
        "state": state, "cpu_s": cpu_s, "cpu_children_s": 0.0, "rss_bytes": int(rss_gb * 1e9),
        "threads": threads, "sid": ppid, "pgid": ppid,
        "children": [{"pid": c[0], "name": c[1], "cmdline": c[2], "state": c[3], "cpu_s": c[4]} for c in children],
        "stdout": stdout, "stderr": stdout, "unbuffered": unbuffered, "unbuffered_reason": reason,
        "is_python": True, "user": "ml",
    }


def host_facts(cpus, cpu_pct, load1, ram_gib, avail_gib):
    """What the probe reports about the host itself (driver of the recording H200)."""
    return {"driver": "580.159.04", "cpu_count": cpus, "cpu_pct": cpu_pct, "load1": load1,
            "mem_total_kib": ram_gib * 1024 * 1024, "mem_avail_kib": avail_gib * 1024 * 1024}


def main() -> None:
    hosts = []
    # trainer-a: 8 H200s, one torchrun job, all training.
    hosts.append({
        "name": "trainer-a", "state": "connected", "gpu_source": "nvml", "sample_age_s": 0.4,
        **host_facts(192, 14.2, 27.5, 2048, 1710),
        "gpus": [gpu(i, series(N, training), [41210 + i]) for i in range(8)],
    })
    # trainer-b: 2 ranks; rank 1 stopped 40 s into the window, rank 0 spins in an NCCL collective.
    def spin(i):
        return training(i) if i < 20 else [100, 61840, rng.uniform(41, 44), rng.uniform(119, 123), 1980]

    def stopped(i):
        return training(i) if i < 20 else [0, 61790, rng.uniform(36, 38), rng.uniform(117, 120), 1980]

    hosts.append({
        "name": "trainer-b", "state": "connected", "gpu_source": "nvidia-smi", "sample_age_s": 0.9,
        **host_facts(64, 3.3, 2.1, 512, 431),
        "gpus": [gpu(0, series(N, spin), [30112]), gpu(1, series(N, stopped), [30113])],
    })
    hosts.append({
        "name": "bastion-c", "state": "unreachable", "reconnects": 3,
        "error": "connect to 10.0.4.17:22: timed out after 10 s (retry in 30 s)",
    })
    hosts.append({
        "name": "lab-d", "state": "host-key-unknown",
        "error": "host key not in known_hosts",
        "hint": "ED25519 SHA256:q3LkM0Jg2o7vJtq8yWcR1pXc9bN4fH6sTzA5eKdUuYw  (trust: ssh lab-d once, or ssh-keyscan lab-d >> ~/.ssh/known_hosts)",
    })
    # trainer-e: GPU 0 compiling (context, no kernels), GPU 1 silent job training, GPU 2 freed by a crash.
    def crashed(i):
        return training(i) if i < 35 else idle(i)

    hosts.append({
        "name": "trainer-e", "state": "connected", "gpu_source": "nvml", "sample_age_s": 0.6,
        **host_facts(32, 38.4, 13.0, 256, 97),
        "gpus": [gpu(0, series(N, ctx_idle(4210)), [52001]), gpu(1, series(N, training), [51877]),
                 gpu(2, series(N, crashed))],
    })

    jobs = [
        {
            "id": "trainer-a:41200", "name": "llama-8b-pretrain", "host": "trainer-a",
            "pids": [41200], "gpus": list(range(8)), "phase": "training", "detail": None,
            "since": NOW - 8712, "confidence": 0.97,
            "evidence": ["8 GPUs at 97-100% util, 676-699 W", "log grew 174 lines in the last 60 s",
                         "step 41230 of 100000 at 2.9 it/s"],
            "advice": "nothing to do; ETA 5h38m", "log": "/data/runs/llama8b/train.log", "exit_code": None,
            "progress": {"step": 41230, "total": 100000, "rate": 2.9, "unit": "it", "loss": 2.1314,
                         "epoch": 3, "eta_s": 20265},
            "history": [{"phase": "starting", "since": NOW - 8950}, {"phase": "loading", "since": NOW - 8942},
                        {"phase": "compiling", "since": NOW - 8860}, {"phase": "training", "since": NOW - 8712}],
        },
        {
            "id": "trainer-b:30100", "name": "dpo-2rank", "host": "trainer-b",
            "pids": [30112, 30113], "gpus": [0, 1], "phase": "stalled", "detail": "nccl-spin",
            "since": NOW - 432, "confidence": 0.9,
            "evidence": ["GPU 0 at 100% util but 121 W (training draws ~690 W); memory flat",
                         "GPU 1 at 0% util, 119 W: rank 1 runs no kernels",
                         "rank 0 (pid 30112) spins one core; rank 1 (pid 30113) state S, CPU flat 7m12s",
                         "no log line for 7m12s; the NCCL watchdog fires at 10m"],
            "advice": "d: py-spy dump to see where rank 1 waits; k: kill the job",
            "log": "/home/ml/dpo/dpo.log", "exit_code": None,
            "progress": {"step": 1830, "total": 5000, "rate": None, "unit": "it", "loss": 0.4127,
                         "epoch": 1, "eta_s": None},
            "history": [{"phase": "loading", "since": NOW - 2400}, {"phase": "training", "since": NOW - 2310},
                        {"phase": "stalled", "since": NOW - 432}],
        },
        {
            "id": "trainer-e:52001", "name": "vit-flex", "host": "trainer-e", "pids": [52001], "gpus": [0],
            "phase": "compiling", "detail": "torch.compile", "since": NOW - 95, "confidence": 0.85,
            "evidence": ["GPU 0 at 0% util, 119 W, 4.1 GiB held: a context but no kernels",
                         "main process uses 1.0 core", "torch/_inductor/compile_worker with 6 cc1/ptxas children"],
            "advice": "wait: a first flex_attention compile takes minutes", "log": "/home/ml/vit/run.log",
            "exit_code": None,
            "progress": {"step": None, "total": None, "rate": None, "unit": None, "loss": None, "epoch": None,
                         "eta_s": None},
            "history": [{"phase": "starting", "since": NOW - 112}, {"phase": "loading", "since": NOW - 104},
                        {"phase": "compiling", "since": NOW - 95}],
        },
        {
            "id": "trainer-e:51877", "name": "sft-nohup", "host": "trainer-e", "pids": [51877], "gpus": [1],
            "phase": "silent", "detail": "buffered-stdout", "since": NOW - 845, "confidence": 0.9,
            "evidence": ["GPU 1 at 98% util, 687 W: working", "stdout is /home/ml/sft/out.log (0 bytes)",
                         "neither -u nor PYTHONUNBUFFERED: Python block-buffers a file",
                         "no log output for 14m05s"],
            "advice": "u: restart with -u so the log streams (progress so far is lost unless checkpointed)",
            "log": "/home/ml/sft/out.log", "exit_code": None,
            "progress": {"step": None, "total": None, "rate": None, "unit": None, "loss": None, "epoch": None,
                         "eta_s": None},
            "history": [{"phase": "starting", "since": NOW - 870}, {"phase": "silent", "since": NOW - 845}],
        },
        {
            "id": "trainer-e:28841", "name": "eval-sweep-3", "host": "trainer-e", "pids": [28841], "gpus": [2],
            "phase": "crashed", "detail": "killed", "since": NOW - 25, "confidence": 0.8,
            "evidence": ["pid 28841 gone 25s ago; exit status unknown (not started by gpuwatch)",
                         "GPU 2 fell from 98% to 0% at the same moment",
                         "log ends mid-epoch without a traceback: SIGKILL or the OOM killer"],
            "advice": "check `dmesg | grep -i oom`; u: restart with -u", "log": "/home/ml/eval/sweep3.log",
            "exit_code": None,
            "progress": {"step": 770, "total": 1200, "rate": None, "unit": "batch", "loss": None, "epoch": None,
                         "eta_s": None},
            "history": [{"phase": "loading", "since": NOW - 1500}, {"phase": "evaluating", "since": NOW - 1460},
                        {"phase": "crashed", "since": NOW - 25}],
        },
    ]

    llama_log = []
    for step in range(39231, 41231):
        if step % 500 == 0:
            llama_log.append(f"[rank0] saving checkpoint step_{step} to /data/runs/llama8b/ckpt")
        llama_log.append(f"step {step:>6} | loss {2.13 + 0.05 * ((step * 7919) % 13) / 13:.4f} | lr 3.00e-04 "
                         f"| grad_norm {0.8 + ((step * 31) % 17) / 40:.2f} | tok/s 412,{(step * 37) % 1000:03d}")
    logs = {
        "trainer-a:41200": {"lines": llama_log, "total": 120461},
        "trainer-b:30100": {"lines": [f"step {s} | loss {0.41 + (s % 7) / 100:.4f} | rewards/margin 0.{s % 90:02d}"
                                      for s in range(1700, 1831)]
                            + ["[rank1] waiting for all_reduce (NCCL_TIMEOUT=600s)"], "total": 1931},
        "trainer-e:52001": {"lines": ["Loading dataset imagenet-1k (shards 0-63)...", "dataset ready: 1,281,167 images",
                                      "model: ViT-B/16 with flex_attention, 86.6M params",
                                      "torch.compile(mode='max-autotune') ... this may take a while"], "total": 4},
        "trainer-e:51877": {"lines": [], "total": 0},
        "trainer-e:28841": {"lines": [f"eval batch {b}/1200 | acc {0.71 + (b % 9) / 1000:.3f}" for b in range(700, 771)],
                            "total": 771},
    }
    file_out = {"path": "/home/ml/sft/out.log", "kind": "file", "append": False, "size": 0}
    log_out = {"path": "/data/runs/llama8b/train.log", "kind": "file", "append": True, "size": 18_400_000}
    procs = {
        "trainer-a:41200": [proc(41200, 41190, "pt_elastic", ["torchrun", "--nproc-per-node=8", "train.py",
                                                              "--config", "llama8b.yaml"], "S", 310.0, 0.9, 24,
                                 NOW - 8950, stdout=log_out)]
        + [proc(41210 + r, 41200, "python3", ["python3", "-u", "train.py", "--config", "llama8b.yaml",
                                              f"--local-rank={r}"], "R", 8650.0 + r * 3, 31.5, 96, NOW - 8948,
                children=[(41300 + r * 4 + k, "pt_data_worker", ["python3"], "S", 900.0) for k in range(4)],
                stdout=log_out) for r in range(8)],
        "trainer-b:30100": [
            proc(30112, 30100, "python3", ["python3", "-u", "dpo.py", "--rank", "0"], "R", 2290.0, 22.4, 64,
                 NOW - 2400),
            proc(30113, 30100, "python3", ["python3", "-u", "dpo.py", "--rank", "1"], "S", 1880.0, 22.1, 64,
                 NOW - 2400),
        ],
        "trainer-e:52001": [proc(52001, 1, "python3", ["python3", "vit.py", "--compile"], "R", 101.0, 6.2, 41,
                                 NOW - 112, children=[(52050, "python3", ["python3", "-m", "torch._inductor.compile_worker"], "S", 2.0)]
                                 + [(52060 + k, "cc1", ["cc1"], "R", 1.5) for k in range(6)])],
        "trainer-e:51877": [proc(51877, 1, "python3", ["python3", "sft.py"], "R", 880.0, 18.0, 52, NOW - 870,
                                 stdout=file_out, unbuffered=False, reason="")],
        "trainer-e:28841": [],
    }
    outdirs = {
        "trainer-a:41200": {"key": "o1", "path": "/data/runs/llama8b/ckpt", "exists": True, "files": 83,
                            "total_bytes": 1_284_000_000_000, "newest_mtime": NOW - 1210,
                            "newest_name": "step_41000/model-00004-of-00004.safetensors"},
        "trainer-b:30100": {"key": "o2", "path": "/home/ml/dpo/out", "exists": True, "files": 6,
                            "total_bytes": 64_200_000_000, "newest_mtime": NOW - 1500, "newest_name": "step_1500.pt"},
        "trainer-e:52001": {"key": "o3", "path": "/home/ml/vit/out", "exists": False, "files": 0, "total_bytes": 0,
                            "newest_mtime": None, "newest_name": None},
        "trainer-e:51877": {"key": "o4", "path": "/home/ml/sft/out", "exists": True, "files": 2,
                            "total_bytes": 15_900_000_000, "newest_mtime": NOW - 301, "newest_name": "ckpt-2000.pt"},
    }
    for host in hosts:
        for g in host.get("gpus", []):
            g["samples"] = [[round(v, 1) for v in s] for s in g["samples"]]
    data = {"now": NOW, "hosts": hosts, "jobs": jobs, "logs": logs, "procs": procs, "outdirs": outdirs}
    out = Path(__file__).with_name("fleet.json")
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
