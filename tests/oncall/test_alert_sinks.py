"""Alert sinks with real parts: a stdlib HTTP server receiving webhooks, a real hook process, and
the terminal escape sequences checked byte for byte."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuwatch_tui.alerts import AlertDispatcher, AlertEvent
from gpuwatch_tui.alerts.settings import HookSettings, WebhookSettings
from gpuwatch_tui.alerts.sinks import HookSink, TerminalSink, WebhookSink
from gpuwatch_tui.alerts.terminal import desktop_notification, detect_terminal


class Receiver:
    """An HTTP server on 127.0.0.1 answering each POST with the next scripted status."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.bodies: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.bodies.append(json.loads(data))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(statuses=()):
        r = Receiver(statuses)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def event(subject="h1/train", sinks=("webhook",), title="train on h1 crashed (exit 1)") -> AlertEvent:
    return AlertEvent(trigger="crashed", subject=subject, host="h1", job="train", job_id=subject,
                      title=title, message="crashed for 3s", evidence=("exit status 1",), sinks=sinks)


async def test_webhook_retries_a_500_then_delivers_slack_json(receiver):
    r = receiver([500])
    sink = WebhookSink(WebhookSettings(url=r.url, retries=3), backoff_s=0.05)
    dispatcher = AlertDispatcher([sink])
    dispatcher.dispatch(event())
    await dispatcher.drain(10)
    assert len(r.bodies) == 2 and sink.attempts == 2  # the 500, then the retry
    body = r.bodies[-1]
    assert body["text"].startswith("*train on h1 crashed (exit 1)*") and "exit status 1" in body["text"]
    assert body["gpuwatch"]["trigger"] == "crashed" and body["gpuwatch"]["host"] == "h1"
    assert [d.ok for d in dispatcher.deliveries] == [True]


async def test_webhook_gives_up_after_retries_and_4xx_is_not_retried(receiver):
    r = receiver([503, 503, 503])
    dispatcher = AlertDispatcher([WebhookSink(WebhookSettings(url=r.url, retries=2), backoff_s=0.01)])
    dispatcher.dispatch(event())
    await dispatcher.drain(10)
    assert len(r.bodies) == 3
    assert not dispatcher.deliveries[-1].ok and "HTTP 503" in dispatcher.deliveries[-1].error
    r2 = receiver([404])
    dispatcher = AlertDispatcher([WebhookSink(WebhookSettings(url=r2.url, retries=3), backoff_s=0.01)])
    dispatcher.dispatch(event())
    await dispatcher.drain(10)
    assert len(r2.bodies) == 1 and "HTTP 404" in dispatcher.deliveries[-1].error


async def test_webhook_rate_limit_drops_the_excess(receiver):
    r = receiver()
    dispatcher = AlertDispatcher([WebhookSink(WebhookSettings(url=r.url, per_minute=2))])
    for i in range(5):
        dispatcher.dispatch(event(subject=f"h1/job{i}"))
    await dispatcher.drain(10)
    assert len(r.bodies) == 2
    assert sum(1 for d in dispatcher.deliveries if d.error == "rate limited") == 3


async def test_dead_webhook_never_blocks_the_caller():
    # a port that accepts nothing: the sends fail in their tasks while dispatch returns at once
    dispatcher = AlertDispatcher([WebhookSink(WebhookSettings(url="http://127.0.0.1:9/x", retries=1,
                                                              timeout_s=0.5), backoff_s=0.01)])
    started = time.perf_counter()
    dispatcher.dispatch(event())
    assert time.perf_counter() - started < 0.05
    await dispatcher.drain(10)
    assert not dispatcher.deliveries[-1].ok and "ConnectError" in dispatcher.deliveries[-1].error


async def test_hook_gets_the_event_json_on_stdin(tmp_path):
    out = tmp_path / "got.json"
    # argv, no shell: the hostile title below reaches the hook as JSON data, never as shell words
    script = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read())"
    sink = HookSink(HookSettings(command=(sys.executable, "-c", script, str(out))))
    dispatcher = AlertDispatcher([sink])
    canary = tmp_path / "canary"
    dispatcher.dispatch(event(sinks=("hook",), title=f"x'; touch {canary}; $(touch {canary}) `touch {canary}`"))
    await dispatcher.drain(10)
    got = json.loads(out.read_text())
    assert got["type"] == "alert" and got["trigger"] == "crashed" and got["job"] == "train"
    assert f"touch {canary}" in got["title"] and not canary.exists()
    assert dispatcher.deliveries[-1].ok


async def test_slow_hook_is_killed_and_failing_hook_reported(tmp_path):
    slow = HookSink(HookSettings(command=(sys.executable, "-c", "import time; time.sleep(30)"), timeout_s=0.5))
    dispatcher = AlertDispatcher([slow])
    dispatcher.dispatch(event(sinks=("hook",)))
    await dispatcher.drain(10)
    assert "killed" in dispatcher.deliveries[-1].error
    failing = HookSink(HookSettings(command=(sys.executable, "-c", "import sys; sys.exit('no pager')")))
    dispatcher = AlertDispatcher([failing])
    dispatcher.dispatch(event(sinks=("hook",)))
    await dispatcher.drain(10)
    assert "exited 1" in dispatcher.deliveries[-1].error and "no pager" in dispatcher.deliveries[-1].error
    missing = HookSink(HookSettings(command=(str(tmp_path / "nope"),)))
    dispatcher = AlertDispatcher([missing])
    dispatcher.dispatch(event(sinks=("hook",)))
    await dispatcher.drain(10)
    assert "could not start" in dispatcher.deliveries[-1].error


HOSTILE = "job\x1b]0;pwned\x07 \x9c\x1b[2Jdone;ok\n"


def test_osc_sequences_as_bytes():
    env = {"TERM": "xterm-256color"}
    assert desktop_notification("T", "B", "osc777", env) == b"\x1b]777;notify;T;B\x1b\\"
    assert desktop_notification("T", "B", "osc9", env) == b"\x1b]9;T: B\x1b\\"
    assert desktop_notification("T", "B", "osc99", env) == (
        b"\x1b]99;i=gpuwatch:d=0:p=title;T\x1b\\" b"\x1b]99;i=gpuwatch:d=1:p=body;B\x1b\\")
    assert desktop_notification("T", "B", "auto", env) == b"\x07"  # an unknown terminal: the bell
    # inside tmux: DCS passthrough with every ESC doubled
    tmux = {"TERM": "screen", "TMUX": "/tmp/tmux-1/default,1,0"}
    assert desktop_notification("T", "B", "osc777", tmux) == b"\x1bPtmux;\x1b\x1b]777;notify;T;B\x1b\x1b\\\x1b\\"
    assert desktop_notification("T", "B", "auto", tmux) == b"\x07"


def test_hostile_text_cannot_break_out_of_the_sequence():
    for kind in ("osc777", "osc9", "osc99"):
        data = desktop_notification(HOSTILE, HOSTILE, kind, {})
        # the only ESCs are the sequence's own: introducer(s) and terminator(s)
        per_seq = 2 if kind == "osc99" else 1
        assert data.count(b"\x1b") == 2 * per_seq, data
        assert b"\x07" not in data and b"\xc2\x9c" not in data and b"\n" not in data
    title_field = desktop_notification("a;b", "c", "osc777", {}).split(b";")
    assert title_field[2:] == [b"a,b", b"c\x1b\\"]


@pytest.mark.parametrize("env,kind", [
    ({"TERM": "xterm-kitty"}, "osc99"), ({"TERM_PROGRAM": "iTerm.app"}, "osc9"),
    ({"TERM": "foot"}, "osc777"), ({"TERM": "xterm-256color", "VTE_VERSION": "7200"}, "osc777"),
    ({"TERM": "xterm"}, "bell"),
])
def test_terminal_detection(env, kind):
    assert detect_terminal(env) == kind


async def test_terminal_sinks_write_bytes():
    written: list[bytes] = []
    bell = TerminalSink("bell", written.append)
    desk = TerminalSink("desktop", written.append, "osc777", env={})
    dispatcher = AlertDispatcher([bell, desk])
    dispatcher.dispatch(event(sinks=("bell", "desktop"), title=HOSTILE))
    await dispatcher.drain(2)
    assert written[0] == b"\x07"
    assert written[1].startswith("\x1b]777;notify;job␛]0,pwned".encode()) and written[1].count(b"\x1b") == 2
