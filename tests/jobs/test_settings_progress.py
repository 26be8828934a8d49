from __future__ import annotations

import pytest

from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.jobs.progress import ProgressTracker, parse_clock, parse_number, parse_rate
from gpuwatch_tui.jobs.settings import JobSettings, JobSpec, parse_duration


@pytest.mark.parametrize("value,seconds", [(300, 300), (90.5, 90.5), ("5m", 300), ("90s", 90), ("1h30m", 5400),
                                           ("300", 300), ("2h", 7200), ("1d", 86400), (" 10 m ", 600)])
def test_parse_duration(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "5 minutes", "m5", -1, 0, True, None, [5], "1h-5m"])
def test_parse_duration_rejects(value):
    with pytest.raises(ConfigError) as info:
        parse_duration(value, "hosts.toml", "settings.stall_after")
    assert info.value.key == "settings.stall_after" and info.value.file == "hosts.toml"


def test_stall_after_per_job_overrides_global():
    spec = JobSpec("train", "gpu1", match="train.py", stall_after_s=900)
    s = JobSettings(stall_after_s=300, jobs=(spec,))
    assert s.stall_after_for(spec) == 900
    assert s.stall_after_for(JobSpec("eval", "gpu1", match="eval.py")) == 300
    assert s.stall_after_for(None) == 300


def test_numbers_clocks_rates():
    assert parse_number("250k") == 250_000 and parse_number("2.00M") == 2_000_000
    assert parse_clock("01:02:03") == 3723 and parse_clock("?") is None
    assert parse_rate("2.42", "Mtok/s") == (2_420_000, "tok/s")
    assert parse_rate("1.30", "s/it") == (1.3, "s/it")


def test_eta_from_bar_rate_and_history():
    t = ProgressTracker()
    t.update({"desc": "", "step": "100", "total": "1100", "rate": "10", "unit": "it/s"}, 1.0)
    assert t.current.eta_s == pytest.approx(100)
    h = ProgressTracker()
    h.update({"step": "100", "total": "1000"}, 0.0)
    h.update({"step": "200", "total": "1000"}, 100.0)
    assert h.current.eta_s == pytest.approx(800)
    assert len(h.history) == 2


def test_a_nested_eval_bar_does_not_replace_the_training_bar():
    t = ProgressTracker()
    t.update({"desc": "", "step": "40", "total": "1000", "rate": "5", "unit": "it/s"}, 1.0)
    t.update({"desc": "", "step": "3", "total": "50", "rate": "20", "unit": "it/s"}, 2.0)
    assert (t.current.step, t.current.total, t.current.rate) == (40, 1000, 5)
    t.update({"desc": "", "step": "41", "total": "1000"}, 3.0)
    assert t.current.step == 41


def test_json_has_no_nan():
    t = ProgressTracker()
    t.update({"loss": "nan"}, 1.0)
    j = t.current.to_json()
    assert j["loss"] is None and j["loss_text"] == "nan"
