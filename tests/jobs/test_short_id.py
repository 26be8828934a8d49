"""The short id: derived from host, root pid and root start alone (every watcher agrees), never read as
a pid, distinct for same-named jobs, kept while the job lives, lengthened for the newer of two that
collide; and what a person types finds one job or is refused with the candidates."""

from __future__ import annotations

import itertools

import pytest

from gpuwatch_tui.jobs.job_lookup import AmbiguousJob, find_job
from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.short_id import (
    ALPHABET, LETTERS, SHORT_LEN, assign, looks_like_short_id, multi_parts, run_parts, short_id,
)
from gpuwatch_tui.views import JobView, PhaseEntry
from tests.jobs.procs import gpu, proc, sample


def test_derivation_is_stable_readable_and_prefix_consistent():
    sid = short_id(run_parts("node1", 4242, 123456))
    assert sid == short_id(run_parts("node1", 4242, 123456))  # another process, another machine: the same
    assert len(sid) == SHORT_LEN and sid[0] in LETTERS and set(sid) <= set(ALPHABET) and looks_like_short_id(sid)
    assert short_id(run_parts("node1", 4242, 123456), 7).startswith(sid)
    # a reused pid (another start) or another host is another id
    assert sid != short_id(run_parts("node1", 4242, 123457)) and sid != short_id(run_parts("node2", 4242, 123456))
    assert short_id(multi_parts("slurm job 42")) != short_id(run_parts("node1", 4242, 123456))
    assert not looks_like_short_id("12345") and not looks_like_short_id("train.py")


def colliding_pair(host: str = "node1") -> tuple[tuple, tuple]:
    """Two runs of `host` whose 5-character ids are the same (found by search: ~1 in a million pairs)."""
    seen: dict[str, tuple] = {}
    for pid in itertools.count(2):
        parts = run_parts(host, pid, 1000)
        sid = short_id(parts)
        if sid in seen:
            return seen[sid], parts
        seen[sid] = parts


def test_a_collision_lengthens_the_newer_and_keeps_the_older():
    older, newer = colliding_pair()
    assert short_id(older) == short_id(newer)
    ids = assign([((2000, newer[2]), newer), ((1000, older[2]), older)], set())
    assert ids[1] == short_id(older) and len(ids[0]) == SHORT_LEN + 1 and ids[0].startswith(ids[1])
    # the older one already named (a live job): the newer takes the longer form, the older keeps its id
    assert assign([((2000, 0), newer)], {short_id(older)}) == [short_id(newer, SHORT_LEN + 1)]


def three_train_py(t: float, pids=(201, 202, 203)):
    procs = {pid: proc(pid, 1, ["/venv/bin/python", "train.py"], cpu=10.0 + t) for pid in pids}
    return sample(t, procs, [gpu(n, [pid], util=99.0, power=690.0) for n, pid in enumerate(pids)])


def test_same_named_jobs_get_distinct_ids_that_hold_while_they_live():
    tracker = JobTracker()
    for t in range(3):
        tracker.update("node1", three_train_py(1000.0 + t), 1000.0 + t)
    views = {v.pids[0]: v for v in tracker.views()}
    assert {v.name for v in views.values()} == {"train.py"} and len({v.short_id for v in views.values()}) == 3
    # the same id as any other watcher derives from what the host says of the root
    for pid, v in views.items():
        root_pid, root_start = tracker.state(v.id).root  # (the builder's processes carry no start ticks)
        assert root_pid == pid and v.short_id == short_id(run_parts("node1", pid, round(root_start)))
    first = dict((pid, v.short_id) for pid, v in views.items())
    # one run ends, a fourth starts: the others keep their ids
    for t in range(3, 6):
        tracker.update("node1", three_train_py(1000.0 + t, pids=(201, 202, 204)), 1000.0 + t)
    now = {v.pids[0]: v.short_id for v in tracker.views() if v.alive}
    assert now[201] == first[201] and now[202] == first[202] and now[204] not in first.values()
    assert {v.short_id for v in tracker.views()} >= set(first.values())  # the ended run keeps its id too
    assert all(v.to_json()["short_id"] == v.short_id for v in tracker.views())
    assert JobView.from_json(views[201].to_json()).short_id == first[201]


def view(name, pid, phase="training", alive=True, sid=None, host="node1", since=100.0):
    return JobView(id=f"{host}:{pid}:1", name=name, host=host, phase=phase, pids=(pid,), alive=alive,
                   short_id=sid or short_id(run_parts(host, pid, 1)), history=(PhaseEntry(phase, since),))


def test_lookup_by_id_or_a_name_only_one_live_job_has():
    a, b = view("train.py", 11), view("train.py", 12, phase="stalled")
    ended = view("eval.py", 13, phase="crashed", alive=False)
    views = [a, b, ended, view("train.py", 14, host="node2")]
    assert find_job(views, "node1", a.short_id, 200.0) is a and find_job(views, "node1", b.id, 200.0) is b
    assert find_job(views, "node1", "eval.py", 200.0) is ended  # none live: the one ended
    assert find_job(views, "node1", "nope", 200.0) is None
    with pytest.raises(AmbiguousJob) as refused:
        find_job(views, "node1", "train.py", 200.0)
    assert refused.value.candidates == [a, b]  # node2's train.py is not on node1
    text = str(refused.value)
    assert "2 jobs on node1 are named 'train.py'" in text
    for v in (a, b):
        row = next(line for line in text.splitlines() if v.short_id in line)
        assert row.split() == [v.short_id, "train.py", str(v.pids[0]), "1m40s", v.phase]
    # with one of them ended, the name finds the live one
    views[0] = view("train.py", 11, phase="crashed", alive=False)
    assert find_job(views, "node1", "train.py", 200.0) is b
