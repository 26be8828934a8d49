"""Fixtures shared by the job tracker's tests."""

from __future__ import annotations

import pytest

from gpuwatch_tui.jobs import judging


@pytest.fixture
def judged_at(monkeypatch) -> list:
    """The times at which the tracker judged a job (full judgments, not kept verdicts), in order."""
    times: list = []
    real_judge = judging.judge

    def counting_judge(job, now, skew):
        times.append(now)
        real_judge(job, now, skew)

    monkeypatch.setattr(judging, "judge", counting_judge)
    return times
