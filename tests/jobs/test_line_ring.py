"""The log's kept lines stored as columns behave as the deque of lines they replace: the newest
`maxlen` kept, in order, the newest dropped by pop (a provisional line continued), numbers and times
staying with their text across wrap-arounds."""

from __future__ import annotations

import random
from collections import deque

from gpuwatch_tui.jobs.line_ring import LineRing, LogLine
from gpuwatch_tui.jobs.logtail import LogBuffer


def test_the_ring_matches_a_deque_of_lines_through_appends_and_pops():
    rng = random.Random(7)
    for maxlen in (0, 1, 3, 50):
        ring, ref = LineRing(maxlen), deque(maxlen=maxlen)
        for seq in range(1, 400):
            if ref and rng.random() < 0.3:
                ring.pop()
                ref.pop()
            line = LogLine(seq, 1000.0 + seq / 7, f"line {seq}")
            ring.append(*line)
            if maxlen:
                ref.append(line)
            assert list(ring) == list(ref)
            assert ring.texts() == [x.text for x in ref] and len(ring) == len(ref)


def test_a_buffer_keeps_its_last_lines_with_their_numbers():
    buf = LogBuffer(max_lines=5)
    for i in range(12):
        buf.feed_bytes(f"step {i}\n".encode(), now=100.0 + i)
    assert buf.lines() == [f"step {i}" for i in range(7, 12)]
    assert [(r.seq, r.time) for r in buf.records()] == [(i + 1, 100.0 + i) for i in range(7, 12)]
    assert buf.lines(2) == ["step 10", "step 11"] and buf.lines(0) == []
