"""[slurm] in the config: defaults, the login forms, and mistakes named by file, key and expectation."""

from __future__ import annotations

import pytest

from gpuwatch_tui.config import parse_config
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.slurm.hosts import node_host, slurm_id_of, with_slurm_jobs
from gpuwatch_tui.slurm.records import SlurmJob


def parse(slurm: dict, hosts: list | None = None):
    return parse_config({"hosts": hosts or [{"name": "me", "local": True}], "slurm": slurm}, "t.toml")


def test_absent_and_defaults():
    assert parse_config({"hosts": [{"name": "me", "local": True}]}, "t.toml").slurm is None
    s = parse({}).slurm
    assert s.is_local and s.login == "local" and s.user is None and s.poll_interval == 10.0
    assert s.sacct and s.queue_format == "text" and s.watch_nodes and s.node_jump == "login"


def test_login_over_ssh_and_node_hosts_jump_through_it():
    cfg = parse({"login": "alice@login1:2222", "poll_interval": "30s", "node_address": {"gpu01": "10.0.0.11"}})
    s = cfg.slurm
    assert not s.is_local and s.login_host.host == "login1" and s.login_host.port == 2222
    assert s.login_host.user == "alice" and s.poll_interval == 30.0
    node = node_host("gpu01", s)
    assert node.name == "gpu01" and node.host == "10.0.0.11" and node.jump == "alice@login1:2222"
    assert node.user == "alice"
    direct = node_host("gpu02", parse({"login": "login1", "node_jump": "none"}).slurm)
    assert direct.host == "gpu02" and direct.jump is None


def test_login_names_a_hosts_entry():
    cfg = parse({"login": "head"}, [{"name": "head", "ssh": "bob@10.1.1.1"}])
    assert cfg.slurm.login_host.name == "head" and cfg.slurm.login_host.user == "bob"


@pytest.mark.parametrize("table, key, words", [
    ({"login": "-oProxyCommand=x"}, "slurm.login", "no leading '-'"),
    ({"login": "a b"}, "slurm.login", "ssh alias"),
    ({"login": "h:99999"}, "slurm.login", "port"),
    ({"user": "al ice"}, "slurm.user", "user name"),
    ({"poll_interval": "2h"}, "slurm.poll_interval", "from 1s to 1h"),
    ({"sacct": "yes"}, "slurm.sacct", "true or false"),
    ({"queue_format": "xml"}, "slurm.queue_format", '"text" or "json"'),
    ({"node_jump": "-J"}, "slurm.node_jump", '"login", "none"'),
    ({"node_address": {"gpu01": "$(reboot)"}}, "slurm.node_address.gpu01", "address"),
    ({"node_address": {"gpu 01": "x"}}, "slurm.node_address.gpu 01", "node name"),
    ({"node_address": "gpu01=x"}, "slurm.node_address", "table"),
])
def test_mistakes_name_file_key_and_expectation(table, key, words):
    with pytest.raises(ConfigError) as info:
        parse(table)
    text = str(info.value)
    assert "t.toml" in text and key in text and words in text, text


def test_unknown_key_warns():
    cfg = parse({"pol_interval": "5s"})
    assert any("slurm.pol_interval" in w and "poll_interval" in w for w in cfg.warnings), cfg.warnings


def test_running_jobs_become_hosts_and_jobs():
    cfg = parse({"node_address": {"n1": "127.0.0.5:2200"}, "node_jump": "none"})
    running = SlurmJob("77", "train", "u", "RUNNING", nodes=("n1", "n2"), raw_id="77",
                       stdout="/l/77.out", stderr="/l/77.out")
    pending = SlurmJob("78", "wait", "u", "PENDING", reason="Resources")
    out = with_slurm_jobs(cfg, [running, pending])
    names = [h.name for h in out.hosts]
    assert names == ["me", "n1", "n2"]
    n1 = out.hosts[1]
    assert (n1.host, n1.port) == ("127.0.0.5", 2200)
    (job,) = out.jobs
    assert job.name == "slurm-77" and job.host == "n1" and job.logs == ("/l/77.out",)
    import re
    assert re.search(job.match, "/bin/sh /var/spool/slurmd/job00077/slurm_script")
    assert not re.search(job.match, "/bin/sh /var/spool/slurmd/job00177/slurm_script")
    assert slurm_id_of(job.name) == "77" and slurm_id_of("train.py") is None


def test_the_example_slurm_section_parses_without_warnings():
    """hosts.example.toml's [slurm] block, uncommented, is a valid config naming every key."""
    import dataclasses
    from pathlib import Path

    from gpuwatch_tui.slurm.settings import SlurmConfig

    text = (Path(__file__).resolve().parents[2] / "hosts.example.toml").read_text()
    block = text[text.index("# [slurm]"):]
    lines = [ln[2:] for ln in block.splitlines() if ln.startswith("# ")]
    from gpuwatch_tui.config import tomllib  # tomli on 3.10

    data = tomllib.loads("\n".join(lines))
    cfg = parse_config({"hosts": [{"name": "me", "local": True}], **data}, "example")
    assert cfg.warnings == () and cfg.slurm.login == "login1"
    documented = set(data["slurm"])
    derived = {"login_host", "node_address"}
    assert {f.name for f in dataclasses.fields(SlurmConfig)} - derived <= documented


def test_missing_key_files_are_named(tmp_path):
    from gpuwatch_tui.config import load_config

    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[[hosts]]\nname = "me"\nlocal = true\n\n[slurm]\nlogin = "login1"\n'
                   f'node_identity_file = "{tmp_path}/nope"\n')
    with pytest.raises(ConfigError, match="slurm.node_identity_file.*existing private key"):
        load_config(str(cfg))
