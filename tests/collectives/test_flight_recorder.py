"""The flight recorder: the dumps captured from a real NCCL job on a GPU (tests/data/nccl_capture) read the way
the probe reads them and analysed; and a live 2-rank gloo job's recorder dumped through the probe's fr_dump op."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.actions import collective_evidence, flight_recorder
from tests.actions.pyspy_helpers import PROBE_DIR, OpHost, start_ticks
from tests.collectives.ras_replay import CAPTURE
from tests.support.net import free_port

sys.path.insert(0, str(PROBE_DIR))
import ops_flightrec  # noqa: E402  - the probe module, as shipped (stdlib only)

SCRIPT = Path(__file__).resolve().parent / "scripts" / "gloo_fr_hang.py"


def record(name: str, rank: int) -> flight_recorder.RankRecord:
    raw = (CAPTURE / name).read_bytes()
    compact = ops_flightrec.compact_dump(ops_flightrec.load_dump(raw))
    reply = {"ranks": [dict(compact, ok=True, rank=rank, pid=600 + rank)]}
    return flight_recorder.records_from_reply("gpu-node", reply)[0]


def test_real_nccl_dumps_name_the_collective_and_the_missing_rank():
    analysis = flight_recorder.analyse([record("frdump_two_rank0.pkl", 0), record("frdump_two_rank1.pkl", 1)])
    stuck = analysis.stuck[0]
    assert (stuck.seq, stuck.op, stuck.entered, stuck.missing) == (8, "nccl:all_reduce", (0,), (1,))
    assert stuck.where == "<module> (rank.py:42)"
    assert analysis.suspects == (1,)
    assert analysis.last_entered == {0: "#8 nccl:all_reduce (group 0, scheduled)",
                                     1: "#7 nccl:all_reduce_barrier (group 0, completed)"}
    assert analysis.mismatches == ()
    assert "missing rank 1" in analysis.summary


def test_one_rank_waiting_on_its_own_stream_is_incomplete_with_nobody_missing():
    analysis = flight_recorder.analyse([record("frdump_sleep_rank0.pkl", 0)])
    assert [(s.seq, s.missing) for s in analysis.stuck] == [(8, ())]
    assert "every rank entered it" in analysis.summary


def test_sequence_mismatch_is_reported():
    r0, r1 = record("frdump_two_rank0.pkl", 0), record("frdump_two_rank1.pkl", 1)
    entries = tuple(dict(e, op="nccl:broadcast") if e["seq"] == 5 else e for e in r1.entries)
    analysis = flight_recorder.analyse([r0, flight_recorder.RankRecord(**{**r1.__dict__, "entries": entries})])
    assert analysis.mismatches and analysis.mismatches[0].startswith("#5 (group 0) differs between ranks")


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/should-never-exist-fr",))


def test_a_hostile_pickle_is_refused_without_running_anything():
    raw = pickle.dumps({"entries": [Boom()]})
    with pytest.raises(ops_flightrec.OpError) as err:
        ops_flightrec.load_dump(raw)
    assert err.value.code == "bad-dump" and "refused a pickled" in err.value.message
    assert not os.path.exists("/tmp/should-never-exist-fr")
    assert ops_flightrec.load_dump(pickle.dumps({"entries": [], "v": (1, 2.0, None, b"x")}))["v"][3] == b"x"
    assert isinstance(ops_flightrec.PlainUnpickler(io.BytesIO(pickle.dumps([1]))).load(), list)


@pytest.fixture
def gloo_job(tmp_path):
    port = free_port("127.0.0.1")
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCH_FR_BUFFER_SIZE="200", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
                   TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "frdump_"), READY_DIR=str(tmp_path),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{r}").exists() and (tmp_path / f"frpipe_{r}.pipe").exists() for r in range(2)):
        assert time.monotonic() < deadline, "the gloo job did not start"
        assert all(p.poll() is None for p in procs), "a rank exited"
        time.sleep(0.2)
    yield procs
    for p in procs:
        p.kill()
        p.wait()


async def test_probe_triggers_every_ranks_recorder_and_names_the_rank_missing_from_the_collective(gloo_job):
    targets = [type("T", (), {"pid": p.pid, "start_ticks": start_ticks(p.pid)})() for p in gloo_job]
    async with OpHost() as host:
        found = await collective_evidence.gather(host.request, targets, "node-a")
    analysis = collective_evidence.fr_analysis(found.fr_records)
    assert analysis is not None and not analysis.failed, found
    stuck = analysis.stuck[0]
    assert (stuck.seq, stuck.op, stuck.missing) == (4, "gloo:all_reduce", (1,))
    assert stuck.where.startswith("<module> (gloo_fr_hang.py:")
    assert all(p.poll() is None for p in gloo_job)  # dumping ends nothing


async def test_a_job_without_the_recorder_says_not_enabled():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        async with OpHost() as host:
            reply = await host.request("fr_dump", {"targets": [{"pid": proc.pid,
                                                                "start_ticks": start_ticks(proc.pid)}]})
    finally:
        proc.kill()
        proc.wait()
    assert reply["ranks"][0]["code"] == "not-enabled"
    assert flight_recorder.analyse(flight_recorder.records_from_reply("h", reply)) is None
