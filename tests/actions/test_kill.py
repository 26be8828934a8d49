"""kill_job on a real launcher tree: targets computed from the monitor's view, outcomes per process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal

from gpuwatch_tui.actions.job_tree import JobTree
from gpuwatch_tui.actions.kill import kill_job

from .conftest import HOST_PYTHON, SCRIPTS, LocalRequestError, alive, local_request, proc_info, ticks, wait_for


def _start_tree(started, tmp_path):
    pids_file = tmp_path / "tree.json"
    launcher = started.popen([HOST_PYTHON, str(SCRIPTS / "tree_job.py"), str(pids_file)])
    tree = json.loads(wait_for(lambda: pids_file.exists() and pids_file.read_text(), what="the process tree"))
    for pid in tree["workers"] + tree["grandchildren"]:
        started.track(pid)
    return launcher, tree


def test_kill_job_takes_down_the_whole_tree_and_reports_each_process(started, tmp_path):
    launcher, tree = _start_tree(started, tmp_path)
    bystander = started.popen([HOST_PYTHON, "-c", "import time\nwhile True: time.sleep(1)"])
    job = JobTree(host="gpu-1", job="tree_job.py", procs=(proc_info(launcher.pid),))
    targets = job.targets()
    assert [t.pid for t in targets][0] == launcher.pid
    assert {t.pid for t in targets} == {launcher.pid, *tree["workers"], *tree["grandchildren"]}

    report = asyncio.run(kill_job(local_request, job, grace_s=1.0, kill_wait_s=2.0))

    assert report.ok, report.summary()
    outcome = {o.pid: o.outcome for o in report.outcomes}
    assert outcome[launcher.pid] == "exited"
    assert all(outcome[p] == "exited" for p in tree["workers"])
    assert all(outcome[p] == "killed" for p in tree["grandchildren"])
    assert all(o.signalled for o in report.outcomes)
    assert "SIGTERM" in report.command and str(tree["grandchildren"][0]) in report.command
    assert "2 killed" in report.summary()
    as_json = report.to_json()
    assert as_json["action"] == "kill" and len(as_json["outcomes"]) == 5
    json.dumps(as_json)
    assert launcher.wait(timeout=5) == -signal.SIGTERM
    assert bystander.poll() is None and alive(bystander.pid, ticks(bystander.pid))


def test_gpu_holders_left_behind_are_targets_too(started, tmp_path):
    """A process outside the tree that still holds the job's GPU memory is killed with the job."""
    job_proc = started.popen([HOST_PYTHON, "-c", "import time\nwhile True: time.sleep(1)"])
    holder = started.popen([HOST_PYTHON, "-c", "import time\nwhile True: time.sleep(1)"])
    job = JobTree(host="gpu-1", job="j", procs=(proc_info(job_proc.pid),), gpu_holders=(proc_info(holder.pid),))
    assert [t.role for t in job.targets()] == ["main", "gpu-holder"]
    report = asyncio.run(kill_job(local_request, job, grace_s=2.0))
    assert {o.pid: o.outcome for o in report.outcomes} == {job_proc.pid: "exited", holder.pid: "exited"}


def test_a_failed_request_is_a_report_not_a_crash():
    async def host_down(op, args, timeout):
        raise LocalRequestError("host-down", "gpu-1 is unreachable")

    from gpuwatch_tui.model import ProcInfo

    proc = ProcInfo(pid=4242, ppid=1, start_time=0.0, name="python3", cmdline=("python3", "t.py"), cwd="/",
                    state="S", cpu_s=0, cpu_children_s=0, rss_bytes=0, threads=1, sid=1, pgid=1, children=(),
                    stdout=None, stderr=None, unbuffered=False, unbuffered_reason="", is_python=True,
                    start_ticks=99)
    report = asyncio.run(kill_job(host_down, JobTree("gpu-1", "t.py", (proc,))))
    assert not report.ok and report.failure.code == "host-down"
    assert "failed: gpu-1 is unreachable" in report.summary()
    unpinned = JobTree("gpu-1", "t.py", (dataclasses.replace(proc, start_ticks=0),))
    report = asyncio.run(kill_job(host_down, unpinned))
    assert report.failure.code == "no-targets" and report.skipped == (4242,)
