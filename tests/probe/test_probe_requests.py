"""The probe's request side, on the real shipped bundle: dispatch, op errors, proc_tree on real processes."""

from __future__ import annotations

import json
import os
import pwd
import select
import subprocess
import sys
import threading
import time

import pytest

from gpuwatch_tui.transport.probe_bundle import LoadedProbe, build_payload, local_argv, probe_modules
from tests.core.proctree import ProcTree, start_ticks


class RunningProbe:
    """The probe exactly as a host runs it (bootstrap + payload on stdin), spoken to in JSON lines."""

    def __init__(self, interval: float = 0.2) -> None:
        self.proc = subprocess.Popen(local_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.proc.stdin.write(build_payload({"interval": interval, "gpu_source": "none"}))
        self.proc.stdin.flush()
        self.frames: list[tuple[float, dict]] = []
        self.hello = self.next_frame()

    def send(self, request: dict) -> None:
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def next_frame(self, timeout: float = 10.0) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no frame from the probe"
        line = self.proc.stdout.readline()
        assert line, f"probe exited with {self.proc.wait(2)}"
        frame = json.loads(line)
        self.frames.append((time.monotonic(), frame))
        return frame

    def replies(self, ids: set, timeout: float = 10.0) -> dict[int, dict]:
        """Read frames until every id in `ids` has its reply."""
        out: dict[int, dict] = {}
        deadline = time.monotonic() + timeout
        while not ids <= set(out):
            frame = self.next_frame(max(0.1, deadline - time.monotonic()))
            if frame.get("type") in ("reply", "pong") and frame.get("id") in ids:
                out[frame["id"]] = frame
        return out

    def ask(self, op: str, args=None, rid: int = 1) -> dict:
        request = {"op": op, "id": rid}
        if args is not None:
            request["args"] = args
        self.send(request)
        return self.replies({rid})[rid]

    def samples_since(self, since: float) -> list[float]:
        return [t for t, f in self.frames if f.get("type") == "sample" and t >= since]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def probe():
    p = RunningProbe()
    yield p
    p.close()


@pytest.fixture
def tree():
    t = ProcTree()
    yield t
    t.stop()


def test_hello_lists_the_ops_of_every_shipped_op_module(probe):
    # Every probe/ops_*.py is shipped, and each loads on this Python without error.
    names = set(probe_modules())
    assert {"dispatch", "ops_base", "ops_procs", "wire"} <= names
    folder = os.path.dirname(sys.modules["gpuwatch_tui.transport.probe_bundle"].__file__)
    assert {n[:-3] for n in os.listdir(folder) if n.startswith("ops_") and n.endswith(".py")} <= names
    assert "proc_tree" in probe.hello["ops"]
    assert probe.hello["op_errors"] == {}


def test_proc_tree_returns_the_process_and_all_descendants(probe, tree):
    parent, child, grandchild = tree.pids
    reply = probe.ask("proc_tree", {"pid": parent, "start_ticks": start_ticks(parent)})
    assert reply["ok"] is True, reply
    result = reply["result"]
    assert result["root"] == parent and result["truncated"] is False
    by_pid = {p["pid"]: p for p in result["processes"]}
    assert set(by_pid) == {parent, child, grandchild}
    assert result["processes"][0]["pid"] == parent  # parents come before their children
    assert by_pid[child]["ppid"] == parent and by_pid[grandchild]["ppid"] == child
    me = pwd.getpwuid(os.getuid()).pw_name
    for pid, ticks in zip(tree.pids, tree.ticks()):
        p = by_pid[pid]
        assert p["start_ticks"] == ticks
        assert p["name"].startswith("python") and p["cmdline"][0] == sys.executable
        assert p["state"] in ("S", "R")
        assert p["uid"] == os.getuid() and p["user"] == me
        assert p["rss_bytes"] > 1_000_000 and p["cpu_s"] >= 0 and p["threads"] >= 1
    # A subtree is just that: asking for the child leaves the parent out.
    sub = probe.ask("proc_tree", {"pid": child, "start_ticks": start_ticks(child)}, rid=2)["result"]
    assert {p["pid"] for p in sub["processes"]} == {child, grandchild}


def test_proc_tree_refuses_a_process_whose_start_time_does_not_match(probe, tree):
    parent = tree.pids[0]
    ticks = start_ticks(parent)
    # Alive, but not the process that started then: a reused pid is never acted on.
    reply = probe.ask("proc_tree", {"pid": parent, "start_ticks": ticks - 1})
    assert reply["ok"] is False and reply["error"]["code"] == "reused", reply
    assert str(parent) in reply["error"]["message"]


def test_proc_tree_of_an_exited_process_is_gone(probe):
    short = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(short.pid)
    short.wait()
    reply = probe.ask("proc_tree", {"pid": short.pid, "start_ticks": ticks})
    # gone; or reused if the pid has already been handed to a new process: refused either way
    assert reply["ok"] is False and reply["error"]["code"] in ("gone", "reused"), reply


def test_zombie_root_is_gone(probe):
    parent = subprocess.Popen([sys.executable, "-c",
                               "import os,time\npid=os.fork()\nif pid==0: os._exit(0)\n"
                               "print(pid,flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        zombie = int(parent.stdout.readline())
        time.sleep(0.2)
        reply = probe.ask("proc_tree", {"pid": zombie, "start_ticks": start_ticks(zombie)})
        assert reply["error"]["code"] == "gone" and "zombie" in reply["error"]["message"]
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize("request_, code", [
    ({"op": "no_such_op", "id": 7}, "unknown-op"),
    ({"op": "proc_tree", "id": 7, "args": {"pid": "1", "start_ticks": 0}}, "bad-args"),
    ({"op": "proc_tree", "id": 7, "args": {"pid": 1}}, "bad-args"),
    ({"op": "proc_tree", "id": 7, "args": {"pid": True, "start_ticks": 0}}, "bad-args"),
    ({"op": "proc_tree", "id": 7, "args": [1, 2]}, "bad-args"),
    ({"op": "interval", "id": 7, "args": {}}, "bad-args"),
])
def test_bad_requests_get_error_replies_and_sampling_goes_on(probe, request_, code):
    probe.send(request_)
    reply = probe.replies({7})[7]
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["message"]
    since = time.monotonic()
    while len(probe.samples_since(since)) < 3:
        probe.next_frame(3)
    assert probe.proc.poll() is None


def test_garbage_lines_and_requests_without_id_do_not_kill_the_probe(probe):
    probe.proc.stdin.write(b"this is not json\n[1,2]\n")
    probe.send({"op": "proc_tree", "args": {"pid": 1, "start_ticks": 0}})
    errors = []
    while len(errors) < 3:
        frame = probe.next_frame(3)
        if frame.get("type") == "error":
            errors.append(frame["error"])
    assert "bad request" in errors[0] and "no integer id" in errors[2]
    assert probe.ask("ping", rid=9)["type"] == "pong"


def test_many_requests_at_once_are_answered_each_under_its_own_id(probe):
    trees = [ProcTree(depth=0) for _ in range(4)]
    try:
        asked = {}
        for rid in range(1, 51):  # within the in-flight cap (64)
            pid = trees[rid % 4].pids[0]
            asked[rid] = pid
            probe.send({"op": "proc_tree", "id": rid, "args": {"pid": pid, "start_ticks": start_ticks(pid)}})
        since = time.monotonic()
        replies = probe.replies(set(asked))
        for rid, pid in asked.items():
            assert replies[rid]["ok"] is True, replies[rid]
            assert replies[rid]["result"]["root"] == pid
        # and the sampler kept its pace meanwhile (0.2 s interval)
        while len(probe.samples_since(since)) < 5:
            probe.next_frame(3)
        times = probe.samples_since(since)
        assert max(b - a for a, b in zip(times, times[1:])) < 1.0
    finally:
        for t in trees:
            t.stop()


# -- the dispatcher in this process, with handlers written here (a slow one, a failing one) --

@pytest.fixture
def dispatch_module():
    """probe/dispatch.py loaded as the probe loads it: by plain name through the bundle's finder."""
    probe = LoadedProbe()
    yield probe.module("dispatch"), probe
    probe.close()


class Collector:
    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.cond = threading.Condition()

    def emit(self, frame: dict) -> None:
        json.dumps(frame)  # as the real emit: a frame that cannot be sent raises here
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()

    def wait_for(self, pred, timeout: float = 5.0) -> dict:
        with self.cond:
            assert self.cond.wait_for(lambda: next((f for f in self.frames if pred(f)), None), timeout)
            return next(f for f in self.frames if pred(f))


def test_a_slow_op_does_not_hold_up_other_requests(dispatch_module):
    dispatch, _ = dispatch_module
    release = threading.Event()
    out = Collector()

    def slow(args):
        release.wait(10)
        return {"slow": True}

    def broken(args):
        raise RuntimeError("disk on fire")

    def unsendable(args):
        return {"x": object()}

    d = dispatch.Dispatcher(None, out.emit, {"slow": slow, "broken": broken, "unsendable": unsendable})
    d.handle({"op": "slow", "id": 1, "args": {}})
    d.handle({"op": "broken", "id": 2, "args": {}})
    d.handle({"op": "unsendable", "id": 3, "args": {}})
    d.handle({"op": "ping", "id": 4})
    assert out.wait_for(lambda f: f.get("id") == 4)["type"] == "pong"
    err = out.wait_for(lambda f: f.get("id") == 2)["error"]
    assert err["code"] == "internal" and "disk on fire" in err["message"]
    assert out.wait_for(lambda f: f.get("id") == 3)["error"]["code"] == "internal"
    assert not any(f.get("id") == 1 for f in out.frames)
    release.set()
    assert out.wait_for(lambda f: f.get("id") == 1)["result"] == {"slow": True}


def test_too_many_requests_in_flight_are_refused_not_queued(dispatch_module):
    dispatch, _ = dispatch_module
    release = threading.Event()
    out = Collector()
    d = dispatch.Dispatcher(None, out.emit, {"slow": lambda args: release.wait(10) and {}})
    for rid in range(dispatch.MAX_IN_FLIGHT + 1):
        d.handle({"op": "slow", "id": rid, "args": {}})
    busy = out.wait_for(lambda f: f.get("id") == dispatch.MAX_IN_FLIGHT)
    assert busy["error"]["code"] == "busy"
    release.set()
    out.wait_for(lambda f: f.get("id") == 0 and f.get("ok"))


def test_a_broken_op_module_costs_only_its_own_ops(dispatch_module):
    dispatch, probe = dispatch_module

    def importer(name):
        if name == "ops_broken":
            raise SyntaxError("invalid syntax (ops_broken.py, line 3)")
        return probe.module(name)

    ops, errors = dispatch.load_ops(importer, ["ops_procs", "ops_broken"])
    assert "proc_tree" in ops
    assert "ops_broken" in errors and "SyntaxError" in errors["ops_broken"]
    out = Collector()
    dispatch.Dispatcher(None, out.emit, ops, errors).handle({"op": "frobnicate", "id": 1})
    message = out.wait_for(lambda f: f.get("id") == 1)["error"]["message"]
    assert "proc_tree" in message and "ops_broken" in message
