"""`gpuwatch demo` shows the product within seconds; the dashboard's rolling recording rolls and prunes."""

from __future__ import annotations

import asyncio
import os
import time

from gpuwatch_tui.cli import DEMO_SPEED, main
from gpuwatch_tui.config import load_config
from gpuwatch_tui.demo import demo_recording
from gpuwatch_tui.monitor import Monitor
from gpuwatch_tui.recording import RollingRecorder, Timeline
from gpuwatch_tui.ui.replay_app import ReplayApp
from gpuwatch_tui.ui.replay_source import ReplaySource
from gpuwatch_tui.ui.screens.help_screen import binding_rows
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from tests.ui.helpers import lines_of

PHASES = ("starting", "loading", "compiling", "training", "evaluating", "checkpointing", "silent", "stalled",
          "crashed", "finished")


def test_demo_shows_four_phases_within_ten_seconds():
    source = ReplaySource(Timeline.open(demo_recording()), speed=DEMO_SPEED, loop=True)
    app = ReplayApp(source)

    async def run() -> set[str]:
        shown: set[str] = set()
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            source.playing = True
            for _ in range(40):  # 10 s of wall clock, in the 0.25 s steps the replay's own loop takes
                source.step(0.25)
                app._refresh_screen()
                await pilot.pause()
                table = "\n".join(lines_of(app.screen.query_one(JobsTable)))
                shown |= {p for p in PHASES if p in table}
            rows = binding_rows(app)
            keys = {key for _, key, _ in rows}
            assert {"space", "+", "-", "[", "]", "{", "}", "<", ">"} <= keys, keys
        return shown

    shown = asyncio.run(run())
    assert len(shown) >= 4, shown


def test_demo_loops_back_to_its_start():
    timeline = Timeline.open(demo_recording())
    source = ReplaySource(timeline, speed=60, loop=True)
    source.seek(timeline.end - 1)
    source.step(1.0)
    assert source.now() == timeline.start and source.playing


def test_replay_of_a_missing_or_foreign_file_is_a_clear_error(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "none.jsonl.gz")]) == 2
    assert "cannot read" in capsys.readouterr().err
    other = tmp_path / "status.json"
    other.write_text('{"version": 1, "hosts": []}\n')
    assert main(["replay", str(other)]) == 2
    assert "not a gpuwatch recording" in capsys.readouterr().err
    assert main(["report", "h", "j", "--at", "+1m"]) == 2
    assert "--at needs --recording" in capsys.readouterr().err


def test_rolling_recording_rolls_and_prunes(tmp_path):
    directory = tmp_path / "rec"
    directory.mkdir()
    old = directory / "gpuwatch-20200101T000000Z.jsonl.gz"
    old.write_bytes(b"old")
    os.utime(old, (time.time() - 3 * 86400, time.time() - 3 * 86400))
    mine = directory / "notes.txt"
    mine.write_text("not a recording")
    os.utime(mine, (time.time() - 3 * 86400, time.time() - 3 * 86400))
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(f'[settings]\nsample_interval = 0.2\nrecord = "{directory}"\nrecord_retention = "24h"\n'
                   '[[hosts]]\nname = "here"\nlocal = true\ngpu_source = "none"\n')
    config = load_config(str(cfg))
    assert config.settings.record == str(directory) and config.settings.record_retention == 86400

    async def run() -> RollingRecorder:
        monitor = Monitor(config)
        recorder = RollingRecorder(monitor, config.settings.record, config.settings.record_retention,
                                   roll_every_s=1.0)
        recorder.attach()
        await monitor.start()
        await asyncio.sleep(2.6)
        await monitor.stop()
        recorder.close()
        return recorder

    recorder = asyncio.run(run())
    assert recorder.problem is None
    assert not old.exists() and mine.exists()
    files = sorted(directory.glob("gpuwatch-*.jsonl.gz"))
    assert len(files) >= 2, files
    for path in files:
        timeline = Timeline.open(path)
        assert timeline.damage is None and timeline.ticks and timeline.hosts == ["here"]
        assert timeline.samples["here"], path  # every file stands alone: its own samples
