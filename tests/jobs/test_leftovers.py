"""Leftovers in the engine: what a job's tree leaves running after its top process went, followed by pid and
start ticks after re-parenting, with the GPU memory it holds; never a new job of its own."""

from __future__ import annotations

import dataclasses

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ChildProc, ExitInfo, GpuProcess
from gpuwatch_tui.views import JobView

from .procs import gpu, proc, sample, torchrun_tree

HOST = "gpu1"
MIB = 1024 * 1024


def ticked(p, ticks=None):
    """The probe reports exact start ticks; the builders leave them out."""
    return dataclasses.replace(p, start_ticks=ticks or p.pid * 10)


def holding(index, held: dict[int, float]):
    return dataclasses.replace(gpu(index, []), processes=tuple(GpuProcess(p, m) for p, m in held.items()))


def worker(pid, ppid, start_ticks=None):
    return ticked(proc(pid, ppid, ["python3", "train.py"], name="pt_data_worker"), start_ticks)


def feed(tr, t, procs, gpus, gone=()):
    tr.update(HOST, sample(t, procs, gpus, gone=gone), now=t)


def only_job(tr) -> JobView:
    views = [v for v in tr.views() if v.host == HOST]
    assert len(views) == 1, [(v.id, v.name, v.pids) for v in views]
    return views[0]


def single_job_with_child(child_on_gpu: bool):
    child = ChildProc(201, "pt_data_worker", ("python3", "train.py"), "S", 1.0, start_ticks=2010)
    main = ticked(proc(200, 1, ["python3", "train.py"], children=(child,)))
    gpus = [holding(0, {200: 30_000.0, **({201: 500.0} if child_on_gpu else {})}), holding(1, {})]
    return main, gpus


def test_a_child_left_behind_by_a_killed_main_process_is_its_jobs_leftover_not_a_new_job():
    tr = JobTracker()
    main, gpus = single_job_with_child(child_on_gpu=False)
    for t in (0.0, 1.0, 2.0):
        feed(tr, t, {200: main}, gpus)
    assert only_job(tr).leftovers is None  # its top process lives: nothing is left over
    # SIGKILL: the main process is gone, its child re-parented to init goes on and now holds GPU memory.
    orphan = worker(201, 1, 2010)
    gpus = [holding(0, {201: 12_000.0}), holding(1, {})]
    feed(tr, 3.0, {201: orphan}, gpus, gone=[ExitInfo(200, main.start_time, 3.0, None, 9)])
    feed(tr, 4.0, {201: orphan}, gpus)
    assert 201 in tr.wanted(HOST).pids  # followed by pid from now on
    view = only_job(tr)
    assert not view.alive and view.exit_signal == 9
    left = view.leftovers
    assert left is not None and left.pids == (201,) and left.count == 1
    assert left.gpus == (0,) and left.gpu_memory_bytes == 12_000 * MIB
    assert left.processes[0].start_ticks == 2010 and left.root_pid == 200
    assert 3.0 <= left.since <= 4.0
    data = view.to_json()["leftovers"]
    assert data["count"] == 1 and data["pids"] == [201] and data["gpu_memory_bytes"] == 12_000 * MIB
    assert data["gpus"] == [0] and data["since"] == left.since
    assert JobView.from_json(view.to_json()).leftovers == left
    # The leftover exits: nothing is left over any more.
    feed(tr, 5.0, {}, [holding(0, {}), holding(1, {})], gone=[ExitInfo(201, orphan.start_time, 5.0)])
    for t in (6.0, 7.0, 8.0, 9.0, 10.0):
        feed(tr, t, {}, [holding(0, {}), holding(1, {})])
    assert only_job(tr).leftovers is None and 201 not in tr.wanted(HOST).pids


def test_a_reused_pid_is_not_a_leftover():
    tr = JobTracker()
    main, gpus = single_job_with_child(child_on_gpu=False)
    for t in (0.0, 1.0):
        feed(tr, t, {200: main}, gpus)
    stranger = worker(201, 1, 9999)  # the same pid, another process (another start)
    for t in (2.0, 3.0, 4.0):
        feed(tr, t, {201: stranger}, [holding(0, {}), holding(1, {})], gone=[ExitInfo(200, main.start_time, 2.0)])
    assert all(v.leftovers is None for v in tr.views())


def test_ranks_that_outlive_their_torchrun_agent_are_leftovers_with_their_workers():
    tr = JobTracker()
    procs, gpus = torchrun_tree()
    procs = {pid: ticked(p) for pid, p in procs.items()}
    r0 = procs[101]
    procs[101] = dataclasses.replace(r0, children=tuple(dataclasses.replace(c, start_ticks=c.pid * 10)
                                                        for c in r0.children))
    for t in (0.0, 1.0, 2.0):
        feed(tr, t, procs, gpus)
    assert only_job(tr).leftovers is None
    # The agent is SIGKILLed: its ranks go on, re-parented to init.
    ranks = {pid: dataclasses.replace(procs[pid], ppid=1) for pid in (101, 102)}
    feed(tr, 3.0, ranks, gpus, gone=[ExitInfo(100, procs[100].start_time, 3.0, None, 9)])
    for t in (4.0, 5.0):
        feed(tr, t, ranks, gpus)
    view = only_job(tr)
    left = view.leftovers
    assert left is not None and set(left.pids) == {101, 102}  # the workers are not reported yet
    assert left.gpus == (0, 1) and left.gpu_memory_bytes == 2 * 40_000 * MIB and left.root_pid == 100
    assert {300, 301} <= set(tr.wanted(HOST).pids)
    workers = {pid: worker(pid, 101) for pid in (300, 301)}
    feed(tr, 6.0, {**ranks, **workers}, gpus)
    assert set(only_job(tr).leftovers.pids) == {101, 102, 300, 301}


def test_a_dataloader_worker_found_orphaned_is_leftovers_from_the_first_sight():
    tr = JobTracker()
    orphan = worker(500, 1)
    for t in (0.0, 1.0, 2.0):
        feed(tr, t, {500: orphan}, [holding(0, {500: 8_000.0})])
    view = only_job(tr)
    assert view.leftovers is not None and view.leftovers.pids == (500,)
    assert view.leftovers.gpu_memory_bytes == 8_000 * MIB and view.leftovers.since == 0.0


def test_a_worker_whose_rank_lives_is_not_a_leftover():
    tr = JobTracker()
    child = ChildProc(501, "pt_data_worker", ("python3", "train.py"), "S", 1.0, start_ticks=5010)
    rank = ticked(proc(500, 1, ["python3", "train.py"], children=(child,)))
    for t in (0.0, 1.0, 2.0):
        feed(tr, t, {500: rank, 501: worker(501, 500, 5010)}, [holding(0, {500: 8_000.0, 501: 500.0})])
    assert only_job(tr).leftovers is None


def test_what_a_kill_left_behind_is_followed_as_leftovers_though_never_seen_before():
    tr = JobTracker()
    main, gpus = single_job_with_child(child_on_gpu=False)
    for t in (0.0, 1.0):
        feed(tr, t, {200: main}, gpus)
    [view] = tr.views()
    tr.note_leftovers(view.id, [(777, 7770)])  # forked during the kill, outlived SIGKILL (state D)
    stuck = dataclasses.replace(worker(777, 1, 7770), state="D")
    feed(tr, 2.0, {}, [holding(0, {777: 30_000.0})], gone=[ExitInfo(200, main.start_time, 2.0, None, 9)])
    assert 777 in tr.wanted(HOST).pids
    for t in (3.0, 4.0):
        feed(tr, t, {777: stuck}, [holding(0, {777: 30_000.0})])
    left = only_job(tr).leftovers
    assert left is not None and left.pids == (777,) and left.processes[0].state == "D"


def test_a_torchrun_rank_whose_agent_is_gone_is_leftovers_but_a_nohup_job_under_init_is_not():
    tr = JobTracker()
    rank = dataclasses.replace(ticked(proc(600, 1, ["python3", "-u", "train.py"])),
                               dist=(("TORCHELASTIC_RUN_ID", "abc"), ("RANK", "1"), ("LOCAL_RANK", "1")))
    plain = ticked(proc(700, 1, ["python3", "train.py"]))  # `nohup python train.py &`: its shell went, it lives
    for t in (0.0, 1.0, 2.0):
        feed(tr, t, {600: rank, 700: plain}, [holding(0, {600: 30_000.0}), holding(1, {700: 30_000.0})])
    by_pid = {v.pids[0]: v for v in tr.views()}
    assert by_pid[600].leftovers is not None and by_pid[600].leftovers.pids == (600,)
    assert by_pid[700].leftovers is None
