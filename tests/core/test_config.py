"""Config: every mistake names file, key and what was expected, in-process and through the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwatch_tui.config import HostConfig, load_config, load_config_file, parse_config
from gpuwatch_tui.errors import ConfigError
from gpuwatch_tui.transport.probe_bundle import remote_command

MINIMAL_OK = '[[hosts]]\nname = "trainer-a"\nssh = "trainer-a"\n'

# (id, file text, key the message must name, words of what was expected)
MISTAKES = [
    ("toml-syntax", '[[hosts]\nname = "a"\n', "(syntax)", "valid TOML"),
    ("settings-not-table", "settings = 3\n", "settings", "a table"),
    ("interval-type", '[settings]\nsample_interval = "fast"\n', "settings.sample_interval", "a number from 0.1"),
    ("interval-range", "[settings]\nsample_interval = 0\n", "settings.sample_interval", "a number from 0.1"),
    ("interval-bool", "[settings]\nsample_interval = true\n", "settings.sample_interval", "a number"),
    ("history-float", "[settings]\nhistory = 1.5\n", "settings.history", "a whole number"),
    ("connect-timeout", "[settings]\nconnect_timeout = -1\n", "settings.connect_timeout", "a number"),
    ("keepalive-count", "[settings]\nkeepalive_count_max = 0\n", "settings.keepalive_count_max", "a whole number"),
    ("ssh-config-type", "[settings]\nssh_config = 3\n", "settings.ssh_config", "a string or a list of strings"),
    ("known-hosts-type", "[settings]\nknown_hosts = []\n", "settings.known_hosts", "a string"),
    ("readonly-type", '[settings]\nreadonly = "yes"\n', "settings.readonly", "true or false"),
    ("stall-after", '[settings]\nstall_after = "5 parsecs"\n', "settings.stall_after", "a duration"),
    ("hosts-not-array", 'hosts = "trainer-a"\n', "hosts", "an array of tables"),
    ("host-not-table", "hosts = [1]\n", "hosts[0]", "a table"),
    ("host-no-name", '[[hosts]]\nssh = "a"\n', "hosts[0].name", "required"),
    ("host-name-type", '[[hosts]]\nname = 3\nssh = "a"\n', "hosts[0].name", "a string"),
    ("host-name-shell", '[[hosts]]\nname = "a;rm -rf ~"\nssh = "a"\n', "hosts[0].name", "letters, digits"),
    ("host-name-subst", '[[hosts]]\nname = "$(touch x)"\nssh = "a"\n', "hosts[0].name", "letters, digits"),
    ("host-no-target", '[[hosts]]\nname = "a"\n', "hosts[0].ssh", "an ssh target"),
    ("local-and-ssh", '[[hosts]]\nname = "a"\nlocal = true\nssh = "a"\n', "hosts[0].ssh", "no ssh target"),
    ("local-type", '[[hosts]]\nname = "a"\nlocal = "yes"\n', "hosts[0].local", "true or false"),
    ("ssh-space", '[[hosts]]\nname = "a"\nssh = "a b"\n', "hosts[0].ssh", "an ssh alias or user@host:port"),
    ("ssh-shell", '[[hosts]]\nname = "a"\nssh = "a;touch${IFS}x"\n', "hosts[0].ssh", "an ssh alias"),
    ("ssh-backtick", '[[hosts]]\nname = "a"\nssh = "`id`@h"\n', "hosts[0].ssh", "an ssh alias"),
    ("ssh-option", '[[hosts]]\nname = "a"\nssh = "-oProxyCommand=x"\n', "hosts[0].ssh", "no leading '-'"),
    ("ssh-port-word", '[[hosts]]\nname = "a"\nssh = "u@h:ssh"\n', "hosts[0].ssh", "numeric port"),
    ("ssh-port-range", '[[hosts]]\nname = "a"\nssh = "u@h:70000"\n', "hosts[0].ssh", "a port number"),
    ("ssh-no-host", '[[hosts]]\nname = "a"\nssh = "u@"\n', "hosts[0].ssh", "a host name"),
    ("port-range", '[[hosts]]\nname = "a"\nssh = "h"\nport = 0\n', "hosts[0].port", "a port number"),
    ("port-type", '[[hosts]]\nname = "a"\nssh = "h"\nport = "22"\n', "hosts[0].port", "a port number"),
    ("user-shell", '[[hosts]]\nname = "a"\nssh = "h"\nuser = "me;id"\n', "hosts[0].user", "a user name"),
    ("identity-type", '[[hosts]]\nname = "a"\nssh = "h"\nidentity_file = 1\n', "hosts[0].identity_file", "a string"),
    ("jump-space", '[[hosts]]\nname = "a"\nssh = "h"\njump = "b c"\n', "hosts[0].jump", "an ssh alias"),
    ("jump-shell", '[[hosts]]\nname = "a"\nssh = "h"\njump = "b|nc x"\n', "hosts[0].jump", "an ssh alias"),
    ("jump-port", '[[hosts]]\nname = "a"\nssh = "h"\njump = "b:x"\n', "hosts[0].jump", "numeric port"),
    ("prefix-type", '[[hosts]]\nname = "a"\nssh = "h"\nprefix = 3\n', "hosts[0].prefix", "a command prefix"),
    ("prefix-quote", '[[hosts]]\nname = "a"\nssh = "h"\nprefix = "docker exec \'x"\n', "hosts[0].prefix", "shell words"),
    ("python-empty", '[[hosts]]\nname = "a"\nssh = "h"\npython = " "\n', "hosts[0].python", "an interpreter"),
    ("env-type", '[[hosts]]\nname = "a"\nssh = "h"\nenv = "X=1"\n', "hosts[0].env", "a table"),
    ("env-name", '[[hosts]]\nname = "a"\nssh = "h"\nenv = {"BAD-NAME" = "1"}\n', "hosts[0].env.BAD-NAME", "an environment variable name"),
    ("env-name-shell", '[[hosts]]\nname = "a"\nssh = "h"\nenv = {"X;id" = "1"}\n', "hosts[0].env.X;id", "an environment variable name"),
    ("env-value", '[[hosts]]\nname = "a"\nssh = "h"\nenv = {X = 3}\n', "hosts[0].env.X", "a string value"),
    ("gpu-source", '[[hosts]]\nname = "a"\nssh = "h"\ngpu_source = "cuda"\n', "hosts[0].gpu_source", "one of auto, nvml"),
    ("duplicate", '[[hosts]]\nname = "a"\nssh = "h"\n[[hosts]]\nname = "a"\nssh = "g"\n', "hosts[1].name", "not used by another host"),
    ("second-host", '[[hosts]]\nname = "a"\nssh = "h"\n[[hosts]]\nname = "b"\nssh = "g"\nport = 99999\n', "hosts[1].port", "a port number"),
    ("jobs-host", '[[hosts]]\nname = "a"\nssh = "h"\n[[jobs]]\nname = "j"\nhost = "zz"\nmatch = "x"\n', "jobs[0].host", "the name of a host"),
]


@pytest.mark.parametrize("text,key,expected", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_mistake_names_file_key_expected(tmp_path, text, key, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    err = info.value
    assert err.file == str(path)
    assert err.key == key
    assert expected in err.expected
    message = str(err)
    assert message.startswith(f"{path}: {key}: expected ")
    assert "\n" not in message


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: \(file\): expected an existing file"):
        load_config_file(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"\(file\): expected a readable file"):
        load_config_file(tmp_path)  # a directory
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[[hosts]]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"\(file\): expected UTF-8 text"):
        load_config_file(bad)


def test_minimal_form_and_targets(tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text(MINIMAL_OK + '[[hosts]]\nname = "b"\nssh = "alice@10.0.0.5:2222"\n'
                    '[[hosts]]\nname = "c"\nssh = "[::1]:2200"\n[[hosts]]\nname = "me"\nlocal = true\n')
    cfg = load_config_file(path)
    a, b, c, me = cfg.hosts
    assert a == HostConfig(name="trainer-a", ssh="trainer-a", host="trainer-a")
    assert (b.user, b.host, b.port) == ("alice", "10.0.0.5", 2222)
    assert (c.host, c.port) == ("::1", 2200)
    assert me.local and me.ssh is None
    assert cfg.warnings == ()


def test_every_host_option_typed():
    cfg = parse_config({
        "settings": {"sample_interval": 0.5, "history": 60},
        "hosts": [{
            "name": "t", "ssh": "t-alias", "port": 2022, "user": "bob", "identity_file": "~/.ssh/id_x",
            "jump": "bastion,inner:2200", "prefix": "docker exec -i trainer", "python": "/opt/py/bin/python3",
            "env": {"CUDA_VISIBLE_DEVICES": "0,1"}, "gpu_source": "nvidia-smi",
        }],
    }, "x.toml")
    (h,) = cfg.hosts
    assert cfg.settings.sample_interval == 0.5 and cfg.settings.history == 60
    assert (h.port, h.user, h.identity_file, h.jump) == (2022, "bob", "~/.ssh/id_x", "bastion,inner:2200")
    assert h.prefix == ("docker", "exec", "-i", "trainer")
    assert h.python == "/opt/py/bin/python3" and h.env == (("CUDA_VISIBLE_DEVICES", "0,1"),)


def test_unknown_keys_are_warned_not_fatal():
    cfg = parse_config({"colour": 1, "settings": {"sample_intervall": 2},
                        "hosts": [{"name": "a", "ssh": "a", "hots": 1}]}, "w.toml")
    assert cfg.hosts[0].name == "a"
    assert "w.toml: colour: unknown key, ignored" in cfg.warnings
    assert "w.toml: settings.sample_intervall: unknown key, ignored (did you mean `sample_interval`?)" in cfg.warnings
    assert "w.toml: hosts[0].hots: unknown key, ignored" in cfg.warnings  # nothing close: no guess


@pytest.mark.parametrize("table, typo, meant", [
    ("settings", "stal_after", "stall_after"), ("settings", "Readonly", "readonly"),
    ("hosts", "identityfile", "identity_file"), ("hosts", "gpu-source", "gpu_source"),
    ("jobs", "output_directory", "output_dir"), ("jobs", "mach", "match"),
])
def test_unknown_key_close_to_a_known_one_says_did_you_mean(table, typo, meant):
    data = {"hosts": [{"name": "a", "ssh": "a"}], "jobs": [{"name": "j", "host": "a", "match": "x"}]}
    target = data.setdefault(table, {}) if table == "settings" else data[table][0]
    target[typo] = 1
    (warning,) = parse_config(data, "w.toml").warnings
    assert warning.endswith(f"{typo}: unknown key, ignored (did you mean `{meant}`?)"), warning
    top = parse_config({"host": [], "hosts": [{"name": "a", "ssh": "a"}]}, "w.toml").warnings
    assert top == ("w.toml: host: unknown key, ignored (did you mean `hosts`?)",)


def test_a_utf8_bom_at_the_start_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + MINIMAL_OK.encode())
    assert load_config_file(path).hosts[0].name == "trainer-a"


def test_missing_identity_file_is_a_config_error_naming_file_and_key(tmp_path):
    key = tmp_path / "id_ed25519"
    path = tmp_path / "hosts.toml"
    path.write_text(MINIMAL_OK + f'identity_file = "{key}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert (info.value.file, info.value.key) == (str(path), "hosts[0].identity_file")
    assert "not found" in info.value.expected
    r = _cli(["status", "--config", str(path)], _clean_env(tmp_path))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"gpuwatch: config error: {path}: hosts[0].identity_file: expected an existing "
                                f"private key file (it was not found), got '{key}'")
    key.write_text("not really a key, but it exists\n")
    assert load_config(str(path)).hosts[0].identity_file == str(key)


def test_remote_command_quotes_everything(tmp_path, monkeypatch):
    import shlex

    from gpuwatch_tui.transport import probe_bundle as bundle

    pwned = tmp_path / "pwned"
    hostile = f"$(touch {pwned})`touch {pwned}`;touch {pwned} 'x' \"y\" && touch {pwned}"
    cmd = remote_command("/opt/my python/bin/python3", ["docker", "exec", "-i", "a b"], {"X": hostile})
    words = shlex.split(cmd)
    assert words[:4] == ["docker", "exec", "-i", "a b"]
    assert words[4:6] == ["env", f"X={hostile}"]
    assert words[6] == "/opt/my python/bin/python3" and words[7] == "-c"
    # Through a real shell (as sshd runs it), with a program that prints X in place of the probe.
    monkeypatch.setattr(bundle, "BOOTSTRAP", "import os,sys;sys.stdout.write(os.environ['X'])")
    cmd = remote_command(sys.executable, ["env", "A=1"], {"X": hostile})
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == hostile
    assert not pwned.exists()


# -------------------------------------------------------------------- lookup order

def _cli(args, env, timeout=60):
    return subprocess.run([sys.executable, "-m", "gpuwatch_tui.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def _clean_env(tmp_path) -> dict:
    env = dict(os.environ)
    env.pop("GPUWATCH_CONFIG", None)
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUWATCH_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path))
    # nothing anywhere: this machine
    cfg = load_config(None)
    assert cfg.path is None and len(cfg.hosts) == 1 and cfg.hosts[0].local
    xdg = tmp_path / "xdg" / "gpuwatch" / "hosts.toml"
    xdg.parent.mkdir(parents=True)
    xdg.write_text('[[hosts]]\nname = "from-xdg"\nssh = "x"\n')
    assert load_config(None).hosts[0].name == "from-xdg"
    envf = tmp_path / "env.toml"
    envf.write_text('[[hosts]]\nname = "from-env"\nssh = "x"\n')
    monkeypatch.setenv("GPUWATCH_CONFIG", str(envf))
    assert load_config(None).hosts[0].name == "from-env"
    cli = tmp_path / "cli.toml"
    cli.write_text('[[hosts]]\nname = "from-cli"\nssh = "x"\n')
    assert load_config(str(cli)).hosts[0].name == "from-cli"


@pytest.mark.parametrize("case", ["interval-type", "host-name-shell", "ssh-shell", "env-name", "toml-syntax", "jump-port"])
def test_cli_status_bad_config_exit_2_one_line(tmp_path, case):
    text, key, expected = next(m[1:] for m in MISTAKES if m[0] == case)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    r = _cli(["status", "--config", str(path)], _clean_env(tmp_path))
    assert r.returncode == 2, r
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"gpuwatch: config error: {path}: {key}: expected ")
    assert expected in lines[0]
    assert "Traceback" not in r.stderr


def test_cli_bad_config_through_env_and_missing_file(tmp_path):
    env = _clean_env(tmp_path)
    env["GPUWATCH_CONFIG"] = str(tmp_path / "missing.toml")
    r = _cli(["status", "--json"], env)
    assert r.returncode == 2
    assert r.stderr.strip() == f"gpuwatch: config error: {tmp_path / 'missing.toml'}: (file): expected an existing file (it was not found)"
    r = _cli(["watch", "--json", "--config", str(tmp_path)], env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
