"""Random and hostile configs: each either loads or gives ONE ConfigError naming the file and a key.

Never another exception (a KeyError, TypeError, re.error, ValueError... would reach the user as a
traceback). Both the parsed-dict path (parse_config) and the file path (load_config_file: TOML
text, encodings, syntax) are fuzzed.
"""

from __future__ import annotations

import string

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuwatch_tui.config import Config, load_config_file, parse_config  # noqa: E402
from gpuwatch_tui.errors import ConfigError  # noqa: E402

FILE = "fuzz.toml"
HOSTILE_TEXT = ["", " ", "$(touch /tmp/x)", "`id`", ";rm -rf /", "a\nb", "\x00", "\x1b]0;t\x07", "[bold]x[/]",
                "((((", "[", "*", "(?P<x", "\\", "é", "\u202e", "1e999", "-1", "nan", "inf", "0", "10s", "5m",
                "0s", "-5s", "x" * 5000, "~/../../etc/passwd", "host:99999", "user@", "@host", "[::1]:22"]

SETTINGS_KEYS = ["sample_interval", "connect_timeout", "keepalive_interval", "keepalive_count_max",
                 "reconnect_initial_delay", "reconnect_max_delay", "stale_after", "stall_after", "history",
                 "known_hosts", "ssh_config", "max_concurrent_connects", "readonly", "theme", "tail_lines",
                 "ended_job_ttl", "nope"]
HOST_KEYS = ["name", "ssh", "local", "user", "port", "identity_file", "jump", "python", "prefix", "env",
             "gpu_source", "pyspy_sudo", "unknown_key"]
JOB_KEYS = ["name", "host", "match", "log", "output_dir", "pid_file", "stall_after", "alerts", "restart", "env"]

leaf = st.one_of(
    st.sampled_from(HOSTILE_TEXT), st.text(max_size=30), st.integers(), st.floats(allow_nan=True),
    st.booleans(), st.none(), st.binary(max_size=10),
)
value = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(st.text(string.ascii_lowercase, max_size=8),
                                                                    inner, max_size=3)), max_leaves=6)


def table(keys):
    return st.dictionaries(st.sampled_from(keys), value, max_size=len(keys))


config_dict = st.fixed_dictionaries({}, optional={
    "settings": st.one_of(table(SETTINGS_KEYS), value),
    "hosts": st.one_of(st.lists(table(HOST_KEYS), max_size=3), value),
    "jobs": st.one_of(st.lists(table(JOB_KEYS), max_size=3), value),
    "actions": st.one_of(st.dictionaries(st.text(max_size=10), value, max_size=3), value),
    "alerts": st.one_of(st.dictionaries(st.text(max_size=10), value, max_size=3), value),
    "rules": value, "sources": value, "export": value, "extra": value,
})


def check(call) -> None:
    try:
        result = call()
    except ConfigError as exc:
        text = str(exc)
        assert text.startswith(FILE) or FILE in text, text
        assert exc.key, text  # which key (or "(syntax)"/"(file)") is always named
        assert "Traceback" not in text
        return
    assert isinstance(result, Config)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config_dict)
def test_random_config_dicts_load_or_name_file_and_key(data):
    check(lambda: parse_config(data, FILE))


def _toml_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


toml_line = st.one_of(
    st.builds(lambda k, v: f"{k} = {_toml_scalar(v)}", st.sampled_from(SETTINGS_KEYS + HOST_KEYS + JOB_KEYS),
              st.one_of(st.sampled_from(HOSTILE_TEXT), st.integers(-10, 10**6), st.booleans())),
    st.sampled_from(["[settings]", "[[hosts]]", "[[jobs]]", "[actions]", "[alerts]", "[[sources]]", "[export]",
                     "[hosts]", "hosts = 3", "[[settings]]", "= 1", "a = ", "[", "\"unterminated", "x = 1\nx = 2"]),
    st.text(max_size=20),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(toml_line, max_size=12), st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16"]))
def test_random_toml_files_load_or_name_file_and_key(tmp_path_factory, lines, encoding):
    path = tmp_path_factory.mktemp("cfg") / FILE
    path.write_bytes("\n".join(lines).encode(encoding, errors="replace"))
    check(lambda: load_config_file(path))


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=200))
def test_binary_garbage_files(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("cfg") / FILE
    path.write_bytes(raw)
    check(lambda: load_config_file(path))
