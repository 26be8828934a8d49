"""Phase timelines per job from `gpuwatch watch --json` output: python scripts/summarize_timeline.py watch.jsonl"""
import json
import sys

t0 = None
last = {}
for line in open(sys.argv[1]):
    snap = json.loads(line)
    t0 = t0 or snap["time"]
    for job in snap["jobs"]:
        key = (job["host"], job["name"], tuple(job["pids"][:1]))
        state = (job["phase"], job.get("detail"))
        if last.get(key) != state:
            last[key] = state
            ev = "; ".join(job.get("evidence", [])[:4])
            print(f"+{snap['time'] - t0:6.1f}s {job['name']:18s} {job['phase']:13s} {job.get('detail') or '':16s} {ev}")
            if job.get("advice"):
                print(f"{'':27s}advice: {job['advice']}")
