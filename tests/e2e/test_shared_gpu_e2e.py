"""Two jobs sharing one GPU end to end: a hang and a busy buffered job started over ssh on an sshd test host,
both listed on GPU 0 of its nvidia-smi stand-in (97 % util at ~690 W: the buffered job's work), each with its own
SM share from `nvidia-smi pmon` (the hang 0 %, the buffered job 96 %). Judged by the whole GPU the hang would
look busy; judged by its own share it is stalled, and its evidence says the GPU is shared."""

from __future__ import annotations

import pytest

from .harness import Watch, launch, stop_refs, write_config

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]


def test_a_hang_beside_a_busy_job_on_one_gpu_is_stalled_by_its_own_share(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    host.set_scenario(gpus=1, phase="training", uuid_prefix=f"GPU-{host.name}")
    cfg = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host])
    watch = Watch.start(cfg, ssh_env, tmp_path / "watch.err")
    runs = {}
    try:
        watch.wait_for(lambda w: w.host(host.name).get("state") == "connected", "the host connected", 20)
        runs["hang"] = launch(ssh_env, host, tmp_path / "hang", "hang.py", "--steps", "4", "--step-time", "0.3")
        runs["buffered"] = launch(ssh_env, host, tmp_path / "buffered", "buffered.py", "--steps", "1000",
                                  "--step-time", "0.5")
        host.set_scenario(gpus=1, phase="training", uuid_prefix=f"GPU-{host.name}", processes=[
            {"gpu": 0, "pid": runs["hang"].pid, "used_memory_mib": 20_000, "sm_pct": 0},
            {"gpu": 0, "pid": runs["buffered"].pid, "used_memory_mib": 60_000, "sm_pct": 96}])

        def track(key):
            return watch.job_of(runs[key].pid)

        def done(w):
            hang, buffered = track("hang"), track("buffered")
            return (hang is not None and buffered is not None and hang.has("stalled")
                    and buffered.has("silent", "buffered-stdout"))

        watch.wait_for(done, "the hang stalled and the buffered job silent", timeout=90)
        report = watch.describe()
        hang, buffered = track("hang"), track("buffered")
        assert hang.phase == "stalled" and hang.detail == "no-progress", report
        line = next((e for e in hang.last["evidence"] if e.startswith("GPU0 shared")), None)
        assert line is not None and line.startswith("GPU0 shared with 1 other job: this job 0% SM of the GPU's"), report
        assert not buffered.has("stalled"), report
        assert any("this job 96% SM" in e for e in buffered.last["evidence"]), report
        # status --json gives each process's share on the GPU
        gpu = watch.host(host.name)["gpus"][0]
        shares = {p["pid"]: p.get("sm_pct") for p in gpu["processes"]}
        assert shares == {runs["hang"].pid: 0, runs["buffered"].pid: 96}, gpu
        assert not watch.errors, watch.errors
    finally:
        watch.stop()
        stop_refs([r.ref for r in runs.values()])
