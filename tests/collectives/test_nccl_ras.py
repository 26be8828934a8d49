"""NCCL RAS: the reports captured on a real GPU (NCCL 2.28.9, tests/data/nccl_capture) read per rank, and the
probe's nccl_ras op asking a RAS service on loopback that answers as NCCL did there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwatch_tui.actions import collective_evidence, nccl_ras
from tests.actions.pyspy_helpers import OpHost, OpRefused, start_ticks
from tests.collectives.ras_replay import RasReplay, captured


def test_mismatch_names_the_rank_behind():
    text = nccl_ras.parse_text(captured("ras_two_hung_verbose.txt"))
    assert [(r.rank, r.verdict) for r in text.ranks] == [(0, "ok"), (1, "behind")]
    assert text.of(1).evidence == "launched up to operation 6, the most 7" and text.of(1).pid == 616
    js = nccl_ras.parse_json(captured("ras_two_hung_json.txt"))
    assert [(r.rank, r.verdict) for r in js.ranks] == [(0, "ok"), (1, "behind")]
    assert js.of(1).evidence == "AllReduce count 6, the most 7" and js.nccl_version == "2.28.9"


def test_stopped_rank_is_not_answering_and_killed_rank_leaves_an_error_on_the_other():
    stopped = nccl_ras.parse_text(captured("ras_two_stopped_verbose_a.txt"))
    assert [(r.rank, r.verdict) for r in stopped.flagged] == [(1, "not answering")]
    killed = nccl_ras.parse_text(captured("ras_two_killed_verbose_a.txt"))
    assert [(r.rank, r.verdict) for r in killed.flagged] == [(0, "error"), (1, "not answering")]
    assert killed.of(0).evidence == "reported Remote process error"
    assert "rank 1 not answering" in killed.summary


def test_healthy_one_rank_report_flags_nobody():
    ok = nccl_ras.parse_text(captured("ras_one_verbose.txt"))
    assert ok.flagged == () and "every rank answers" in ok.summary
    assert nccl_ras.parse_json(captured("ras_one_json.txt")).flagged == ()


def test_missing_ranks_in_json_are_not_answering_or_dead():
    import json
    data = json.loads(captured("ras_two_hung_json.txt"))
    comm = data["communicators"][0]
    comm["missing_ranks"] = [dict(comm["ranks"].pop(1), status={"unresponsive": True, "considered_dead": True})]
    dead = nccl_ras.parse_json(json.dumps(data))
    assert [(r.rank, r.verdict) for r in dead.flagged] == [(1, "dead")]


@pytest.fixture
def target():
    """A real process of the "job", whose environment names where its RAS service listens."""
    made = []

    def start(port: int) -> subprocess.Popen:
        env = dict(os.environ, NCCL_RAS_ADDR=f"127.0.0.1:{port}")
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
        made.append(p)
        return p

    yield start
    for p in made:
        p.kill()
        p.wait()


async def ask(proc, timeout_s: float = 10.0) -> dict:
    async with OpHost() as host:
        return await host.request("nccl_ras", {"targets": [{"pid": proc.pid, "start_ticks": start_ticks(proc.pid)}],
                                               "timeout_s": timeout_s}, timeout_s + 15)


async def test_probe_op_reads_json_where_the_service_speaks_it(target):
    server = RasReplay(captured("ras_two_hung_verbose.txt"), captured("ras_two_hung_json.txt"))
    try:
        reply = await ask(target(server.port))
    finally:
        server.close()
    assert reply["format"] == "json" and reply["addr"] == f"127.0.0.1:{server.port}"
    assert server.asked == ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"]
    assert nccl_ras.parse_reply(reply).of(1).verdict == "behind"


async def test_probe_op_falls_back_to_text_on_an_older_service(target):
    server = RasReplay(captured("ras_two_stopped_verbose_a.txt"))
    try:
        reply = await ask(target(server.port))
    finally:
        server.close()
    assert reply["format"] == "text"
    assert server.asked[-1] == "VERBOSE STATUS" and server.asked.count("CLIENT PROTOCOL 2") == 2
    assert nccl_ras.parse_reply(reply).of(1).verdict == "not answering"


async def test_a_service_that_accepts_and_never_answers_is_reported_not_waited_on(target):
    server = RasReplay("", silent=True)
    try:
        with pytest.raises(OpRefused) as err:
            await ask(target(server.port), timeout_s=2.0)
    finally:
        server.close()
    assert err.value.code == "no-answer" and "stopped or wedged" in err.value.message


async def test_no_service_and_non_loopback_address(target):
    server = RasReplay("")
    port = server.port
    server.close()  # nobody listens there now
    with pytest.raises(OpRefused) as err:
        await ask(target(port))
    assert err.value.code == "no-service"
    # gather() turns a missing service into silence, a silent one into a note, and never raises
    async with OpHost() as host:
        proc = target(port)
        found = await collective_evidence.gather(host.request, [type("T", (), {"pid": proc.pid, "start_ticks": start_ticks(proc.pid)})()], "node-a")
    assert found.ras is None and not any("RAS" in n for n in found.notes)
