"""Cost of reading a Slurm queue of 1,000 jobs.

1. Parsing: synthetic `squeue --Format` text (the exact request gpuwatch makes) and `squeue --json`
   (the v0.0.40 schema of 23.11) for 1,000 jobs: running multi-node jobs with hostlists, pending jobs
   with reasons, array tasks; median of repeated parses.
2. A real squeue: a one-machine Slurm (tests/slurm/cluster.py: munged, slurmctld, slurmd; needs root
   and Debian's slurmctld slurmd munge slurm-client) with 1,000 queued jobs (one held array of 1,000
   tasks, listed one line per task), timed end to end through gpuwatch's own runner and parser.

    python benchmarks/bench_squeue.py [--jobs 1000] [--repeat 50] [--no-cluster] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.slurm.client import SlurmClient  # noqa: E402
from gpuwatch_tui.slurm.runner import LocalRunner  # noqa: E402
from gpuwatch_tui.slurm.settings import SlurmConfig  # noqa: E402
from gpuwatch_tui.slurm.squeue_json import parse_squeue_json  # noqa: E402
from gpuwatch_tui.slurm.squeue_text import FIELDS, SEP, parse_squeue_text, squeue_argv  # noqa: E402

REASONS = ("Resources", "Priority", "Dependency", "QOSMaxGRESPerUser", "ReqNodeNotAvail, Reserved for maintenance")


def synthetic_text(n: int) -> str:
    lines = []
    for i in range(n):
        jid = 100000 + i
        kind = i % 4
        if kind == 0:  # multi-node running
            f = [str(jid), str(jid), str(jid), "N/A", f"llama 70b | run {i}", "alice", "RUNNING", "None",
                 f"gpu[{i % 90:03d}-{i % 90 + 3:03d},{i % 90 + 50:03d}]", "1-02:03:04", "2-00:00:00", "h200",
                 "/home/alice/runs", "2024-05-01T10:00:00", "2024-05-01T10:02:00", "logs/%x-%j-%N.out", ""]
        elif kind == 1:  # array task
            f = [str(jid), f"{99000}_{i}", "99000", str(i), "sweep", "bob", "RUNNING", "None", f"gpu{i % 200:03d}",
                 "12:34", "1:00:00", "h200", "/home/bob", "2024-05-01T10:00:00", "2024-05-01T11:00:00",
                 "/scratch/bob/%A_%a.log", "/scratch/bob/%A_%a.err"]
        else:  # pending
            f = [str(jid), str(jid), str(jid), "N/A", f"eval-{i}", "carol", "PENDING", REASONS[i % len(REASONS)], "",
                 "0:00", "30:00", "h200", "/home/carol", "2024-05-01T11:05:00", "N/A", "slurm-%j.out", ""]
        assert len(f) == len(FIELDS)
        lines.append(SEP.join(f) + SEP)
    return "\n".join(lines) + "\n"


def synthetic_json(n: int) -> str:
    def num(v, s=True):
        return {"set": s, "infinite": False, "number": v}
    jobs = []
    for i in range(n):
        running = i % 2 == 0
        jobs.append({
            "job_id": 100000 + i, "name": f"job {i}", "user_name": "alice",
            "job_state": ["RUNNING" if running else "PENDING"], "state_reason": "None" if running else "Priority",
            "nodes": f"gpu[{i % 90:03d}-{i % 90 + 1:03d}]" if running else "",
            "array_job_id": num(0), "array_task_id": num(0, False), "time_limit": num(120),
            "start_time": num(1714557720 if running else 0), "standard_output": "/l/%x-%j-%N.out",
            "current_working_directory": "/home/alice", "partition": "h200",
            "exit_code": {"status": ["SUCCESS"], "return_code": num(0), "signal": {"id": num(0, False), "name": ""}},
        })
    return json.dumps({"jobs": jobs, "meta": {"plugin": {"data_parser": "data_parser/v0.0.40"}}, "errors": []})


def median_ms(fn, repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
            "max_ms": round(max(times), 3), "runs": repeat}


def real_cluster(n: int, repeat: int) -> dict:
    from tests.slurm.cluster import SlurmCluster, slurm_unavailable_reason

    reason = slurm_unavailable_reason()
    if reason:
        return {"skipped": reason}
    import os

    with tempfile.TemporaryDirectory(prefix="bench-squeue-") as d:
        cluster = SlurmCluster(Path(d)).start()
        try:
            os.environ["SLURM_CONF"] = str(cluster.conf)
            cluster.sbatch(f"--array=1-{n}", "--hold", "--job-name=queued | held", script="true")
            runner = LocalRunner()
            argv = squeue_argv("root", expand_arrays=True)  # one line per task: 1,000 queued entries
            reads = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                result = asyncio.run(runner.run(argv))
                parsed = parse_squeue_text(result.stdout)
                reads.append((time.perf_counter() - t0) * 1000)
                assert result.ok and len(parsed.jobs) == n, (result.failure(), len(parsed.jobs), parsed.problems[:3])
            compressed = asyncio.run(SlurmClient(runner, SlurmConfig(user="root")).queue())
            t0 = time.perf_counter()
            raw = cluster.run(argv).stdout
            cmd_ms = (time.perf_counter() - t0) * 1000
            parse = median_ms(lambda: parse_squeue_text(raw), 20)
            return {"jobs_listed": n, "slurm": "22.05 (Debian 12), one node, held array of %d tasks" % n,
                    "queue_read_ms": {"median_ms": round(statistics.median(reads), 1), "min_ms": round(min(reads), 1),
                                      "max_ms": round(max(reads), 1), "runs": repeat},
                    "squeue_command_alone_ms": round(cmd_ms, 1), "parse_of_its_output": parse,
                    "default_read_lines": len(compressed.jobs),  # the pending array as one line
                    "output_bytes": len(raw.encode())}
        finally:
            cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--no-cluster", action="store_true")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "squeue-1000.json"))
    args = ap.parse_args()
    text = synthetic_text(args.jobs)
    assert len(parse_squeue_text(text).jobs) == args.jobs
    js = synthetic_json(args.jobs)
    assert len(parse_squeue_json(js)) == args.jobs
    result = {
        "benchmark": "squeue-1000", "jobs": args.jobs, "python": platform.python_version(),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs (shared)",
        "parse_text": {**median_ms(lambda: parse_squeue_text(text), args.repeat), "bytes": len(text.encode())},
        "parse_json_v0.0.40": {**median_ms(lambda: parse_squeue_json(js), args.repeat), "bytes": len(js.encode())},
    }
    if not args.no_cluster:
        result["real_squeue"] = real_cluster(args.jobs, 10)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
