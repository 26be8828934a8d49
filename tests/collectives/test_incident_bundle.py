"""The incident bundle: written from a real recording (the H200 demo recording) with a saved dump beside it,
opened again by `gpuwatch replay`; secrets in environment values redacted everywhere."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile

from gpuwatch_tui.demo import demo_recording
from gpuwatch_tui.incident_bundle import open_bundle, redact, redact_text, write_bundle
from gpuwatch_tui.recording.timeline import Replay, ReplayMonitor, Timeline
from tests.actions.pyspy_helpers import h200_dump


def saved_dump(directory, job: str, taken_at: float, job_id: str = ""):
    from gpuwatch_tui.actions.dump import DumpReport, save_report
    from gpuwatch_tui.actions.stack_analysis import analyse

    procs = [h200_dump("nccl_hang_pyspy_hang_1084.txt", rank=0), h200_dump("nccl_hang_pyspy_hang_1085.txt", rank=1)]
    report = DumpReport("h200-a", job, taken_at, "py-spy", "host", procs, analyse(procs),
                        host_facts={"env": {"WANDB_API_KEY": "wandb-secret-123", "RANK": "0"}},
                        collective_notes=["launched with HF_TOKEN=hf_secret_456 in its cmdline"], job_id=job_id)
    return save_report(report, directory)


def test_bundle_holds_report_window_dumps_findings_and_no_secret(tmp_path):
    timeline = Timeline.open(demo_recording())
    replay = Replay(timeline, timeline.history)
    replay.seek(timeline.end)
    dumps = tmp_path / "dumps"
    monitor = ReplayMonitor(replay)
    job = next(v for v in monitor.tracker.views(timeline.end) if v.host == "h200-a" and v.name == "nccl_hang.py")
    assert job.short_id
    mine = saved_dump(dumps, "nccl_hang.py", timeline.end - 30, job.short_id)
    os.utime(mine, (timeline.end - 30, timeline.end - 30))
    # another run of the same script on the same host, dumped later: never this job's
    other = saved_dump(dumps, "nccl_hang.py", timeline.end - 10, "zzzzz")
    os.utime(other, (timeline.end - 10, timeline.end - 10))
    path = write_bundle(ReplayMonitor(replay), "h200-a", "nccl_hang.py", tmp_path / "out",
                        recordings=[demo_recording()], window_s=120, now=timeline.end, dumps_dir=dumps)
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("manifest.json"))
        everything = b"".join(z.read(n) for n in names if not n.endswith(".gz"))
        rec = gzip.decompress(z.read("recording.jsonl.gz"))
        findings = json.loads(z.read("findings.json"))
    assert {"report.md", "recording.jsonl.gz", "findings.json", "manifest.json"} <= names
    assert {n for n in names if n.startswith("dumps/")} == {f"dumps/{mine.name}"}
    assert mine.name.startswith(f"h200-a_{job.short_id}_nccl_hang.py_")
    assert manifest["short_id"] == job.short_id and job.short_id in path.name
    assert manifest["job"] == "nccl_hang.py" and manifest["window"] == [timeline.end - 120, timeline.end]
    assert b"wandb-secret-123" not in everything and b"hf_secret_456" not in everything
    assert b"<redacted>" in everything and b'"RANK": "0"' in everything
    assert findings["lines"][1] == "1 in <module> (nccl_hang.py:57) (suspect)"
    # the window is a recording of its own: 2 minutes of the demo's 3, every host, the job there
    _, recording, keep = open_bundle(path)
    window = Timeline.open(recording)
    assert abs(window.start - (timeline.end - 120)) <= 1.5 and window.end == timeline.end
    assert window.hosts == timeline.hosts and any(j.name == "nccl_hang.py" for j in window.jobs_at(window.end))
    assert len(rec.splitlines()) > 100
    keep.cleanup()


def test_replay_opens_a_bundle_and_refuses_a_foreign_zip(tmp_path):
    timeline = Timeline.open(demo_recording())
    replay = Replay(timeline, timeline.history)
    replay.seek(timeline.end)
    path = write_bundle(ReplayMonitor(replay), "h200-c", "hang_gpu.py", tmp_path, recordings=[demo_recording()],
                        window_s=60, now=timeline.end, dumps_dir=tmp_path / "none")
    manifest, recording, keep = open_bundle(path)
    assert manifest["job"] == "hang_gpu.py" and recording.exists()
    keep.cleanup()
    foreign = tmp_path / "x.zip"
    with zipfile.ZipFile(foreign, "w") as z:
        z.writestr("a.txt", "hello")
    out = subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", "replay", str(foreign)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "no readable manifest.json" in out.stderr


def test_redaction_rules():
    assert redact_text("WANDB_API_KEY=abc RANK=3 AWS_SECRET_ACCESS_KEY='x y'") == \
        "WANDB_API_KEY=<redacted> RANK=3 AWS_SECRET_ACCESS_KEY=<redacted>"
    assert redact({"env": {"GITHUB_TOKEN": "t", "MASTER_PORT": "29500"}, "argv": ["--password=p"]}) == \
        {"env": {"GITHUB_TOKEN": "<redacted>", "MASTER_PORT": "29500"}, "argv": ["--password=<redacted>"]}
