"""The alert engine over typed views and the time it is given: debounce, once per entry, repeat limit."""

from __future__ import annotations

import pytest

from gpuwatch_tui.alerts import AlertEngine, HostFacts
from gpuwatch_tui.alerts.settings import AlertRule, AlertsConfig, parse_alerts
from gpuwatch_tui.config import parse_config
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.views import JobView


def job(phase, name="train", host="h1", since=0.0, **kw) -> JobView:
    return JobView(id=f"{host}/{name}", name=name, host=host, phase=phase, since=since, **kw)


def engine(*rules, **kw) -> AlertEngine:
    return AlertEngine(AlertsConfig(rules=tuple(rules), **kw))


def test_an_alert_names_the_job_by_its_short_id():
    def run(phase, pid, sid):
        return JobView(id=f"h1:{pid}:1", name="train", host="h1", phase=phase, short_id=sid)

    e = engine(AlertRule(on="stalled"), debounce_s=0)
    e.observe([run("training", 1, "k3xqa"), run("training", 2, "m7rzt")], [], 0)
    fired = e.observe([run("stalled", 1, "k3xqa"), run("training", 2, "m7rzt")], [], 1)
    assert [f.title for f in fired] == ["k3xqa train on h1 stalled"]
    assert fired[0].to_json()["short_id"] == "k3xqa" and fired[0].job == "train"


def test_crash_fires_once_when_seen_entering():
    e = engine(AlertRule(on="crashed"))
    assert e.observe([job("training")], [], 0) == []
    fired = e.observe([job("crashed", exit_code=1, evidence=("exit status 1",))], [], 1)
    assert len(fired) == 1 and fired[0].title == "train on h1 crashed (exit 1)"
    assert fired[0].evidence == ("exit status 1",) and fired[0].sinks == ("toast", "bell")
    assert e.observe([job("crashed")], [], 2) == [] and e.observe([job("crashed")], [], 500) == []


def test_job_first_seen_already_crashed_is_not_news():
    e = engine(AlertRule(on="crashed"))
    assert e.observe([job("crashed")], [], 0) == []
    assert e.observe([job("crashed")], [], 10) == []


def test_stalled_is_debounced_and_a_flap_does_not_fire():
    e = engine(AlertRule(on="stalled"), debounce_s=30)
    e.observe([job("training")], [], 0)
    assert e.observe([job("stalled")], [], 10) == []
    assert e.observe([job("training")], [], 20) == []  # back to work before the debounce passed
    assert e.observe([job("stalled")], [], 30) == []
    assert e.observe([job("stalled")], [], 59) == []
    assert len(e.observe([job("stalled")], [], 60.5)) == 1


def test_repeat_after_limits_the_same_subject():
    e = engine(AlertRule(on="stalled", hold_s=1), repeat_after_s=600)
    e.observe([job("training")], [], 0)
    assert len(e.observe([job("stalled")], [], 1)) == 0
    assert len(e.observe([job("stalled")], [], 2.5)) == 1
    e.observe([job("training")], [], 3)
    e.observe([job("stalled")], [], 4)
    assert e.observe([job("stalled")], [], 10) == []  # re-entered within 10 minutes: quiet
    e.observe([job("training")], [], 700)
    e.observe([job("stalled")], [], 701)
    assert len(e.observe([job("stalled")], [], 703)) == 1


def test_rule_scoped_to_a_job_and_host():
    e = engine(AlertRule(on="finished", job="train-.*", host="gpu[0-9]+"))
    jobs0 = [job("training", "train-a", "gpu1"), job("training", "eval", "gpu1"), job("training", "train-b", "cpu")]
    e.observe(jobs0, [], 0)
    fired = e.observe([job("finished", j.name, j.host) for j in jobs0], [], 1)
    assert [f.subject for f in fired] == ["gpu1/train-a"]


def test_host_leaving_connected_after_being_connected():
    e = engine(AlertRule(on="host-down", hold_s=5))
    assert e.observe([], [HostFacts("h1", "connecting")], 0) == []
    assert e.observe([], [HostFacts("h1", "unreachable", "connection refused")], 1) == []  # never connected
    e2 = engine(AlertRule(on="host-down", hold_s=5))
    e2.observe([], [HostFacts("h1", "connected")], 0)
    e2.observe([], [HostFacts("h1", "stale", "no sample for 6s")], 1)
    assert e2.observe([], [HostFacts("h1", "connected")], 3) == []  # a blip
    e2.observe([], [HostFacts("h1", "reconnecting")], 4)
    fired = e2.observe([], [HostFacts("h1", "unreachable", "timed out")], 9.5)
    assert len(fired) == 1 and fired[0].title == "h1 is unreachable" and fired[0].message == "timed out"


def test_gpu_spin_at_idle_power_for_n_minutes():
    e = engine(AlertRule(on="gpu-spin"), gpu_spin_s=300)
    spin = HostFacts("h1", "connected", gpus=((0, 100.0, 121.0, 700.0), (1, 99.0, 690.0, 700.0)))
    assert e.observe([], [spin], 0) == []
    assert e.observe([], [spin], 299) == []
    fired = e.observe([], [spin], 300)
    assert [f.subject for f in fired] == ["h1:gpu0"]  # gpu1 trains at full power
    assert "121 W of 700 W" in fired[0].message


def test_config_keys_and_clear_errors():
    cfg = parse_config({
        "hosts": [{"name": "h1", "local": True}],
        "jobs": [{"name": "train", "host": "h1", "match": "train.py", "alerts": ["crashed", "stalled"]}],
        "alerts": {"sinks": ["hook"], "debounce": "1m", "hook": {"command": ["/bin/pager", "--json"]},
                   "rules": [{"on": "host-down", "for": "20s", "sinks": ["bell"]}]},
    }, "a.toml")
    rules = cfg.alerts.rules
    assert [(r.on, r.sinks) for r in rules] == [("host-down", ("bell",)), ("crashed", ("hook",)), ("stalled", ("hook",))]
    assert cfg.alerts.debounce_s == 60 and rules[0].hold_s == 20 and cfg.alerts.hook.command == ("/bin/pager", "--json")
    bad = [
        ({"rules": [{"on": "exploded"}]}, "alerts.rules[0].on"),
        ({"rules": [{"on": "crashed", "sinks": ["pager"]}]}, "alerts.rules[0].sinks"),
        ({"rules": [{"on": "crashed", "job": "("}]}, "alerts.rules[0].job"),
        ({"rules": [{"on": "crashed", "sinks": ["webhook"]}]}, "alerts.webhook.url"),
        ({"webhook": {"url": "ftp://x"}}, "alerts.webhook.url"),
        ({"hook": {"command": "page-me $(id)"}}, "alerts.hook.command"),
        ({"debounce": "soon"}, "alerts.debounce"),
        ({"terminal": "vt100"}, "alerts.terminal"),
    ]
    for table, key in bad:
        with pytest.raises(ConfigError) as err:
            parse_alerts(table, [], "a.toml", [])
        assert err.value.key == key and str(err.value).startswith("a.toml: " + key)
    warnings: list[str] = []
    parse_alerts({"debounse": "1m"}, [], "a.toml", warnings)
    assert "did you mean `debounce`" in warnings[0]
