"""Convert `gpuwatch watch --json` output (one snapshot per line) into a recording (the current format).

Each --part names one watch file, the host name to show its (single) host as, and how many seconds
of its start to skip. Parts are aligned to start together; a part that ends early is padded with
its last host frame (the host idles after its run, its jobs keep their final verdicts), so no host
turns stale. Snapshots carry no log text: each tick's log delta is the last log line the evidence
quotes ("log: ..."), with the true line count. They carry no process facts either.

    python scripts/convert_watch_recording.py OUT.jsonl.gz \\
        --part benchmarks/results/phase-timeline-h200x2.watch.jsonl.gz h200-a 0 \\
        --part benchmarks/results/phase-timeline-h200-buffered.watch.jsonl.gz h200-b 0

The bundled demo (src/gpuwatch_tui/demo/h200-demo.jsonl.gz) is made with `--demo`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuwatch_tui.model import HostSample  # noqa: E402
from gpuwatch_tui.feeds.probe_frames import parse_gpu  # noqa: E402
from gpuwatch_tui.recording import format as fmt  # noqa: E402
from gpuwatch_tui.recording.encoder import TickEncoder  # noqa: E402
from gpuwatch_tui.recording.files import RecordingWriter  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEMO_PARTS = [
    (RESULTS / "phase-timeline-h200x2.watch.jsonl.gz", "h200-a", 0.0),
    (RESULTS / "phase-timeline-h200-buffered.watch.jsonl.gz", "h200-b", 0.0),
    (RESULTS / "phase-timeline-h200x2.watch.jsonl.gz", "h200-c", 100.0),  # its hang half, on a third host
]
DEMO_OUT = ROOT / "src" / "gpuwatch_tui" / "demo" / "h200-demo.jsonl.gz"
HOST_FACTS = ("driver", "cpu_count", "cpu_pct", "load1", "mem_total_kib", "mem_avail_kib")


def read_snapshots(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rename(job: dict, old: str, new: str) -> dict:
    job = dict(job, host=new)
    if job["id"].startswith(old + ":"):
        job["id"] = new + job["id"][len(old):]
    return job


def part_ticks(path: Path, host: str, skip: float) -> list[tuple[float, dict]]:
    """(seconds since the part's start, the snapshot with its one host renamed)."""
    snapshots = read_snapshots(path)
    if not snapshots:
        raise SystemExit(f"{path}: no snapshot in it")
    if len(snapshots[0]["hosts"]) != 1:
        raise SystemExit(f"{path}: a part must hold one host, this one has {len(snapshots[0]['hosts'])}")
    start = snapshots[0]["time"] + skip
    out = []
    for snap in snapshots:
        if snap["time"] < start:
            continue
        (h,) = snap["hosts"]
        old = h["name"]
        out.append((snap["time"] - start, {"time": snap["time"], "host": dict(h, name=host),
                                           "jobs": [rename(j, old, host) for j in snap["jobs"]]}))
    return out


def last_log_line(job: dict) -> str | None:
    for fact in job.get("evidence") or ():
        if fact.startswith("log: "):
            return fact[len("log: "):]
    return None


def convert(parts: list[tuple[Path, str, float]], out: Path, t0: float | None = None) -> int:
    timelines = [part_ticks(path, host, skip) for path, host, skip in parts]
    length = max(t[-1][0] for t in timelines)
    t0 = timelines[0][0][1]["time"] if t0 is None else t0  # the first part keeps its real clock
    encoder = TickEncoder()
    sources = ", ".join(f"{p.name} as {h} (from +{s:g}s)" for p, h, s in parts)
    writer = RecordingWriter(out, fmt.header([h for _, h, _ in parts], {"sample_interval": 1.0, "history": 120,
                                             "stall_after": 30.0, "stale_after": 5.0}, t0,
                                             source=f"converted from watch --json: {sources}"))
    cursors = [0] * len(timelines)
    totals: dict[str, tuple[list[str], int]] = {}
    ticks = 0
    second = 0.0
    while second <= length + 1e-9:
        t = t0 + second
        states, jobs = {}, []
        for n, timeline in enumerate(timelines):
            while cursors[n] + 1 < len(timeline) and timeline[cursors[n] + 1][0] <= second + 1e-6:
                cursors[n] += 1
            offset, snap = timeline[cursors[n]]
            h = snap["host"]
            shift = t - (t0 + offset)  # > 0 while padding past the part's end
            age = h.get("last_sample_age_s") or 0.0
            states[h["name"]] = {"state": h["state"], "error": h.get("error"), "hint": h.get("hint"),
                                 "retry_at": None, "reconnects": h.get("reconnects", 0)}
            if h["state"] == "connected" and h.get("gpus") is not None:
                gpus = [parse_gpu(g) for g in h["gpus"]]
                encoder.sample(h["name"], HostSample(t - age, h.get("gpu_source") or "none", gpus, {},
                                                     gpu_error=h.get("gpu_error"),
                                                     **{k: h.get(k) for k in HOST_FACTS}))
            for job in snap["jobs"]:
                job = shift_job(job, snap["time"], t - shift)
                jobs.append(job)
                line = last_log_line(job)
                tail, before = totals.get(job["id"], ([], 0))
                total = max(before, int(job.get("log_lines") or 0))
                if line is not None and total > before:
                    tail = [line]
                totals[job["id"]] = (tail, total)
        logs = {job["id"]: totals[job["id"]] for job in jobs}
        writer.write(encoder.tick(t, states, jobs, logs, {}, {}))
        ticks += 1
        second += 1.0
    writer.close()
    return ticks


def shift_job(job: dict, recorded_at: float, aligned_at: float) -> dict:
    """Move a job's own times from the recording's clock to the aligned one."""
    delta = aligned_at - recorded_at

    def move(x):
        return None if x is None else x + delta

    job = dict(job)
    job["since"] = move(job.get("since"))
    job["ended_at"] = move(job.get("ended_at"))
    job["history"] = [dict(e, since=move(e["since"])) for e in job.get("history") or ()]
    job["progress_history"] = [dict(p, time=move(p["time"])) for p in job.get("progress_history") or ()]
    if job.get("progress"):
        job["progress"] = dict(job["progress"], updated_at=move(job["progress"].get("updated_at")))
    return job


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", help="the recording to write (.jsonl.gz)")
    parser.add_argument("--part", nargs=3, action="append", metavar=("FILE", "HOST", "SKIP_S"), default=[])
    parser.add_argument("--demo", action="store_true", help=f"write the bundled demo ({DEMO_OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    if args.demo:
        out, parts = DEMO_OUT, DEMO_PARTS
        if out.exists():
            out.unlink()
    else:
        if not args.out or not args.part:
            parser.error("give OUT and at least one --part (or --demo)")
        out, parts = Path(args.out), [(Path(f), h, float(s)) for f, h, s in args.part]
    ticks = convert(parts, out)
    print(f"{out}: {ticks} ticks, {out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
