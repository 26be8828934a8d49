"""A growing log is read with one pread() a poll and no stat, and still every byte, truncation, rotation and
deletion reach the client: real files, the probe's own Tail."""

from __future__ import annotations

import base64
import os

import pytest


class CountingOs:
    """The probe's `os` with its file calls counted (the Tail reads through the module's global)."""

    def __init__(self):
        self.calls = {"stat": 0, "fstat": 0, "pread": 0}

    def __getattr__(self, name):
        real = getattr(os, name)
        if name in self.calls:
            def counted(*args, **kwargs):
                self.calls[name] += 1
                return real(*args, **kwargs)
            return counted
        return real


@pytest.fixture
def tail_ns(probe_mod):
    """The probe's tails module with its `os` counting calls, and the counter."""
    tails = probe_mod("tails")
    counting = CountingOs()
    tails.os = counting
    return vars(tails), counting


def data(chunk) -> bytes:
    return base64.b64decode(chunk.get("data", ""))


def append(path, text: bytes) -> None:
    with open(path, "ab") as f:
        f.write(text)


def line_rule(stream: bytes, cap: int) -> tuple[bytes, int]:
    """What the client gets of `stream` by the long-line rule, a byte at a time: each line (or carriage-return
    frame) keeps its first `cap` bytes; and how many bytes were dropped."""
    kept, dropped, line = bytearray(), 0, 0
    for byte in stream:
        if byte in b"\r\n":
            kept.append(byte)
            line = 0
        elif line < cap:
            kept.append(byte)
            line += 1
        else:
            dropped += 1
    return bytes(kept), dropped


def growing_tail(ns, log, now):
    """A Tail on `log` that read its backlog and then new bytes (two polls that grew, the path stat'ed
    at `now` + 1): pread-only from the next poll. Returns it and the mtime its last stat gave."""
    tail = ns["Tail"]("k", str(log), 1 << 20)
    assert log.stat().st_size > 0 and data(tail.poll(now)) == log.read_bytes()
    append(log, b"warm\n")
    chunk = tail.poll(now + 1)
    assert data(chunk) == b"warm\n" and chunk["mtime"] == os.stat(log).st_mtime
    return tail, chunk["mtime"]


def test_a_growing_log_costs_one_pread_a_poll_and_every_byte_and_size_arrive(tail_ns, tmp_path):
    ns, counting = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"backlog\n")
    tail, stat_mtime = growing_tail(ns, log, 1000.0)
    got = b""
    for i in range(3):
        before = dict(counting.calls)
        append(log, b"step %d\n" % i)
        chunk = tail.poll(1003.0 + i)  # within TAIL_CHECK_S of the last stat (at 1001)
        assert counting.calls["pread"] - before["pread"] == 1
        assert counting.calls["stat"] == before["stat"] and counting.calls["fstat"] == before["fstat"]
        got += data(chunk)
        assert chunk["size"] == os.stat(log).st_size  # where the read ended: the file's end
        assert chunk["mtime"] == stat_mtime and chunk["error"] is None and not chunk["reset"]
    assert got == b"step 0\nstep 1\nstep 2\n"
    # Nothing came: the path is stat'ed at once, and the true mtime reported.
    before = counting.calls["stat"]
    chunk = tail.poll(1006.5)
    assert counting.calls["stat"] == before + 1 and data(chunk) == b""
    assert chunk["mtime"] == os.stat(log).st_mtime and chunk["size"] == os.stat(log).st_size
    tail.close()


def test_a_log_that_keeps_growing_is_stated_every_few_seconds(tail_ns, tmp_path):
    ns, counting = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    tail, _ = growing_tail(ns, log, 1000.0)
    stats = counting.calls["stat"]
    check = ns["TAIL_CHECK_S"]
    t = 1002.0
    while t < 1001.0 + check:
        append(log, b"x\n")
        tail.poll(t)
        t += 1.0
    assert counting.calls["stat"] == stats  # last stat at 1001
    append(log, b"y\n")
    assert data(tail.poll(1001.0 + check)) == b"y\n"
    assert counting.calls["stat"] == stats + 1
    tail.close()


def test_truncation_while_growing_is_a_reset_at_the_next_poll(tail_ns, tmp_path):
    ns, _ = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"a fairly long first line of the log\n")
    tail, _ = growing_tail(ns, log, 1000.0)
    log.write_bytes(b"new\n")  # truncated (shorter than what was read) and written again
    chunk = tail.poll(1003.0)
    assert chunk["reset"] and data(chunk) == b"new\n" and chunk["size"] == 4
    tail.close()


def test_a_log_renamed_while_written_gives_all_its_bytes_then_the_new_file(tail_ns, tmp_path):
    ns, _ = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    tail, _ = growing_tail(ns, log, 1000.0)
    writer = open(log, "ab", buffering=0)
    os.rename(log, tmp_path / "train.log.1")
    log.write_bytes(b"fresh file\n")
    got = b""
    t = 1003.0
    for i in range(3):  # the writer keeps its descriptor: the renamed file grows, its bytes are the run's
        writer.write(b"old %d\n" % i)
        chunk = tail.poll(t)
        assert not chunk["reset"]
        got += data(chunk)
        t += 1.0
    writer.write(b"old last\n")
    chunk = tail.poll(1001.0 + ns["TAIL_CHECK_S"])  # the path is stat'ed: another file
    assert chunk["reset"]
    got += data(chunk)
    assert got == b"old 0\nold 1\nold 2\nold last\nfresh file\n"  # as before: the new file from its start
    writer.close()
    tail.close()


def test_a_log_deleted_while_written_shows_the_error_within_the_check_interval(tail_ns, tmp_path):
    ns, _ = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    tail, _ = growing_tail(ns, log, 1000.0)
    writer = open(log, "ab", buffering=0)
    os.unlink(log)
    writer.write(b"after delete\n")
    chunk = tail.poll(1003.0)
    assert data(chunk) == b"after delete\n" and chunk["error"] is None
    writer.write(b"last\n")
    chunk = tail.poll(1001.0 + ns["TAIL_CHECK_S"])
    assert chunk["error"] and data(chunk) == b"last\n"  # the old file drained
    writer.close()
    tail.close()


def test_more_than_a_frame_carries_reports_the_size_and_polls_in_full_next(tail_ns, tmp_path):
    ns, counting = tail_ns
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    tail, _ = growing_tail(ns, log, 1000.0)
    cap = ns["TAIL_CAP_BYTES"]
    append(log, (b"z" * 1000 + b"\n") * (2 * cap // 1000))
    size = os.stat(log).st_size
    chunk = tail.poll(1003.0)
    assert chunk["size"] == size and len(data(chunk)) < size
    stats = counting.calls["stat"]
    rest = tail.poll(1004.0)
    assert counting.calls["stat"] == stats + 1  # the full way: the skip rule sees what waits
    assert len(data(chunk)) + len(data(rest)) <= size
    tail.close()


def test_long_lines_are_cut_the_same_whatever_blocks_they_come_in(probe_ns, tmp_path, probe_mod):
    """Lines (and carriage-return frames) over the cap keep their first cap bytes, the rest counted in
    cuts, whether a block holds whole short lines (copied as they are) or pieces of long ones."""
    import random

    rng = random.Random(7)
    cap = 50
    stream = b"".join(rng.choice([b"\n", b"\r", b"x" * rng.randint(0, 140), b"y" * rng.randint(0, 30)])
                      for _ in range(400))
    tail = probe_mod("tails").Tail("k", str(tmp_path / "none"), 0)
    tail.LINE_CAP_BYTES = cap
    out, cuts, i = bytearray(), [], 0
    while i < len(stream):
        n = rng.randint(1, 90)
        tail._keep(stream[i:i + n], out, cuts)
        i += n
    kept, dropped = line_rule(stream, cap)
    assert bytes(out) == kept
    assert sum(n for _, n in cuts) + tail.dropping == dropped


def test_a_growing_log_read_poll_by_poll_keeps_the_line_rule(tail_ns, tmp_path):
    """Appends of short lines, carriage-return frames and lines over the cap, read poll by poll: a poll of a
    growing log takes a short block of short lines as it is (inline) and anything else the general way; the
    bytes that reach the client are the rule's, a byte at a time, whichever way each poll went."""
    import random

    ns, counting = tail_ns
    rng = random.Random(11)
    cap = 50
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n")
    tail = ns["Tail"]("k", str(log), 1 << 20)
    tail.LINE_CAP_BYTES = cap
    now = 1000.0
    got, cut = bytearray(data(tail.poll(now))), 0
    for _ in range(300):
        append(log, b"".join(rng.choice([b"\n", b"\r", b"x" * rng.randint(0, 140), b"y" * rng.randint(0, 30)])
                             for _ in range(rng.randint(0, 3))))
        now += 0.01
        chunk = tail.poll(now)
        got += data(chunk)
        cut += sum(n for _, n in chunk["cut"])
    kept, dropped = line_rule(log.read_bytes(), cap)
    assert bytes(got) == kept
    assert cut + tail.dropping == dropped
    assert counting.calls["pread"] > counting.calls["stat"]  # most polls were a growing log's single read
    tail.close()


def test_a_growing_logs_bare_chunk_is_what_the_deltas_leave_of_its_full_chunk(probe_mod, tmp_path):
    """A growing log whose facts the client has is built bare (key, data, size) rather than in full and then
    stripped: two Tails on one log, one polled with FrameDeltas.known_tail and one in full, write the same
    wire through both deltas, across stats (TAIL_CHECK_S), fact resends (FACT_RESEND_S) and a rotation."""
    import json

    ns = {**vars(probe_mod("tails")), **vars(probe_mod("frame_deltas"))}
    log = tmp_path / "train.log"
    log.write_bytes(b"backlog\n")
    bare, full = ns["Tail"]("job", str(log), 1 << 20), ns["Tail"]("job", str(log), 1 << 20)
    bare_deltas, full_deltas = ns["FrameDeltas"](), ns["FrameDeltas"]()
    built_bare = resent = 0
    for t in range(75):  # past two resends and five stats of the path
        now = 1000.0 + t
        if t == 40:
            os.replace(log, tmp_path / "train.log.1")  # rotated: the writer goes on in a new file
        append(log, b"step %d\n" % t)
        bare_deltas.begin(now)
        full_deltas.begin(now)
        frames = []
        for tail, deltas, known in ((bare, bare_deltas, bare_deltas.known_tail), (full, full_deltas, None)):
            frame = {"procs": [], "gpus": [], "tails": [tail.poll(now, known)]}
            deltas.apply(frame, now, procs_done=True)
            frames.append(json.dumps(frame))
        assert frames[0] == frames[1], t
        built_bare += "job" in bare_deltas.known_tails
        resent += "path" in json.loads(frames[0])["tails"][0]
        assert json.loads(frames[0])["tails"][0]["size"] == os.stat(log).st_size
    assert built_bare >= 60  # the usual case: neither a stat nor a resend was due
    assert resent >= 3  # the first frame, the rotation and the resends carry the path
