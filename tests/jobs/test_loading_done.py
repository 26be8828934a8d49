"""A checkpoint-shard bar that reached its total with the GPU computing since (100% util at ~690 W on an H200)
is training, not `loading` until the job's first line of its own; a bar still short of its total, or a full
bar with the GPU held idle (~119 W: the model moving to the GPU), stays loading."""

from __future__ import annotations

from gpuwatch_tui.jobs.observation import LogFacts

from .test_phase import T0, h200, hint, obs, series, verdict_at


def loading(step: str, total: str, gpu_after_bar):
    bar_at = T0 + 60.0
    now = bar_at + 40.0
    samples = series(T0, now - T0, step=2.0, cores=1.0,
                     gpus=lambda t: (gpu_after_bar if t > bar_at + 5 else h200(),))
    log = LogFacts(path="/work/run/train.log", total_bytes=2048, last_growth_at=bar_at,
                   hint=hint("loading", T0 + 10.0, "checkpoint-shards", "Loading checkpoint shards: 100%"),
                   phase_progress={"step": step, "total": total, "desc": "Loading checkpoint shards"},
                   phase_progress_phase="loading")
    return verdict_at(obs(samples, log=log), now)


def test_a_full_bar_with_the_gpu_computing_is_training():
    v = loading("4", "4", h200(util=100.0, power=690.0))
    assert v.phase == "training", v
    assert "log: Loading checkpoint shards 4/4 (done)" in v.evidence
    assert any(e.startswith("GPUs computing since") for e in v.evidence)


def test_a_bar_short_of_its_total_or_a_gpu_held_idle_stays_loading():
    assert loading("3", "4", h200(util=100.0, power=690.0)).phase == "loading"
    assert loading("4", "4", h200(util=0.0, power=119.0)).phase == "loading"
