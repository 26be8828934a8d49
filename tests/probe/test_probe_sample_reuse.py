"""What a sample reuses from the last one instead of reading or parsing it again, and that nothing it
reports goes stale for it: real processes, real /proc."""

from __future__ import annotations

import os
import subprocess
import time


def test_a_stat_that_reads_the_same_bytes_gives_the_same_stat_and_new_bytes_a_new_one(probe_ns, spawn, probe_mod):
    read_stat, files = probe_mod("procfs").read_stat, probe_mod("procfs").ProcFiles()
    idle = spawn("import time; time.sleep(60)")
    busy = spawn("import time\nwhile True: sum(range(10000))")
    time.sleep(0.3)
    first = read_stat(idle.pid, files)
    assert first is not None and first.pid == idle.pid
    files.begin_sample()
    assert read_stat(idle.pid, files) is first  # a sleeping process's stat does not move: not parsed again
    before = read_stat(busy.pid, files)
    time.sleep(0.2)  # 20 clock ticks of CPU at least
    assert read_stat(busy.pid, files) is before  # read once in a sample
    files.begin_sample()
    after = read_stat(busy.pid, files)
    assert after is not before and after.cpu > before.cpu  # the next sample: new bytes parsed, the new CPU seen
    files.end_sample()
    files.end_sample()  # not read during a sample: forgotten with its descriptor
    assert files.parsed == {} and files.fds == {}


def test_a_stat_kept_for_a_pid_is_never_another_processes(probe_ns, spawn, probe_mod):
    read_stat, files = probe_mod("procfs").read_stat, probe_mod("procfs").ProcFiles()
    job = spawn("import time; time.sleep(60)")
    assert read_stat(job.pid, files).pid == job.pid
    job.kill()
    job.wait()
    files.begin_sample()
    assert read_stat(job.pid, files) is None  # gone: not the kept Stat


def test_stdout_facts_follow_a_stream_sent_elsewhere_and_stand_while_a_log_grows(probe_ns, spawn, tmp_path, probe_mod):
    first, second, go = tmp_path / "first.log", tmp_path / "second.log", tmp_path / "go"
    program = ("import os, sys, time\n"
               "print('up', flush=True)\n"
               "while not os.path.exists(%r): time.sleep(0.02)\n"
               "fd = os.open(%r, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
               "os.dup2(fd, 1); print('moved', flush=True); time.sleep(60)\n") % (str(go), str(second))
    with open(first, "w") as out:
        job = spawn(program, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 10
    while first.read_text() != "up\n" and time.time() < deadline:
        time.sleep(0.02)
    reads = []
    fd_target = probe_mod("process_facts").fd_target
    probe_mod("process_facts").fd_target = lambda pid, fd: reads.append(fd) or fd_target(pid, fd)
    cache = probe_mod("process_facts").ProcCache()
    start = probe_mod("procfs").read_stat(job.pid).start
    now = time.time()
    facts = cache.slow_facts(job.pid, start, now, 0)
    assert facts["stdout"] == {"path": str(first), "kind": "file", "append": False}  # no size: nothing reads it
    assert facts["stderr"] == facts["stdout"]
    assert sorted(reads) == [1, 2]
    with open(first, "a") as f:
        f.write("grown\n")
    stdout = facts["stdout"]
    facts = cache.slow_facts(job.pid, start, now + 1, 0)
    assert facts["stdout"] == stdout  # a log that grows changes no fact of the process
    assert sorted(reads) == [1, 2]  # the same targets: their open flags were not read again
    go.touch()
    while not second.exists() or second.read_text() != "moved\n":
        assert time.time() < deadline
        time.sleep(0.02)
    facts = cache.slow_facts(job.pid, start, now + 2, 0)
    assert facts["stdout"] == {"path": str(second), "kind": "file", "append": True}
    assert facts["stderr"]["path"] == str(first)
    assert sorted(reads) == [1, 1, 2]  # a new target: read in full
    facts = cache.slow_facts(job.pid, start, now + 3 + probe_mod("process_facts").FD_FLAGS_REFRESH_S, 0)
    assert sorted(reads) == [1, 1, 1, 2, 2]  # and every FD_FLAGS_REFRESH_S anyway
    assert facts["stdout"]["append"] is True and "flags_at" not in facts["stdout"]


def test_slow_facts_that_read_the_same_are_read_less_often_and_a_change_starts_over(
        probe_ns, spawn, tmp_path, probe_mod):
    """cwd and the output targets: due 5 s after a read, then 10, 20, 40, 60, 60 s while they read the same;
    a job that moves its cwd is seen at the next due read, and the period starts over at 5 s."""
    go, moved = tmp_path / "go", tmp_path / "elsewhere"
    moved.mkdir()
    job = spawn("import os, time\n"
                "while not os.path.exists(%r): time.sleep(0.02)\n"
                "os.chdir(%r); open('here', 'w').close(); time.sleep(60)\n" % (str(go), str(moved)), cwd=str(tmp_path))
    cache, refresh = probe_mod("process_facts").ProcCache(), 5.0
    start = probe_mod("procfs").read_stat(job.pid).start
    t = time.time()
    periods = []
    for _ in range(7):
        facts = cache.slow_facts(job.pid, start, t, refresh)
        assert facts["slow_at"] == t  # read
        periods.append(round(facts["slow_due"] - t, 3))
        cache.slow_facts(job.pid, start, facts["slow_due"] - 0.001, refresh)
        assert facts["slow_at"] == t  # not due yet: not read
        t = facts["slow_due"]
    assert periods == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    assert facts["cwd"] == str(tmp_path)
    go.touch()
    deadline = time.time() + 10
    while not (moved / "here").exists():
        assert time.time() < deadline
        time.sleep(0.02)
    facts = cache.slow_facts(job.pid, start, t, refresh)
    assert facts["cwd"] == str(moved) and facts["slow_due"] - t == refresh  # seen, and started over


def test_one_loadavg_read_serves_the_load_average_and_every_pid_cursor(probe_ns, spawn, probe_mod):
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 0})
    own_reads = []
    cursor = probe_mod("procfs").PidCursor
    read = cursor.read
    cursor.read = lambda self, loadavg=None: own_reads.append(loadavg is None) or read(self, loadavg)
    shared = probe_ns["PROC_LOADAVG"]
    kept_read, shared_reads = shared.read, []
    shared.read = lambda: shared_reads.append(1) or kept_read()
    frame = probe.sample()
    assert shared_reads == [1] and own_reads and not any(own_reads)
    assert isinstance(frame["load1"], float)
    # ... and the cursors given the sample's bytes still tell when a pid was handed out
    cursor = probe.walk.sample_pids
    cursor.changed(kept_read())
    spawn("import time; time.sleep(60)")
    assert cursor.changed(kept_read())


def test_children_files_stay_open_through_samples_that_keep_the_last_children_lists(probe_ns, spawn):
    parent = spawn("import subprocess, time\np = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True)\n"
                   "time.sleep(60)", stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    probe = probe_ns["Probe"]({"interval": 1, "scan_interval": 3600})
    probe.wants.pids = {parent.pid}
    probe.sample()
    path = "/proc/%d/task/%d/children" % (parent.pid, parent.pid)
    opened = {key[0]: fd for key, fd in probe.files.fds.items()}
    assert path in opened
    probe.walk.sample_pids.changed = lambda loadavg=None: False  # as while no process is started anywhere
    frame = probe.sample()
    assert [c["pid"] for p in frame["procs"] if p["pid"] == parent.pid for c in p["children"]] == [child]
    assert {key[0]: fd for key, fd in probe.files.fds.items()}.get(path) == opened[path]  # not closed
    probe.walk.sample_pids.changed = lambda loadavg=None: True  # a pid handed out: the file is read again ...
    frame = probe.sample()
    assert [c["pid"] for p in frame["procs"] if p["pid"] == parent.pid for c in p["children"]] == [child]
    assert {key[0]: fd for key, fd in probe.files.fds.items()}.get(path) == opened[path]  # ... through it


def test_a_young_jobs_parent_renaming_itself_is_seen_through_the_kept_descriptor(probe_ns, spawn, tmp_path, probe_mod):
    """A rank judged while its launcher was still called python is a candidate once the launcher renames
    itself (torchrun's agent does), though the launcher's name is read through a descriptor kept open."""
    go = tmp_path / "go"
    launcher = spawn("import os, subprocess, sys, time\n"
                     "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
                     " stdout=subprocess.PIPE)\n"
                     "print(p.pid, flush=True)\n"
                     "while not os.path.exists(%r): time.sleep(0.02)\n"
                     "open('/proc/self/comm', 'w').write('pt_elastic'); print('renamed', flush=True)\n"
                     "time.sleep(60)\n" % str(go), stdout=subprocess.PIPE, text=True)
    rank = int(launcher.stdout.readline())
    cands = probe_mod("candidates").JobCandidates()
    seen = {launcher.pid: (1, 0.0, "python3")}
    state = [None, 0, False, None, None]
    assert cands.judge(rank, launcher.pid, seen, state) is None  # a pipe, and a parent that is no launcher
    kept = dict(cands.files.fds)
    assert any(path == "/proc/%d/comm" % launcher.pid for path, _ in kept)
    go.touch()
    assert launcher.stdout.readline().strip() == "renamed"
    assert cands.judge(rank, launcher.pid, seen, [None, 0, False, None, None]) == "launcher"
    assert cands.files.fds == kept  # read again through the same descriptor
