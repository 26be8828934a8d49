"""The timeline of run_rank_stop.sh: the job's phases from `watch --json` relative to the SIGSTOP, when the
stopped rank was first named, what the py-spy dump and the kill reported.
Usage: python3 summarize_rank_stop.py OUTDIR   (reads watch.jsonl[.gz], stop.txt, dump.json, kill.json)"""
import gzip
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
stop_t, victim, vpid = open(out / "stop.txt").read().split()
stop_t = float(stop_t)
path = out / "watch.jsonl"
lines = (gzip.open(str(path) + ".gz", "rt") if not path.exists() else open(path)).read().splitlines()
last = None
named_at = stalled_at = None
print(f"SIGSTOP of rank {victim} (pid {vpid}) at t=0")
for line in lines:
    try:
        snap = json.loads(line)
    except ValueError:
        continue
    for job in snap.get("jobs", []):
        if job.get("name") != "rank_stop.py":
            continue
        t = snap["time"] - stop_t
        ranks = job.get("ranks") or []
        key = (job["phase"], job.get("detail"), job["evidence"][0] if job.get("evidence") else "")
        if key != last:
            print(f"{t:+8.1f}s {job['phase']:<9} {job.get('detail') or '':<13} ranks={len(ranks)} "
                  f"culprit={[r['rank'] for r in ranks if r.get('culprit')]} | {key[2][:150]}")
            last = key
        if t >= 0 and named_at is None and any(f"rank {victim} " in e and "stopped" in e for e in job.get("evidence", [])):
            named_at = t
        if t >= 0 and stalled_at is None and job["phase"] == "stalled":
            stalled_at = t
print(f"stop -> rank {victim} named in the evidence: {named_at if named_at is None else round(named_at, 1)} s")
print(f"stop -> stalled: {stalled_at if stalled_at is None else round(stalled_at, 1)} s")
for name in ("dump.json", "kill.json"):
    try:
        # the CLI prints the plan it confirms, then the outcome as one JSON line
        res = json.loads((out / name).read_text().strip().splitlines()[-1])
    except (OSError, ValueError) as exc:
        print(f"{name}: unreadable ({exc})")
        continue
    rep = res.get("report") or {}
    print(f"{name}: status {res.get('status')} {res.get('message') or ''}")
    if name == "dump.json":
        procs = rep.get("processes") or []
        print(f"  dumped {sum(1 for p in procs if p.get('ok'))}/{len(procs)} processes, ranks "
              f"{sorted(p.get('rank') for p in procs if p.get('rank') is not None)}; "
              f"analysis: {(rep.get('analysis') or {}).get('summary')}")
        for s in (rep.get("analysis") or {}).get("suspects") or []:
            print(f"  suspect: {s.get('label')}: {s.get('why')}")
    else:
        for o in rep.get("outcomes") or []:
            print(f"  {o.get('pid'):>7} {o.get('role'):<10} {o.get('outcome')} {o.get('message') or ''}")
