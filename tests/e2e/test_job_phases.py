"""Verdicts end to end: real scenario programs started with `nohup python X.py > train.log 2>&1 &` over
real ssh sessions on the sshd test hosts, watched by a real `gpuwatch watch --json` subprocess.

The fake nvidia-smi of a host lists a scenario's pid as a GPU process (`processes` in its scenario
file), so the probe discovers it as a job, as it would a CUDA process; configured jobs are found by
`[[jobs]] match = ...` instead. Several scenarios run at once under one watch to keep this quick.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import time

import pytest

from .harness import PYTHON, REPO, Watch, launch, stop_refs, write_config

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

ENDED = ("finished", "crashed")


def subsequence(phases: list[str], wanted: list[str]) -> bool:
    it = iter(phases)
    return all(any(p == w for p in it) for w in wanted)


def gpu_scenario(host, plan: dict[int, tuple[str, int]]) -> None:
    """plan: gpu index -> (recorded phase, pid on it)."""
    host.set_scenario(
        gpus=max(plan) + 1, phase="idle", uuid_prefix=f"GPU-{host.name}",
        per_gpu={str(i): {"phase": phase} for i, (phase, _) in plan.items()},
        processes=[{"gpu": i, "pid": pid, "used_memory_mib": 40_000} for i, (_, pid) in plan.items()],
    )


def test_discovered_jobs_from_start_to_their_verdicts(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host])
    watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
    runs = {}
    try:
        watch.wait_for(lambda w: w.host(host.name).get("state") == "connected", "the host connected", 20)
        quick = ["--step-time", "0.4"]
        specs = {
            # name: (script, args, gpu phase)
            "loading": ("loading.py", ["--shards", "3", "--shard-mb", "2", "--step-time", "2", "--steps", "40"],
                        "held"),
            "hf": ("train_hf.py", ["--steps", "40", "--step-time", "0.15", "--eval-every", "10"], "training"),
            "traceback": ("crash_traceback.py", ["--steps", "10", *quick], "training"),
            "sigkill": ("crash_sigkill.py", ["--steps", "10", *quick], "training"),
            "segfault": ("crash_segfault.py", ["--steps", "10", *quick], "training"),
            "hang": ("hang.py", ["--steps", "4", "--step-time", "0.3"], "held"),
            "buffered": ("buffered.py", ["--steps", "1000", "--step-time", "0.5"], "training"),
        }
        plan = {}
        for i, (key, (script, args, phase)) in enumerate(specs.items()):
            runs[key] = launch(ssh_env, host, tmp_path / key, script, *args)
            plan[i] = (phase, runs[key].pid)
            gpu_scenario(host, plan)  # the pid shows up on its GPU, as a CUDA process would

        def track(key):
            return watch.job_of(runs[key].pid)

        def done(w):
            t = {k: track(k) for k in runs}
            return all(t.values()) and (
                t["loading"].phase == "finished" and t["hf"].phase == "finished"
                and t["traceback"].phase == "crashed" and t["sigkill"].phase == "crashed"
                and t["segfault"].phase == "crashed" and t["hang"].has("stalled")
                and t["buffered"].has("silent", "buffered-stdout"))

        watch.wait_for(done, "every scenario's verdict", timeout=90)
        ended_at = time.monotonic()
        # Ended jobs stay listed with their final verdict: keep watching a few more samples.
        n = watch.snapshots
        watch.wait_for(lambda w: w.snapshots >= n + 6, "six more snapshots", 20)
        t = {k: track(k) for k in runs}
        report = watch.describe()
        print(report)

        # Nobody healthy is ever called stalled, on first sight or later.
        for key in ("loading", "hf", "traceback", "sigkill", "segfault", "buffered"):
            assert not t[key].has("stalled"), f"{key} was called stalled:\n{report}"
        for key, tr in t.items():
            assert tr.seq[0][0] in ("starting", "unknown", "loading", "training"), f"{key} first verdict:\n{report}"

        # loading -> training -> finished (progress reached its total: 40/40)
        lo = t["loading"]
        assert subsequence(lo.phases, ["loading", "training", "finished"]), report
        assert lo.has("loading", "checkpoint-shards"), report
        assert (lo.last["progress"]["step"], lo.last["progress"]["total"]) == (40, 40), report
        assert lo.last["alive"] is False and "crashed" not in lo.phases

        # HF Trainer style: training (with checkpoints) -> finished
        hf = t["hf"]
        assert subsequence(hf.phases, ["training", "finished"]), report
        assert "crashed" not in hf.phases and hf.last["progress"]["loss"] is not None

        # crash with a traceback: crashed / exception, the exception itself in the evidence
        tb = t["traceback"]
        assert subsequence(tb.phases, ["training", "crashed"]), report
        assert tb.detail == "exception", report
        assert any("RuntimeError: loss became nan at step 11" in e for e in tb.last["evidence"]), report

        # SIGKILL and SIGSEGV leave nothing in the log: crashed, process vanished mid-run
        for key in ("sigkill", "segfault"):
            tr = t[key]
            assert subsequence(tr.phases, ["training", "crashed"]), report
            assert tr.detail in ("vanished", "killed", "signal"), report
            ev = " | ".join(tr.last["evidence"])
            assert "process gone" in ev and "stopped at step 10/100" in ev, report
            assert "SIGKILL" in ev or "segfault" in ev, report

        # a Python-level hang: stalled / no-progress, with the silence and flat CPU as evidence
        hg = t["hang"]
        assert hg.phase == "stalled" and hg.detail == "no-progress", report
        assert subsequence(hg.phases, ["training", "stalled"]), report
        assert any(e.startswith("log silent") for e in hg.last["evidence"]), report
        assert any(e.startswith("CPU") for e in hg.last["evidence"]), report
        assert any(e.startswith("step 4/40") and "ETA" not in e for e in hg.last["evidence"]), report
        assert runs["hang"].alive()

        # block-buffered stdout: silent / buffered-stdout, never stalled
        bu = t["buffered"]
        assert bu.phase == "silent" and bu.detail == "buffered-stdout", report
        assert any("no -u, no PYTHONUNBUFFERED" in e for e in bu.last["evidence"]), report
        assert bu.last["actions"] == ["restart_unbuffered"] and "press" not in bu.last["advice"], report
        assert runs["buffered"].log.stat().st_size == 0

        # the ended jobs are still listed, verdicts unchanged, seconds after they ended
        assert time.monotonic() - ended_at >= 2.5
        for key, phase in (("loading", "finished"), ("hf", "finished"), ("traceback", "crashed"),
                           ("sigkill", "crashed"), ("segfault", "crashed")):
            tr = t[key]
            assert tr.phase == phase and tr.seq[-1][0] == phase, report
            assert tr.last["ended_at"] is not None
        assert json.dumps(watch.last)  # the whole snapshot is plain JSON
        assert not watch.errors, watch.errors
    finally:
        watch.stop()
        stop_refs([r.ref for r in runs.values()])


def test_configured_jobs_first_sight_status_and_two_runs_of_one_script(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    base = tmp_path / "cfg"
    match = re.escape(str(base)) + r"/run\d/train_tqdm\.py"
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host],
                       jobs=[{"name": "tqdm", "host": host.name, "match": match}])
    runs = []
    watch = None
    try:
        # A job already 8 s into its run (past stall_after = 6 s) when gpuwatch first looks at it.
        first = launch(ssh_env, host, base / "run1", "train_tqdm.py", "--steps", "200", "--step-time", "0.1")
        runs.append(first)
        time.sleep(8.0)
        assert first.log.stat().st_size > 0

        # `gpuwatch status` looks once: it must not call a healthy job stalled (nor `unknown`).
        out = subprocess.run([PYTHON, "-m", "gpuwatch_tui.cli", "status", "--json", "--config", str(cfg)],
                             capture_output=True, text=True, timeout=60, env=ssh_env.environ(), cwd=str(REPO))
        assert out.returncode == 0, out.stderr
        [job] = [j for j in json.loads(out.stdout)["jobs"] if j["name"] == "tqdm"]
        assert job["pids"] == [first.pid]
        assert job["phase"] == "training", job
        assert job["progress"]["total"] == 200 and job["progress"]["step"] > 0, job

        # A second, separate run of the same script (its own session) while the first still runs:
        # its own job, `tqdm#2`; the first keeps `tqdm`.
        second = launch(ssh_env, host, base / "run2", "train_tqdm.py", "--steps", "40", "--step-time", "0.1")
        runs.append(second)
        watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
        watch.wait_for(lambda w: w.job_named("tqdm#2"), "the second run as its own job")

        def both_finished(w):
            a, b = w.job_named("tqdm"), w.job_named("tqdm#2")
            return a and b and a.phase == "finished" and b.phase == "finished"

        watch.wait_for(both_finished, "both runs finished", timeout=60)
        a, b = watch.job_named("tqdm"), watch.job_named("tqdm#2")
        report = watch.describe()
        print(report)
        assert a.last["pids"] == [first.pid] and b.last["pids"] == [second.pid], report
        assert a.last["configured"] and b.last["configured"], report
        assert a.seq[0][0] != "stalled" and not a.has("stalled") and not b.has("stalled"), report
        assert subsequence(a.phases, ["training", "finished"]), report
        assert subsequence(b.phases, ["training", "finished"]), report
        assert b.last["log"] == str(base / "run2" / "train.log"), report
        assert {j["name"] for j in watch.last["jobs"]} == {"tqdm", "tqdm#2"}, report
    finally:
        if watch is not None:
            watch.stop()
        stop_refs([r.ref for r in runs])


@pytest.mark.torch
@pytest.mark.timeout(240)
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_compile_on_cpu_is_compiling_then_training_never_stalled(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host])
    watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
    run = None
    try:
        watch.wait_for(lambda w: w.host(host.name).get("state") == "connected", "the host connected", 20)
        # A cold inductor cache: a real first compile (dynamo, inductor, g++), not a cache hit. Two graphs,
        # so there are several g++ runs; the probe reads each watched process's children live every sample
        # (/proc/PID/task/*/children), so even short compiler runs show up in the evidence.
        run = launch(ssh_env, host, tmp_path / "compile", "compile.py", "--steps", "30", "--step-time", "0.2",
                     "--graphs", "2",
                     env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache")})
        gpu_scenario(host, {0: ("held", run.pid)})  # a CUDA context doing nothing, as while compiling

        def trained(w):
            t = w.job_of(run.pid)
            return t and t.has("compiling") and t.phase in ("training", "finished") and (
                t.phases.index("compiling") < len(t.phases) - 1)

        watch.wait_for(trained, "compiling then training", timeout=150)
        watch.wait_for(lambda w: not run.alive() and w.job_of(run.pid).phase in ENDED, "the run ended", 60)
        t = watch.job_of(run.pid)
        report = watch.describe()
        print(report)
        assert subsequence(t.phases, ["compiling", "training"]), report
        assert not t.has("stalled") and not t.has("crashed"), report
        assert any(re.search(r"compiler processes: .*(g\+\+|cc1plus|gcc)", e) for e in t.evidence), report
        assert t.phase == "finished", report
    finally:
        watch.stop()
        if run is not None:
            stop_refs([run.ref])


@pytest.mark.torch
@pytest.mark.timeout(240)
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torchrun_ranks_are_one_job_from_the_first_frame_and_step_lines_are_training(sshd_factory, ssh_env,
                                                                                     tmp_path):
    """Real torchrun (gloo on CPU, 2 ranks) under nohup; the nvidia-smi stand-in lists both ranks as GPU
    processes from the same sample. The job is published once, launcher and both ranks together (never
    one job per rank), and `[rankN] step N allreduce ok` lines make it training, not `starting` (the
    torchrun banner)."""
    import psutil

    [host] = sshd_factory(1)
    host.set_scenario(gpus=2, phase="idle", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host], stall_after="20s")
    watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
    run = None
    try:
        watch.wait_for(lambda w: w.host(host.name).get("state") == "connected", "the host connected", 20)
        run = launch(ssh_env, host, tmp_path / "ddp", "ddp_steps.py", "--steps", "80", "--step-time", "0.15",
                     "--log-every", "5",
                     launcher=("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"),
                     env={"OMP_NUM_THREADS": "1"})
        agent = run.pid

        def ranks():
            try:
                kids = psutil.Process(agent).children()
            except psutil.Error:
                return None
            found = [k.pid for k in kids if any("ddp_steps.py" in a for a in k.cmdline())]
            return sorted(found) if len(found) == 2 else None

        r0, r1 = watch.wait_for(lambda w: ranks(), "torchrun started its 2 ranks", 60)
        gpu_scenario(host, {0: ("training", r0), 1: ("training", r1)})  # both ranks on their GPUs at once

        training_pids: set[int] = set()

        def trained(w):
            t = w.job_of(r0)
            if t and t.has("training") and t.last["progress"].get("step"):
                training_pids.update(t.last["pids"])
                return True
            return False

        watch.wait_for(trained, "training from the step lines", timeout=90)
        watch.wait_for(lambda w: w.job_of(r0).phase in ENDED, "the run ended", 90)
        report = watch.describe()
        print(report)
        tracks = watch.jobs_of([agent, r0, r1])
        assert len(tracks) == 1, report  # never a job per rank, not even for one frame
        [t] = tracks
        # The launcher (torch loaded, stdout to a file) is the job from its first sample, before its ranks
        # exist; the ranks join that job, never one of their own.
        assert agent in t.first["pids"], t.first["pids"]
        assert {agent, r0, r1} <= training_pids, training_pids
        assert t.first["launcher"] == "torchrun" and t.first["name"] == "ddp_steps.py", t.first
        phases = t.phases
        assert "training" in phases and "starting" not in phases[phases.index("training"):], report
        assert any(re.match(r"log: \[rank\d\] step \d+ allreduce ok", e) for e in t.evidence), report
        assert t.phase == "finished", report
    finally:
        watch.stop()
        if run is not None:
            stop_refs([run.ref])
