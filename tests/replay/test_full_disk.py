"""A full disk, for real: a small tmpfs mounted by the test (root only; CI runs as root).

- `gpuwatch record` (a subprocess) on a disk that fills up: a clear message, exit 1, no traceback, and
  what reached the disk replays.
- The dashboard's rolling recording (the real app over the real core, `[settings] record`): the host bar
  says it is not recording and an alert (the toast) says why; once space returns it records again
  (another alert), into a new file that replays.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.config import load_config
from gpuwatch_tui.recording import files as recording_files
from gpuwatch_tui.recording import recorder as recorder_module
from gpuwatch_tui.verbs.recording import load_timeline, recording_dashboard_source
from gpuwatch_tui.recording.timeline import Timeline
from gpuwatch_tui.ui.run import build_app
from gpuwatch_tui.ui.widgets.host_bar import HostBar


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs at tmp_path/disk, unmounted at the end."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs (a disk that fills up for real) needs root")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0755", "tmpfs", str(mountpoint)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write until the disk is full; returns the filler (delete it and space returns)."""
    path = directory / name
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return path


def write_config(tmp_path: Path, **settings) -> Path:
    cfg = tmp_path / "hosts.toml"
    lines = ["[settings]", "sample_interval = 0.2"] + [f'{k} = "{v}"' for k, v in settings.items()]
    lines += ["[[hosts]]", 'name = "here"', "local = true", 'gpu_source = "none"']
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_record_on_a_disk_that_fills_up_says_so_and_what_was_written_replays(small_disk, tmp_path):
    cfg = write_config(tmp_path)
    path = small_disk / "night.jsonl.gz"
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch_tui.cli", "record", str(path), "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        # The first flush (every 10 s) puts a readable start on the disk; then the disk fills up.
        wait_until(lambda: path.exists() and path.stat().st_size > 0 or proc.poll() is not None, 60, "a first flush")
        assert proc.poll() is None, proc.communicate()
        fill(small_disk)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    words = err.decode()
    assert proc.returncode == 1, words
    assert "Traceback" not in words, words
    assert "the disk is full" in words and str(path) in words and "replays" in words, words
    timeline = load_timeline(str(path))
    assert timeline.ticks and timeline.hosts == ["here"]
    assert timeline.damage  # cut short, and the replay says so


async def test_the_rolling_recording_shows_a_full_disk_alerts_and_resumes(small_disk, tmp_path, monkeypatch):
    monkeypatch.setattr(recording_files, "FLUSH_EVERY_S", 0.0)  # every line on the disk at once
    monkeypatch.setattr(recorder_module, "RETRY_EVERY_S", 0.5)
    directory = small_disk / "rec"
    config = load_config(str(write_config(tmp_path, record=str(directory), record_retention="24h")))
    source, recorder = recording_dashboard_source(config)
    app = build_app(source, themes_dir=tmp_path / "themes", readonly=True, history=config.settings.history)
    toasts = []
    app.show_alert = toasts.append  # the toast sink, as the app wires it (enable_alerts was given the original)
    source.enable_alerts(toasts.append, None)
    async with app.run_test(size=(140, 40)) as pilot:

        async def until(predicate, timeout, what):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if predicate():
                    return
                await pilot.pause(0.1)
            raise AssertionError(f"timed out waiting for {what}; toasts: {[t.one_line() for t in toasts]}")

        def bar_text() -> str:
            return str(app.screen.query_one(HostBar).render())

        await until(lambda: recorder.current is not None and recorder.current.ticks >= 2, 30, "recording")
        filler = fill(small_disk)
        # The file's last tmpfs page still takes a few small synced lines: ENOSPC comes once it is full.
        await until(lambda: recorder.problem is not None, 120, "the recording to stop")
        assert "the disk is full" in recorder.problem
        await until(lambda: "NOT RECORDING" in bar_text(), 10, "the host bar to say so")
        stopped = [t for t in toasts if t.trigger == "recording-stopped"]
        assert stopped and "the disk is full" in stopped[0].message and stopped[0].severity == "critical"
        stopped_file = recorder.current.path if recorder.current is not None else None
        assert stopped_file is None

        filler.unlink()  # space returns
        await until(lambda: recorder.problem is None, 30, "the recording to resume")
        await until(lambda: "NOT RECORDING" not in bar_text(), 10, "the host bar to clear")
        assert any(t.trigger == "recording-resumed" for t in toasts)
        resumed = recorder.current.path
        await until(lambda: recorder.current.ticks >= 2, 30, "ticks after resuming")
        await source.stop()
    recorder.close()
    files = sorted(directory.glob("gpuwatch-*.jsonl.gz"))
    assert resumed in files and len(files) >= 2
    for path in files:  # the one cut short by the full disk and the new one: both replay
        timeline = Timeline.open(path)
        assert timeline.ticks and timeline.hosts == ["here"], (path, timeline.damage)
    assert Timeline.open(resumed).damage is None
    await asyncio.sleep(0)
