"""hosts.example.toml documents every option: it must parse cleanly and name every setting."""

import dataclasses
from pathlib import Path

from gpuwatch_tui.config import HostConfig, JobConfig, Settings, load_config_file
from gpuwatch_tui.actions.settings import ActionSettings

EXAMPLE = Path(__file__).resolve().parent.parent / "hosts.example.toml"


def test_example_parses_without_warnings():
    config = load_config_file(EXAMPLE)
    assert config.warnings == ()
    assert {h.name for h in config.hosts} >= {"trainer-a", "trainer-b", "laptop"}


def test_example_mentions_every_option():
    text = EXAMPLE.read_text()
    # fields derived from others, not keys of their own
    derived = {"host"}
    keys = [f.name for f in dataclasses.fields(Settings)] + [
        f.name for f in dataclasses.fields(HostConfig) if f.name not in derived
    ] + [f.name for f in dataclasses.fields(JobConfig) if f.name != "logs"]
    # [actions]: the config keys drop the settings' "_s" (seconds) suffix; kill_wait_s is not configurable
    keys += [f.name.removesuffix("_s") for f in dataclasses.fields(ActionSettings) if f.name != "kill_wait_s"]
    # commented-out examples ("# port = 2222") count: the option is documented
    missing = [k for k in keys if f"{k} =" not in text]
    assert missing == []
