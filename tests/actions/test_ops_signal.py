"""The probe's signal and kill_tree ops on real processes: pinned by pidfd + start time, never a stranger."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from .conftest import HOST_PYTHON, PROBE_DIR, SCRIPTS, alive, ops_base, ops_signal, ticks, wait_for


def _sleeper(started, *extra):
    return started.popen([HOST_PYTHON, "-c", "import time\nwhile True: time.sleep(1)", *extra])


def _tree(started, tmp_path):
    pids_file = tmp_path / "tree.json"
    launcher = started.popen([HOST_PYTHON, str(SCRIPTS / "tree_job.py"), str(pids_file)])
    tree = json.loads(wait_for(lambda: pids_file.exists() and pids_file.read_text(), what="the process tree"))
    for pid in tree["workers"] + tree["grandchildren"]:
        started.track(pid)
    assert tree["launcher"] == launcher.pid
    return launcher, tree


def test_signal_reaches_a_pinned_process(started):
    p = _sleeper(started)
    t = ticks(p.pid)
    reply = ops_signal.op_signal({"targets": [{"pid": p.pid, "start_ticks": t}], "signal": "TERM"})
    assert reply["results"][0]["outcome"] == "signalled"
    assert reply["results"][0]["via_pidfd"] is True
    assert p.wait(timeout=5) == -signal.SIGTERM


def test_pid_reuse_is_refused_and_nothing_is_signalled(started):
    # A process that lived and died: its (pid, ticks) must now be refused as gone.
    old = _sleeper(started)
    old_ref = (old.pid, ticks(old.pid))
    old.kill()
    old.wait()
    # A live process given a start time that is not its own stands for a pid reused by a newcomer.
    newcomer = _sleeper(started)
    wrong = {"pid": newcomer.pid, "start_ticks": old_ref[1] if old_ref[1] != ticks(newcomer.pid) else 1}
    reply = ops_signal.op_signal({"targets": [{"pid": old_ref[0], "start_ticks": old_ref[1]}, wrong],
                                  "signal": "KILL"})
    outcomes = {r["pid"]: r for r in reply["results"]}
    assert outcomes[old_ref[0]]["outcome"] in ("gone", "reused")
    assert outcomes[newcomer.pid]["outcome"] == "reused"
    assert "refused" in outcomes[newcomer.pid]["message"]
    reply = ops_signal.op_kill_tree({"targets": [wrong], "grace_s": 0.2, "kill_wait_s": 0.2})
    assert reply["results"][0]["outcome"] == "reused"
    assert reply["results"][0]["term_at_s"] is None and reply["results"][0]["kill_at_s"] is None
    assert newcomer.poll() is None and alive(newcomer.pid, ticks(newcomer.pid))


def test_permission_denied_is_reported_per_target(started):
    """The op run as `nobody` against root's process: refused by the kernel, said so, never raised."""
    victim = _sleeper(started)
    mine = started.popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", HOST_PYTHON, "-c",
                          "import time\nwhile True: time.sleep(1)"])
    wait_for(lambda: ops_base.read_stat_fields(mine.pid) and os.stat(f"/proc/{mine.pid}").st_uid == 65534,
             what="the nobody process")
    args = {"targets": [{"pid": victim.pid, "start_ticks": ticks(victim.pid)},
                        {"pid": mine.pid, "start_ticks": ticks(mine.pid)}], "signal": "TERM"}
    code = ("import json, sys\nsys.path.insert(0, sys.argv[1])\nimport ops_signal\n"
            "print(json.dumps(ops_signal.op_signal(json.loads(sys.argv[2]))))")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", HOST_PYTHON, "-c", code,
                          str(PROBE_DIR), json.dumps(args)], capture_output=True, text=True, timeout=30, cwd="/")
    assert out.returncode == 0, out.stderr
    results = {r["pid"]: r for r in json.loads(out.stdout)["results"]}
    assert results[victim.pid]["outcome"] == "permission-denied"
    assert "Operation not permitted" in results[victim.pid]["message"]
    assert results[mine.pid]["outcome"] == "signalled"  # its own process it may signal
    assert victim.poll() is None
    assert mine.wait(timeout=5) == -signal.SIGTERM


def test_kill_tree_terms_waits_kills_survivors_and_spares_bystanders(started, tmp_path):
    launcher, tree = _tree(started, tmp_path)
    bystander = _sleeper(started)
    refs = [(tree["launcher"], "launcher")] + [(p, "main") for p in tree["workers"]] + \
           [(p, "descendant") for p in tree["grandchildren"]]
    targets = [{"pid": pid, "start_ticks": ticks(pid), "role": role} for pid, role in refs]
    reply = ops_signal.op_kill_tree({"targets": targets, "grace_s": 1.0, "kill_wait_s": 2.0})
    got = {r["pid"]: r for r in reply["results"]}
    for pid in [tree["launcher"], *tree["workers"]]:
        assert got[pid]["outcome"] == "exited", got[pid]
        assert got[pid]["kill_at_s"] is None
    for pid in tree["grandchildren"]:
        r = got[pid]
        assert r["outcome"] == "killed", r  # ignored SIGTERM, needed SIGKILL after the grace
        assert r["term_at_s"] is not None and r["kill_at_s"] >= r["term_at_s"] + 0.9
    assert got[tree["launcher"]]["term_at_s"] <= min(got[p]["term_at_s"] for p in tree["workers"])
    assert 1.0 <= reply["elapsed_s"] < 5.0
    assert launcher.wait(timeout=5) == -signal.SIGTERM
    assert bystander.poll() is None and alive(bystander.pid, ticks(bystander.pid))


def test_kill_tree_continues_a_stopped_process_so_term_can_work(started):
    p = _sleeper(started)
    t = ticks(p.pid)
    os.kill(p.pid, signal.SIGSTOP)
    wait_for(lambda: ops_base.read_stat_fields(p.pid)[0] == b"T", what="state T")
    reply = ops_signal.op_kill_tree({"targets": [{"pid": p.pid, "start_ticks": t}], "grace_s": 3.0})
    r = reply["results"][0]
    assert r["outcome"] == "exited" and r["continued"] is True
    assert reply["elapsed_s"] < 2.5
    assert p.wait(timeout=5) == -signal.SIGTERM


@pytest.mark.parametrize("args, words", [
    ({"targets": []}, "non-empty"),
    ({"targets": [{"pid": "x", "start_ticks": 1}]}, "integer"),
    ({"targets": [{"pid": 1, "start_ticks": 1}]}, "refusing"),
    ({"targets": [{"pid": 99, "start_ticks": 1}], "signal": "NOPE"}, "unknown signal"),
])
def test_bad_arguments_are_clear_errors(args, words):
    with pytest.raises(ops_base.OpError) as err:
        ops_signal.op_signal(args)
    assert err.value.code == "bad-args" and words in err.value.message


def test_kill_tree_follows_children_forked_by_a_term_handler_until_the_tree_is_empty(started, tmp_path):
    """The job forks three SIGTERM-ignoring children in its handler and exits: they are found (pinned by
    pid and start time), get SIGKILL after the grace, and are reported; a bystander is spared."""
    pids_file = tmp_path / "children"
    job = started.popen([HOST_PYTHON, str(SCRIPTS / "forking_on_term_job.py"), str(pids_file)],
                        stdout=subprocess.PIPE, start_new_session=True)
    assert job.stdout.readline().strip() == b"ready"
    bystander = _sleeper(started)
    reply = ops_signal.op_kill_tree({"targets": [{"pid": job.pid, "start_ticks": ticks(job.pid), "role": "main"}],
                                     "grace_s": 1.0, "kill_wait_s": 2.0})
    children = [int(x) for x in wait_for(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 3
                                         and pids_file.read_text(), what="three children").split()]
    for pid in children:
        started.track(pid)
    got = {r["pid"]: r for r in reply["results"]}
    assert got[job.pid]["outcome"] == "exited"
    assert sorted(set(got) - {job.pid}) == sorted(children), reply
    for pid in children:
        assert got[pid]["role"] == "child" and got[pid]["outcome"] == "killed", got[pid]
        # Found during the grace it gets SIGTERM first; found after it (a loaded machine), SIGKILL at once.
        term_at, kill_at = got[pid]["term_at_s"], got[pid]["kill_at_s"]
        assert kill_at is not None and (term_at is None or kill_at >= term_at), got[pid]
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
    assert bystander.poll() is None

