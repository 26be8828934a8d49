from __future__ import annotations

from gpuwatch_tui.jobs.logtail import LogBuffer, sanitize_line
from gpuwatch_tui.model import TailChunk


def chunk(data: bytes, reset=False, skipped=0, size=None, mtime=None):
    return TailChunk("k", "/x/train.log", data, reset, skipped, size, mtime, None)


def test_carriage_return_frames_collapse_to_the_latest():
    b = LogBuffer()
    b.feed_bytes(b"\r  0%| 0/8\r 50%| 4/8\r100%| 8/8\n", 1.0)
    assert [l.text for l in b.take_new()] == ["100%| 8/8"]


def test_frames_of_only_cursor_moves_do_not_hide_the_bar():
    b = LogBuffer()
    b.feed_bytes(b"\r 50%| 4/8 [00:00<00:00]\r\x1b[A\n", 1.0)
    assert b.lines() == [" 50%| 4/8 [00:00<00:00]"]


def test_partial_line_held_then_shown_when_stale_then_continued():
    b = LogBuffer(partial_stale_s=2.0)
    b.feed_bytes(b"step 1\nLoading: 25%", 10.0)
    assert b.lines() == ["step 1"] and b.live == "Loading: 25%"
    b.tick(11.0)
    assert b.lines() == ["step 1"]
    b.tick(12.5)
    assert b.lines() == ["step 1", "Loading: 25%"]  # shown, provisionally
    b.feed_bytes(b"\rLoading: 50%\n", 13.0)
    assert b.lines() == ["step 1", "Loading: 50%"]
    assert b.total_lines == 2


def test_reset_leaves_a_marker_and_drops_the_partial():
    b = LogBuffer()
    b.feed(chunk(b"a\nhalf"), 1.0)
    b.feed(chunk(b"new\n", reset=True), 2.0)
    assert b.lines() == ["a", "[gpuwatch: log restarted (rotated, truncated or recreated)]", "new"]
    assert b.resets == 1


def test_skipped_bytes_leave_a_marker():
    b = LogBuffer()
    b.feed(chunk(b"a\n"), 1.0)
    b.feed(chunk(b"z\n", skipped=5000), 2.0)
    assert "5000 bytes skipped" in b.lines()[1]


def test_first_chunk_from_the_middle_of_a_file_drops_the_cut_line():
    b = LogBuffer()
    b.feed(chunk(b"of a line\nwhole line\n", size=10_000, mtime=0.5), 5.0)
    assert b.lines() == ["whole line"]
    assert b.last_growth == 0.5  # backlog was written before we looked


def test_keeps_only_the_last_n_lines():
    b = LogBuffer(max_lines=3)
    b.feed_bytes(b"".join(b"%d\n" % i for i in range(10)), 1.0)
    assert b.lines() == ["7", "8", "9"] and b.total_lines == 10


def test_long_lines_are_capped():
    b = LogBuffer(max_line_chars=10)
    b.feed_bytes(b"x" * 50 + b"\n", 1.0)
    assert b.lines() == ["xxxxxxxxxx… [+40 chars]"]


def test_sanitize_removes_escapes_and_shows_controls():
    assert sanitize_line(b"\x1b[31mred\x1b[0m") == "red"
    assert sanitize_line(b"\x1b]0;pwned title\x07ok") == "ok"
    assert sanitize_line(b"bell\x07 nul\x00") == "bell^G nul^@"
    assert sanitize_line("c1 \x9b2J csi".encode()) == "c1  csi"
    assert sanitize_line(b"\xff\xfebad") == "\ufffd\ufffdbad"
    assert sanitize_line("rtl \u202eevil") == "rtl <U+202E>evil"
    assert sanitize_line(b"lone \x1b esc") == "lone ^[ esc"
    assert sanitize_line(b"a\tb") == "a       b"
    for ch in range(0, 32):
        out = sanitize_line(bytes([ch]) + b"x")
        assert all(ord(c) >= 32 for c in out)
