"""decode_frame (orjson, the standard library for what orjson refuses) reads every probe line as
json.loads does: real frames of the real probe, the values orjson refuses, arbitrary JSON documents."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from gpuwatch_tui.transport.probe_bundle import LoadedProbe
from gpuwatch_tui.probe.wire import PROTOCOL_VERSION
from gpuwatch_tui.transport.frame_decode import decode_frame


def same(a, b) -> bool:
    """Equal, counting NaN equal to NaN and a float only equal to a float (1.0 is not 1 here)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def probe_line(frame: dict) -> bytes:
    frame["v"] = PROTOCOL_VERSION
    return (json.dumps(frame, separators=(",", ":")) + "\n").encode()  # as the probe's emit writes it


def test_real_probe_frames_with_a_hostile_log_and_command_line(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1 loss 2.5\n\x1b[31mred\x1b[0m \xff\xfe not utf-8 \x00\n")
    # a command line that is not UTF-8: the probe escapes it as lone surrogates, which orjson refuses
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", b"\xff\xfeweird".decode("latin-1")],
                             stdin=subprocess.DEVNULL)
    loaded = LoadedProbe()
    try:
        probe = loaded.ns["Probe"]({"fact_deltas": True})
        probe.set_wants({"pids": [os.getpid(), child.pid], "tails": {"t": str(log)}, "dirs": {"d": str(tmp_path)},
                         "matches": {}})
        lines = [probe_line(probe.sample()) for _ in range(3)]
    finally:
        loaded.close()
        child.kill()
        child.wait()
    assert len(lines[0]) > 500
    for line in lines:
        fast, slow = decode_frame(line), json.loads(line)
        assert same(fast, slow)
        assert same(decode_frame(line.decode()), slow)
    assert any(p["pid"] == child.pid for p in decode_frame(lines[0])["procs"])


@pytest.mark.parametrize("line", [
    b'{"type":"sample","gpus":[{"index":0,"power_w":NaN,"temp_c":Infinity,"util_pct":-Infinity}]}\n',
    b'{"type":"sample","procs":[{"cmdline":["python","\\udcff\\udcfe"]}]}\n',
])
def test_what_orjson_refuses_or_reads_otherwise_reads_as_the_standard_library_does(line):
    assert same(decode_frame(line), json.loads(line))


def test_an_integer_beyond_64_bits_reads_as_the_nearest_float():
    # (the one difference: the probe writes none, its integers are pids, ticks and byte counts)
    assert decode_frame(b'{"n":123456789012345678901234567890}') == {"n": 1.2345678901234568e29}


@pytest.mark.parametrize("line", [b"", b"not json\n", b'{"a":', b"\xff\xfe"])
def test_a_line_that_is_not_json_is_a_value_error(line):
    with pytest.raises(ValueError):
        decode_frame(line)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_document_reads_the_same(value):
    line = json.dumps(value, separators=(",", ":"))
    assert same(decode_frame(line), json.loads(line))
    assert same(decode_frame(line.encode()), json.loads(line))
