"""The records actions leave on a host (probe/action_notes.py): private, bounded, never following a link, each
reported once for the processes it names; and the engine's reading of them (jobs/host_actions.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gpuwatch_tui.jobs.host_actions import NOTE_WAIT_S, note_jobs
from gpuwatch_tui.jobs.job_actions import ActionRecord
from gpuwatch_tui.jobs.job_state import JobState
from gpuwatch_tui.model import ActionNote, parse_note

from .conftest import ops_base  # noqa: F401 - puts the probe's folder on the path first
import action_notes  # noqa: E402
import ops_notes  # noqa: E402


def kill_args(pid=4242, ticks=99, ident="00112233aabbccdd", **extra):
    return {"action": "kill", "user": "ana", "id": ident, "targets": [{"pid": pid, "start_ticks": ticks}], **extra}


def test_a_record_is_private_and_reported_once_for_the_pids_it_names(tmp_path):
    where = tmp_path / "state" / "actions"
    path = action_notes.write_record(action_notes.make_record(kill_args(), 1000.0), str(where))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(where).st_mode) == 0o700
    notes = action_notes.ActionNotes(str(where))
    assert notes.poll([1, 2]) == []
    [record] = notes.poll([4242])
    assert (record["action"], record["user"], record["targets"]) == ("kill", "ana", [[4242, 99]])
    assert notes.poll([4242]) == []  # once per probe
    assert action_notes.ActionNotes(str(where)).poll([4242]) == [record]  # another probe reports it too
    note = parse_note(record)
    assert note == ActionNote("00112233aabbccdd", "kill", "ana", 1000.0, ((4242, 99),))


def test_the_same_record_is_never_written_twice(tmp_path):
    record = action_notes.make_record(kill_args(), 1000.0)
    action_notes.write_record(record, str(tmp_path))
    with pytest.raises(ops_base.OpError):
        action_notes.write_record(record, str(tmp_path))


def test_a_linked_or_shared_directory_is_refused(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(ops_base.OpError):
        action_notes.write_record(action_notes.make_record(kill_args(), 1.0), str(tmp_path / "link"))
    assert list(real.iterdir()) == []
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ops_base.OpError, match="private"):
        action_notes.write_record(action_notes.make_record(kill_args(), 1.0), str(shared))


def test_planted_links_oversized_and_foreign_files_are_not_read(tmp_path):
    where = tmp_path / "actions"
    where.mkdir(mode=0o700)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"id": "ff", "action": "kill", "user": "x", "time": 1, "targets": [[7, 1]]}))
    (where / "20260101T000000-aaaaaaaaaaaaaaaa.json").symlink_to(secret)
    (where / "20260101T000001-bbbbbbbbbbbbbbbb.json").write_text(" " * (action_notes.MAX_RECORD_BYTES + 1))
    (where / "20260101T000002-cccccccccccccccc.json").write_text("{not json")
    fifo = where / "20260101T000003-dddddddddddddddd.json"
    os.mkfifo(fifo)
    assert action_notes.ActionNotes(str(where)).poll([7]) == []


@pytest.mark.parametrize("bad", [
    {"action": "rm -rf"}, {"user": ""}, {"user": "x" * 65}, {"id": "../../etc"}, {"targets": []},
    {"targets": [{"pid": "one"}]}, {"status_file": "relative.json"},
])
def test_a_request_that_is_not_a_record_is_refused(bad):
    with pytest.raises(ops_base.OpError):
        action_notes.make_record({**kill_args(), **bad}, 1.0)


def test_the_number_of_records_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(action_notes, "MAX_RECORDS", 5)
    for i in range(8):
        action_notes.write_record(action_notes.make_record(kill_args(ident="%016x" % i), 1000.0 + i), str(tmp_path))
    assert len(list(tmp_path.iterdir())) == 5


def test_the_op_writes_in_the_users_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    reply = ops_notes.OPS["note_action"](kill_args())
    assert reply["path"].startswith(str(tmp_path / "gpuwatch" / "actions") + "/")


def _job(serial=1, pids=((4242, 99),)):
    job = JobState("j", "h", "train.py", serial)
    job.start_ticks = dict(pids)
    job.members = {pid: 1.0 for pid, _ in pids}
    return job


def test_the_engine_adds_a_record_to_the_job_whose_process_it_names_once():
    job, other = _job(), _job(2, ((4242, 100),))  # the same pid, another start: not that process
    note = ActionNote("00112233aabbccdd", "kill", "ana", 1000.0, ((4242, 99),))
    assert note_jobs([job, other], [(note, 5.0)], skew=2.0, now=5.0) == []
    assert job.actions == [ActionRecord("kill", "ana", 1002.0, 1, None, ref="00112233aabbccdd")]
    assert other.actions == []
    note_jobs([job], [(note, 6.0)], skew=2.0, now=6.0)  # (this gpuwatch's own record, or a second report)
    assert len(job.actions) == 1


def test_a_record_waits_for_its_job_a_while():
    note = ActionNote("00112233aabbccdd", "run_started", "ana", 1000.0, ((77, 5),), "/s/r.json")
    waiting = note_jobs([_job()], [(note, 10.0)], skew=0.0, now=10.0)
    assert waiting == [(note, 10.0)]
    assert note_jobs([_job()], waiting, skew=0.0, now=10.0 + NOTE_WAIT_S) == []
    job = _job(3, ((77, 5),))
    note_jobs([job], waiting, skew=0.0, now=20.0)
    assert job.actions[0].action == "run_started" and job.actions[0].status_file == "/s/r.json"


def test_a_dumps_reading_is_recorded_bounded_and_joins_the_verdict_of_every_watcher():
    record = action_notes.make_record({**kill_args(), "action": "dump_stack", "finding": {
        "evidence": "py-spy 12:00: ranks wait in a collective", "phase": "stalled", "detail": "nccl-spin"}}, 1000.0)
    note = parse_note(record)
    assert note.finding == ("py-spy 12:00: ranks wait in a collective", "stalled", "nccl-spin")
    job = _job()
    note_jobs([job], [(note, 5.0)], skew=0.0, now=5.0)
    assert (job.dump_finding.phase, job.dump_finding.detail, job.dump_finding.when) == ("stalled", "nccl-spin", 1000.0)
    older = ActionNote("ffeeddccbbaa9988", "dump_stack", "bo", 900.0, ((4242, 99),), None, ("older", None, None))
    note_jobs([job], [(older, 6.0)], skew=0.0, now=6.0)
    assert job.dump_finding.evidence.startswith("py-spy 12:00")  # the latest reading stands
    for bad in ({"evidence": ""}, {"evidence": "x" * 601}, {"evidence": "x", "phase": "finished"},
                {"evidence": "x", "detail": "a b;rm"}, "text"):
        with pytest.raises(ops_base.OpError):
            action_notes.make_record({**kill_args(), "action": "dump_stack", "finding": bad}, 1.0)
