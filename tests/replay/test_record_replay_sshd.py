"""Record real jobs on sshd test hosts with the real Monitor, replay the file, and check the replay
shows what the live core showed at the same instants (store, job views, logs, processes), on the
dashboard too (Pilot), and that seeking to a phase change lands on it."""

from __future__ import annotations

import asyncio
import time

from gpuwatch_tui.config import load_config
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.recording import Recorder, Timeline
from gpuwatch_tui.verbs.recording import report_from_recording
from gpuwatch_tui.ui.replay_app import ReplayApp
from gpuwatch_tui.ui.replay_source import ReplaySource
from gpuwatch_tui.ui.widgets.host_bar import HostBar
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from tests.e2e.harness import launch, stop_refs, write_config
from tests.ui.helpers import lines_of, notifications


def live_view(monitor: Monitor, now: float) -> dict:
    """What the live dashboard reads at `now`: the store, every job view, its log and processes."""
    views = sorted(monitor.tracker.views(now), key=lambda v: v.id)  # the order of the list is no contract
    return {
        "snapshot": monitor.store.snapshot(now, [v.to_json() for v in views]),
        "logs": {v.id: (monitor.tracker.log_lines(v.id), monitor.tracker.log_total(v.id)) for v in views},
        "procs": {v.id: monitor.tracker.procs(v.id) for v in views},
        "history": {h: [list(r.util_history) for _, r in sorted(rec.gpus.items())]
                    for h, rec in monitor.store.hosts.items()},
    }


def replay_view(source: ReplaySource, now: float) -> dict:
    jobs = sorted(source.jobs(), key=lambda j: j.id)
    return {
        "snapshot": source.store.snapshot(now, [j.to_json() for j in jobs]),
        "logs": {j.id: (source.job_log(j.id), source.job_log_total(j.id)) for j in jobs},
        "procs": {j.id: source.job_procs(j.id) for j in jobs},
        "history": {h: [list(r.util_history) for _, r in sorted(rec.gpus.items())]
                    for h, rec in source.store.hosts.items()},
    }


async def record_scenarios(cfg, path, runs_done, limit_s: float = 60.0) -> list[tuple[float, dict]]:
    monitor = Monitor(load_config(cfg))
    recorder = Recorder(monitor, path)
    recorder.open()
    instants = []
    await monitor.start()
    try:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            await asyncio.sleep(monitor.settings.sample_interval)
            now = time.time()
            recorder.tick(now)
            instants.append((now, live_view(monitor, now)))
            if runs_done(monitor):
                for _ in range(4):  # ended jobs keep their final verdict for a few more ticks
                    await asyncio.sleep(monitor.settings.sample_interval)
                    now = time.time()
                    recorder.tick(now)
                    instants.append((now, live_view(monitor, now)))
                break
    finally:
        await monitor.stop()
        recorder.close()
    return instants


def test_replay_shows_what_live_showed(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=2, phase="idle", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host], history=20)
    runs = {
        "finish": launch(ssh_env, host, tmp_path / "finish", "finish.py", "--steps", "12", "--step-time", "0.4"),
        "hang": launch(ssh_env, host, tmp_path / "hang", "hang.py", "--steps", "4", "--step-time", "0.3"),
    }
    host.set_scenario(gpus=2, phase="idle", uuid_prefix=f"GPU-{host.name}",
                      per_gpu={"0": {"phase": "training"}, "1": {"phase": "held"}},
                      processes=[{"gpu": 0, "pid": runs["finish"].pid, "used_memory_mib": 30_000},
                                 {"gpu": 1, "pid": runs["hang"].pid, "used_memory_mib": 20_000}])
    path = tmp_path / "rec.jsonl.gz"

    def done(monitor) -> bool:
        phases = {v.name: v.phase for v in monitor.tracker.views(time.time())}
        return phases.get("finish.py") == "finished" and phases.get("hang.py") == "stalled"

    try:
        instants = asyncio.run(record_scenarios(cfg, path, done))
    finally:
        stop_refs([r.ref for r in runs.values()])
    last = instants[-1][1]["snapshot"]
    assert {j["name"]: j["phase"] for j in last["jobs"]} == {"finish.py": "finished", "hang.py": "stalled"}, last

    timeline = Timeline.open(path)
    assert timeline.damage is None
    source = ReplaySource(timeline, history=20, playing=False)
    order = list(range(len(instants)))
    for i in order + order[::-1][:5]:  # forward, then a few steps back (a rebuild of the store)
        now, live = instants[i]
        source.seek(now)
        replayed = replay_view(source, now)
        assert replayed["snapshot"] == live["snapshot"], f"instant {i}"
        assert replayed["logs"] == live["logs"], f"instant {i}"
        assert replayed["procs"] == live["procs"], f"instant {i}"
        assert replayed["history"] == live["history"], f"instant {i}"
    assert any(lines for lines, _ in instants[-1][1]["logs"].values())  # real log lines were compared

    # Seek to a phase change lands on it: the replay then shows the new phase, a tick before it the old.
    source.seek(timeline.start)
    stalled_at = None
    while (t := source.next_phase_change()) is not None:
        phases = {j.name: j.phase for j in source.jobs()}
        if phases.get("hang.py") == "stalled" and stalled_at is None:
            stalled_at = t
    assert stalled_at is not None
    source.seek(stalled_at)
    before = {j.name: j.phase for j in source.timeline.jobs_at(stalled_at - 0.01)}
    assert before.get("hang.py") != "stalled"

    # The dashboard on the recording (Pilot): the same jobs and phases as live at that instant.
    async def pilot() -> None:
        now, live = instants[-1]
        replay = ReplaySource(timeline, history=20, playing=False, start=now)
        app = ReplayApp(replay)
        async with app.run_test(size=(160, 40)) as p:
            await p.pause()
            app._refresh_screen()
            await p.pause()
            table = "\n".join(lines_of(app.screen.query_one(JobsTable)))
            for job in live["snapshot"]["jobs"]:
                assert job["name"] in table and job["phase"] in table, table
            bar = app.screen.query_one(HostBar).time_cursor
            assert "REPLAY" in bar and time.strftime("%H:%M:%S", time.gmtime(now)) in bar
            # < goes to the previous phase change, and the cursor shows it
            await p.press("less_than_sign")
            await p.pause()
            assert replay.now() == timeline.previous_phase_change(now)
            # K (kill) is refused with the reason: there is no host to act on
            app.screen.query_one(JobsTable).focus()
            await p.press("K")
            await p.pause()
            assert any("no host to act on" in n or "no job selected" in n for n in notifications(app))

    asyncio.run(pilot())

    # The incident report of the recorded instant.
    out = tmp_path / "reports"
    assert report_from_recording(str(path), "end", host.name, "hang.py", str(out), 20) == 0
    text = next(out.glob("*.md")).read_text()
    assert "**stalled**" in text and "step 4/40" in text
