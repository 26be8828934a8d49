"""Score `gpuwatch watch --json` verdicts against what the jobs really did.

    python scripts/score_timeline.py WATCH.jsonl[.gz] TRUTH.jsonl [--stall-after 30] [--lag 2]

TRUTH.jsonl is written by the jobs themselves (scripts/gpu_jobs/truth.py): {"t", "pid", "job", "phase"}
with phases starting, loading, compiling, training, hung, finished, crashed. Each sample of each job is
compared with the truth at that instant:
  starting/loading -> starting or loading;  compiling -> compiling;  training -> training (a job whose
  stdout is a file without -u may also read silent);  hung -> stalled, except inside the stall_after window
  after the hang began, where training/silent/stalled are all fair and the sample is not scored;
  finished -> finished;  crashed, or gone without a last word -> crashed.
A verdict that still shows the previous truth within --lag seconds of a change is not scored either
(sampling is 1 Hz). Prints each job's timeline beside its truth, the disagreements and the score.
"""
from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict

OK = {
    "starting": {"starting", "loading"},
    "loading": {"starting", "loading"},
    "compiling": {"compiling"},
    "training": {"training"},
    "hung": {"stalled"},
    "finished": {"finished"},
    "crashed": {"crashed"},
}
EARLY = {"starting", "loading", "compiling"}


def read_jsonl(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def truth_at(marks: list[dict], t: float) -> tuple[str | None, float | None, str | None]:
    """(phase, since, previous phase) at time t."""
    current, since, previous = None, None, None
    for m in marks:
        if m["t"] > t:
            break
        if m["phase"] != current:
            previous, current, since = current, m["phase"], m["t"]
    return current, since, previous


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("watch")
    ap.add_argument("truth")
    ap.add_argument("--stall-after", type=float, default=30.0)
    ap.add_argument("--lag", type=float, default=2.0)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    snaps = read_jsonl(args.watch)
    marks_by_pid: dict[int, list[dict]] = defaultdict(list)
    for m in sorted(read_jsonl(args.truth), key=lambda m: m["t"]):
        marks_by_pid[m["pid"]].append(m)
    t0 = snaps[0]["time"]
    per_job: dict[str, dict] = {}
    for snap in snaps:
        t = snap["time"]
        for job in snap["jobs"]:
            pids = [p for p in job.get("pids", []) if p in marks_by_pid]
            rec = per_job.setdefault(job["id"], {"name": job["name"], "pids": set(), "timeline": [], "truth": [],
                                                 "scored": 0, "right": 0, "wrong": [], "false_stalled": 0,
                                                 "buffered": False})
            rec["pids"].update(pids)
            if not rec["pids"]:
                continue
            marks = sorted((m for p in rec["pids"] for m in marks_by_pid[p]), key=lambda m: m["t"])
            truth, since, previous = truth_at(marks, t)
            if truth is None:
                continue
            if not job.get("alive", True) and truth not in ("finished", "crashed"):
                truth, previous = "crashed", truth  # gone without a last word: killed
                since = job.get("ended_at") or t
            phase = job["phase"]
            if any("no -u" in e for e in job.get("evidence", [])):
                rec["buffered"] = True
            if not rec["timeline"] or rec["timeline"][-1][1] != phase:
                rec["timeline"].append((t - t0, phase, job.get("detail")))
            if not rec["truth"] or rec["truth"][-1][1] != truth:
                rec["truth"].append((since - t0, truth))
            ok = set(OK[truth])
            if truth == "training" and rec["buffered"]:
                ok.add("silent")
            if truth == "hung" and t - since < args.stall_after + args.lag:
                continue  # the engine is not asked to call a hang before stall_after
            if previous is not None and t - since < args.lag and phase in OK.get(previous, ()):
                continue
            rec["scored"] += 1
            if phase in ok:
                rec["right"] += 1
            else:
                rec["wrong"].append((round(t - t0, 1), truth, phase))
            if phase == "stalled" and truth in EARLY:
                rec["false_stalled"] += 1
    total = right = false_stalled = 0
    out = {}
    for job_id, rec in per_job.items():
        if not rec["scored"]:
            continue
        total += rec["scored"]
        right += rec["right"]
        false_stalled += rec["false_stalled"]
        print(f"\n== {rec['name']} ({job_id}) pids {sorted(rec['pids'])}")
        print("   truth:   " + "  ".join(f"+{s:.0f}s {p}" for s, p in rec["truth"]))
        print("   gpuwatch:" + "  ".join(f"+{s:.0f}s {p}{'/' + d if d else ''}" for s, p, d in rec["timeline"]))
        pct = 100.0 * rec["right"] / rec["scored"]
        print(f"   {rec['right']}/{rec['scored']} samples right ({pct:.1f}%), false stalled in start-up: "
              f"{rec['false_stalled']}")
        for w in rec["wrong"][:12]:
            print(f"   disagree at +{w[0]}s: truth {w[1]}, gpuwatch {w[2]}")
        out[rec["name"]] = {"scored": rec["scored"], "right": rec["right"], "percent": round(pct, 1),
                            "false_stalled_startup": rec["false_stalled"], "disagreements": rec["wrong"],
                            "truth": rec["truth"], "timeline": rec["timeline"]}
    if total:
        print(f"\nALL: {right}/{total} samples right ({100.0 * right / total:.1f}%), "
              f"false stalled in start-up/loading/compiling: {false_stalled}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"jobs": out, "scored": total, "right": right, "false_stalled_startup": false_stalled}, f,
                      indent=1)


if __name__ == "__main__":
    main()
