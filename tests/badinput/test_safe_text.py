"""The one sanitiser, over generated hostile strings, and the boundaries that use it outside the dashboard:
the headless verbs' stdout/stderr, log lines, terminal notifications and Slack-style webhooks."""

from __future__ import annotations

import io
import json

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuwatch_tui.alerts.events import AlertEvent  # noqa: E402
from gpuwatch_tui.alerts.terminal import plain_text  # noqa: E402
from gpuwatch_tui.jobs.logtail import sanitize_line  # noqa: E402
from gpuwatch_tui.safe_text import MAX_MARKS, safe_lines, safe_text, slack_escape  # noqa: E402
from gpuwatch_tui.terminal_guard import SafeStream  # noqa: E402

from .hostile_strings import PAYLOADS, assert_clean, hostile_text, raw_bytes_found  # noqa: E402


def test_controls_are_shown_not_obeyed():
    assert safe_text("t\x1b]2;PWNED\x07.py") == "t␛]2;PWNED␇.py"
    assert safe_text("a\x9b2Jb") == "a\\x9b2Jb"
    assert safe_text("rtl \u202eevil") == "rtl <U+202E>evil"
    assert safe_text("zw\u200bsp") == "zw<U+200B>sp"
    assert safe_text("del\x7f nul\x00 nl\n") == "del␡ nul␀ nl␊"
    assert safe_text(b"bad\xffbyte") == "bad\\xffbyte"
    assert safe_text("bad\udcffbyte") == "bad\\xffbyte"  # a non-UTF-8 argv byte as the probe sends it
    assert safe_text("plain ascii / path_1.py --lr=3e-4") == "plain ascii / path_1.py --lr=3e-4"
    assert safe_text("é漢😀 café") == "é漢😀 café"
    assert safe_text("a\u00a0b") == "a b"


def test_combining_runs_are_bounded_and_counted():
    assert safe_text("z" + "\u0301" * 300) == "z" + "\u0301" * MAX_MARKS + f"<+{300 - MAX_MARKS} marks>"
    assert safe_text("e\u0301\u0302 ok") == "e\u0301\u0302 ok"  # a few marks stay as written


@settings(max_examples=400, deadline=None)
@given(hostile_text)
def test_safe_text_output_is_clean_printable_and_encodes_strictly(text):
    out = safe_text(text)
    assert_clean(out)
    assert out.isprintable()
    out.encode("utf-8")  # strict: no lone surrogate survives
    assert_clean(sanitize_line(text))
    assert_clean(plain_text(text))


@settings(max_examples=200, deadline=None)
@given(hostile_text, hostile_text)
def test_the_verbs_stream_passes_nothing_raw(a, b):
    buf = io.BytesIO()
    stream = SafeStream(io.TextIOWrapper(buf, encoding="utf-8", errors="strict", write_through=True))
    print(f"HOST  {a}\n  plan: {b}", file=stream)
    print(json.dumps({"name": a}), file=stream)
    stream.flush()
    data = buf.getvalue()
    assert not raw_bytes_found(data), data
    assert json.loads(data.decode().splitlines()[-1])["name"] == a  # JSON (ASCII) passes unchanged


@settings(max_examples=200, deadline=None)
@given(hostile_text, hostile_text)
def test_slack_text_has_no_mention_link_or_control(name, message):
    event = AlertEvent("stalled", "j1", "gpu1", f"{name} on gpu1 stalled", message, evidence=(name,))
    text = event.slack_body()["text"]
    assert_clean(text.replace("\n", " "))
    assert "<" not in text and ">" not in text
    assert "&" not in text.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")


def test_slack_mentions_and_links_are_text():
    assert slack_escape("<!channel> <http://x|fix> & co") == "&lt;!channel&gt; &lt;http://x|fix&gt; &amp; co"
    event = AlertEvent("stalled", "j1", "gpu1", "<!channel> stalled", "see <http://evil|fix>")
    assert "&lt;!channel&gt;" in event.slack_body()["text"]


def test_every_payload_is_visible_in_a_block():
    block = safe_lines("\n".join(PAYLOADS))
    assert block.count("\n") == len(PAYLOADS) - 1
    assert_clean(block)


@settings(max_examples=150, deadline=None)
@given(st.lists(hostile_text, min_size=12, max_size=12))
def test_the_status_table_over_hostile_fields_is_clean_and_aligned(words):
    from gpuwatch_tui.status_table import render_status

    w = iter(words)
    snapshot = {"time": 1000.0, "hosts": [{
        "name": "h1", "state": "probe-failed", "last_sample_age_s": 1.0, "gpu_source": next(w), "error": next(w),
        "gpu_error": None, "hint": next(w),
        "gpus": [{"index": 0, "name": next(w), "util_pct": 1.0, "mem_used_mib": 1, "mem_total_mib": 2, "temp_c": 3,
                  "power_w": 4, "power_limit_w": 5, "sm_clock_mhz": 6, "processes": [{"pid": 7}]}]}],
        "jobs": [{"host": "h1", "name": next(w), "pids": [7], "phase": "stalled", "detail": next(w), "since": 900.0,
                  "progress": None, "evidence": [next(w), next(w)], "advice": next(w), "actions": []}]}
    buf = io.BytesIO()
    stream = SafeStream(io.TextIOWrapper(buf, encoding="utf-8", errors="strict", write_through=True))
    text = render_status(snapshot)
    print(text, file=stream)
    assert not raw_bytes_found(buf.getvalue())
    for line in text.splitlines():
        assert_clean(line)
    header = next(line for line in text.splitlines() if line.startswith("HOST") and "UTIL" in line)
    row = text.splitlines()[text.splitlines().index(header) + 1]
    assert row.index("1%") == header.index("UTIL"), (header, row)  # columns line up after escaping
