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
    assert sanitize_line(b"bell\x07 nul\x00") == "bell\u2407 nul\u2400"
    assert sanitize_line("c1 \x9b2J csi".encode()) == "c1  csi"
    assert sanitize_line(b"\xff\xfebad") == "\ufffd\ufffdbad"
    assert sanitize_line("rtl \u202eevil") == "rtl <U+202E>evil"
    assert sanitize_line(b"lone \x1b esc") == "lone \u241b esc"
    assert sanitize_line(b"a\tb") == "a       b"
    for ch in range(0, 32):
        out = sanitize_line(bytes([ch]) + b"x")
        assert all(ord(c) >= 32 for c in out)


# ---- over-long lines: the lines around them are kept, the long one is marked as cut


def test_a_cut_reported_by_the_probe_marks_that_line_only():
    b = LogBuffer()
    data = b"before\n" + b"x" * 10 + b"\nafter\n"
    b.feed(TailChunk("k", "/x/train.log", data, False, 0, None, None, None, ((17, 999_990),)), 1.0)
    assert b.lines() == ["before", "xxxxxxxxxx [gpuwatch: line cut, 999990 more bytes not shown]", "after"]


def test_a_cut_line_still_being_written_is_live_then_closed_with_its_total():
    b = LogBuffer()
    b.feed(TailChunk("k", "/x/l", b"ok\n" + b"y" * 4, False, 0, None, None, None, ((7, 100),)), 1.0)
    assert b.lines() == ["ok"] and b.live == "yyyy [gpuwatch: line cut, 100 more bytes not shown]"
    b.feed(TailChunk("k", "/x/l", b"\nnext\n", False, 0, None, None, None, ((0, 50),)), 2.0)
    assert b.lines() == ["ok", "yyyy [gpuwatch: line cut, 150 more bytes not shown]", "next"]


def test_a_cut_progress_frame_replaced_by_a_later_frame_is_not_marked():
    b = LogBuffer()
    b.feed(TailChunk("k", "/x/l", b"huge\r 50%| 4/8\n", False, 0, None, None, None, ((4, 70_000),)), 1.0)
    assert b.lines() == [" 50%| 4/8"]


def test_an_unterminated_runaway_line_keeps_its_beginning_and_the_next_lines():
    b = LogBuffer(max_line_chars=100_000)
    b.feed_bytes(b"first\n" + b"z" * (LogBuffer.MAX_PARTIAL_BYTES + 10), 1.0)
    b.feed_bytes(b"z" * 5 + b"\nlast\n", 2.0)
    lines = b.lines()
    assert lines[0] == "first" and lines[2] == "last" and len(lines) == 3
    assert lines[1].endswith("[gpuwatch: line cut, 15 more bytes not shown]")
    assert lines[1].startswith("z" * LogBuffer.MAX_PARTIAL_BYTES)


# ---- through the real probe, reading a file a real process writes

WRITER = r"""
import os, sys, time
path, mode = sys.argv[1], sys.argv[2]
with open(path, "ab", buffering=0) as f:
    if mode == "burst":  # everything lands between two probe frames
        f.write(b"".join(b"before %d\n" % i for i in range(30)) + b"L" * (1 << 20) + b"\nafter 1\nafter 2\n")
    elif mode == "slow":  # the long line is still being written across several frames
        f.write(b"before slow\n")
        for _ in range(8):
            f.write(b"S" * (128 << 10)); time.sleep(0.15)
        f.write(b"\nafter slow\n")
    elif mode == "bar":  # a progress bar: 3000 carriage-return frames, no newline, then a final one
        for i in range(3000):
            f.write(b"\rtrain: %d/3000 [00:01<00:00, 999.00it/s]" % (i + 1))
        f.write(b"\n")
"""


def _follow_with_probe(path, mode, settle_s=2.5):
    """Start the probe as a child process, tail `path`, run a real writer, return the LogBuffer."""
    import json
    import subprocess
    import sys
    import time

    from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv
    from gpuwatch_tui.feeds.probe_frames import parse_sample

    probe = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = None
    buf = LogBuffer(max_line_chars=200_000)
    try:
        probe.stdin.write(build_payload({"interval": 0.2, "gpu_source": "none"}))
        probe.stdin.write(json.dumps({"op": "want", "pids": [], "tails": {"log": str(path)}}).encode() + b"\n")
        probe.stdin.flush()
        deadline = None
        while True:
            frame = json.loads(probe.stdout.readline())
            if frame.get("type") != "sample":
                continue
            sample = parse_sample(frame)
            for t in sample.tails:
                buf.feed(t, time.time())
            if writer is None and any(t.size is not None for t in sample.tails):
                writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), mode])
            elif writer is not None and writer.poll() is not None:
                deadline = deadline or time.time() + settle_s
                if time.time() > deadline:
                    break
    finally:
        probe.stdin.close()
        probe.wait(timeout=10)
        if writer is not None and writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0
    return buf


def test_probe_keeps_every_line_written_before_a_1mb_line(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    buf = _follow_with_probe(log, "burst")
    lines = buf.lines()
    assert lines[:30] == [f"before {i}" for i in range(30)]
    assert lines[30].startswith("L" * 1000)
    dropped = (1 << 20) - (len(lines[30]) - len(lines[30].lstrip("L")))
    assert lines[30].endswith(f"[gpuwatch: line cut, {dropped} more bytes not shown]")
    assert lines[31:] == ["after 1", "after 2"]
    assert buf.skipped_bytes == 0


def test_probe_marks_a_long_line_written_across_frames(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    buf = _follow_with_probe(log, "slow")
    lines = buf.lines()
    assert lines[0] == "before slow" and lines[-1] == "after slow" and len(lines) == 3
    kept = len(lines[1]) - len(lines[1].lstrip("S"))
    assert lines[1].endswith(f"[gpuwatch: line cut, {8 * (128 << 10) - kept} more bytes not shown]")


def test_probe_passes_the_latest_frame_of_a_long_progress_bar(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    buf = _follow_with_probe(log, "bar")  # ~130 KiB of frames on one "line"
    assert buf.lines() == ["train: 3000/3000 [00:01<00:00, 999.00it/s]"]


def test_sanitize_skips_the_unsafe_pass_only_on_printable_text():
    """The unsafe-character pass runs whenever a line holds anything not printable: the same text as
    running it always, for controls, C1, bidi overrides, NBSP, line separators, emoji and CJK."""
    import random

    from gpuwatch_tui.jobs import logtail
    from gpuwatch_tui.safe_text import safe_text

    alphabet = ("abc XYZ 019.,:/%|#" + "\x00\x07\x08\x0b\x0c\x0d\x1f\x7f\x80\x85\x9f"
                + "\u202a\u202e\u2066\u2069\u200e\u200f\u061c\u00a0\u2028\u2029\u200b\ufeff" + "é漢😀")
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        always = safe_text(text)
        assert logtail.sanitize_line(text) == always, repr(text)
        assert always.isprintable(), repr(always)
