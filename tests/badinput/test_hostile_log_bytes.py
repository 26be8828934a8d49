"""Hostile log bytes never reach the terminal raw and never crash the view.

Fuzzed through the real LogBuffer (hypothesis), and end to end: a real process's log full of
escape sequences, C1 controls, NUL, invalid UTF-8, Rich markup, a 1 MB line and binary, followed
by the real core over the local host and shown in the real job pane: every segment the LogView
draws is checked for control characters.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuwatch_tui.config import load_config  # noqa: E402
from gpuwatch_tui.jobs.logtail import LogBuffer  # noqa: E402

# Any C0 control but tab is refused, as are DEL, C1 and the bidi overrides.
RAW_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

HOSTILE = [
    b"\x1b]0;pwned title\x07", b"\x1b]52;c;cHduZWQ=\x07", b"\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    b"\x1bP+q544e\x1b\\", b"\x1b[2J\x1b[H\x1b[31mred\x1b[0m", b"\x9b31m", b"\x9d0;c1 title\x9c", b"\xc2\x9b2J",
    b"\xc2\x9d0;t\xc2\x9c", b"nul\x00byte", b"\xff\xfe\xfd invalid", b"\xed\xa0\x80 surrogate", b"[bold]markup[/bold]",
    b"[link=file:///etc/passwd]x[/link]", b"\x07bell\x08\x7f", b"\xe2\x80\xaeevil\xe2\x80\xac", b"a\rb\r\x1b[A",
    b"\x1b", b"\x1b[", b"\x1b]", b"\x1bP", b"\x1b]0;never terminated",
]


def assert_clean(text: str) -> None:
    bad = RAW_CONTROL.search(text)
    assert bad is None, f"raw control {bad.group()!r} in {text[:200]!r}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(HOSTILE), st.binary(max_size=64),
                          st.sampled_from([b"\n", b"\r", b"\r\n", b"\x1b"])), max_size=30),
       st.integers(1, 64))
def test_log_buffer_never_lets_control_bytes_through(parts, chunk):
    buf = LogBuffer(max_lines=100, max_line_chars=500)
    data = b"".join(parts)
    now = 1000.0
    for i in range(0, len(data), chunk):  # arbitrary chunk borders: escapes split across reads
        buf.feed_bytes(data[i:i + chunk], now)
        now += 0.1
    buf.tick(now + 10)
    for line in buf.lines() + [buf.live]:
        assert_clean(line)
        assert len(line) < 700


def test_megabyte_line_is_cut_not_kept_whole():
    buf = LogBuffer(max_lines=10, max_line_chars=2000)
    buf.feed_bytes(b"A" * (1 << 20) + b"\x1b]0;x\x07\n", 1.0)
    (line,) = buf.lines()
    assert len(line) < 2100 and "chars]" in line


async def test_job_pane_shows_a_hostile_log_safely(tmp_path):
    from gpuwatch_tui.ui.app import GpuwatchApp
    from gpuwatch_tui.ui.monitor_source import MonitorSource
    from gpuwatch_tui.ui.screens.job_screen import JobScreen
    from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
    from gpuwatch_tui.ui.widgets.log_view import LogView

    log = tmp_path / "train.log"
    # the megabyte line first: a tail starts near the end of a file it first sees
    body = b"B" * (1 << 20) + b"\n" + bytes(range(256)) + b"\n" \
        + b"\n".join([b"step 1 loss 2.0 " + h for h in HOSTILE]) + b"\nstep 2 loss 1.9 done\n"
    writer = "import sys,time; sys.stdout.buffer.write(open(sys.argv[1],'rb').read()); sys.stdout.flush(); time.sleep(60)"
    src = tmp_path / "body.bin"
    src.write_bytes(body)
    cfg_file = tmp_path / "hosts.toml"
    cfg_file.write_text('[settings]\nsample_interval = 0.3\n\n[[hosts]]\nname = "here"\nlocal = true\n\n'
                        f'[[jobs]]\nhost = "here"\nname = "hostile"\nmatch = "{src.name}"\nlog = "{log}"\n')
    with open(log, "wb") as out:
        job = subprocess.Popen([sys.executable, "-c", writer, str(src)], stdout=out, stdin=subprocess.DEVNULL)
    try:
        app = GpuwatchApp(MonitorSource(config=load_config(str(cfg_file))), min_refresh_interval=0)
        async with app.run_test(size=(120, 36)) as pilot:
            table = app.screen.query_one(JobsTable)
            for _ in range(200):
                if table.row_count:
                    break
                await pilot.pause(0.1)
            app.open_job(table.job_ids[0])
            await pilot.pause()
            assert isinstance(app.screen, JobScreen)
            view = app.screen.query_one(LogView)
            for _ in range(200):
                if any("step 2" in line for line in view.lines):
                    break
                await pilot.pause(0.1)
            assert any("step 2" in line for line in view.lines), view.lines[-3:]
            drawn = []
            for wrap in (False, True):
                if view.wrap != wrap:
                    await pilot.press("w")
                    await pilot.pause()
                for y in range(view.size.height):
                    for seg in view.render_line(y):
                        drawn.append(seg.text)
            for line in view.lines:
                assert_clean(line)
            for text in drawn:
                assert_clean(text)
            assert any("[bold]markup[/bold]" in line for line in view.lines), [x[:80] for x in view.lines]  # literal
            await pilot.press("q")
    finally:
        job.kill()
        job.wait()
