"""The culprit rules on rank facts: a process stopped / gone / zombie / in D, a GPU idle among spinning
ones (the H200 figures), a host log that went quiet first; and nobody blamed when nothing stands out."""

from __future__ import annotations

from gpuwatch_tui.jobs.culprit import find_culprit, rank_list
from gpuwatch_tui.views import RankView

NOW = 10_000.0


def rank(i: int, host: str, **kw) -> RankView:
    base = dict(host=host, pid=100 + i, rank=i, state="S", util_pct=None, power_w=None, last_log_at=NOW - 5)
    return RankView(**{**base, **kw})


def eight(**override) -> list[RankView]:
    ranks = [rank(i, f"node-{'ab'[i // 4]}", util_pct=100.0, power_w=128.0, power_limit_w=700.0, gpus=(i % 4,))
             for i in range(8)]
    for i, kw in override.items():
        ranks[int(i[1:])] = RankView(**{**ranks[int(i[1:])].__dict__, **kw})
    return ranks


def test_rank_lists_fold_runs():
    ranks = [rank(i, "h") for i in (0, 1, 2, 4, 5, 6, 7)]
    assert rank_list(ranks) == "ranks 0-2,4-7" and rank_list(ranks[:1]) == "rank 0"


def test_a_stopped_rank_among_spinning_ones():
    c = find_culprit(eight(r3=dict(state="T", util_pct=0.0, power_w=124.0)), NOW)
    assert c.summary == ("rank 3 on node-a: process stopped (T); ranks 0-2,4-7 spinning in a collective "
                         "(GPU ~100 % util at 128 W)")
    assert list(c.notes) == [3] and "SIGCONT" in c.advice


def test_gone_zombie_and_d_state_are_named():
    for state, words in (("gone", "process gone"), ("Z", "zombie"), ("D", "uninterruptible sleep (D)")):
        c = find_culprit([rank(0, "a"), rank(1, "b", state=state)], NOW)
        assert c is not None and c.summary.startswith(f"rank 1 on b: ") and words in c.summary, c


def test_every_rank_in_d_blames_nobody_by_state():
    assert find_culprit([rank(0, "a", state="D"), rank(1, "b", state="D")], NOW) is None


def test_the_idle_gpu_among_spinning_ones_recorded_h200_numbers():
    # nccl_spin window: rank 0 at 100 % / 128.2 W, rank 1 (stopped itself) at 0 % / 124.4 W, limit 700 W.
    ranks = [rank(0, "a", util_pct=100.0, power_w=128.2, power_limit_w=700.0, gpus=(0,)),
             rank(1, "b", util_pct=0.0, power_w=124.4, power_limit_w=700.0, gpus=(1,))]
    c = find_culprit(ranks, NOW)
    assert c.summary == "rank 1 on b: GPU 1 at 0 % util; rank 0 spinning in a collective (GPU ~100 % util at 128 W)"


def test_real_work_is_not_spinning():
    # The same window while training: 90-95 % util at ~255-260 W (37 % of the limit) on both GPUs.
    ranks = [rank(0, "a", util_pct=90.0, power_w=260.1, power_limit_w=700.0, gpus=(0,)),
             rank(1, "b", util_pct=0.0, power_w=255.2, power_limit_w=700.0, gpus=(1,))]
    assert find_culprit(ranks, NOW) is None


def test_the_host_log_that_went_quiet_first():
    ranks = [rank(0, "a", last_log_at=NOW - 3), rank(1, "b", last_log_at=NOW - 95)]
    c = find_culprit(ranks, NOW)
    assert c.summary == "rank 1 on b: its log went quiet first (95 s ago; the others 3 s ago)"
    assert find_culprit([rank(0, "a", last_log_at=NOW - 3), rank(1, "b", last_log_at=NOW - 9)], NOW) is None
