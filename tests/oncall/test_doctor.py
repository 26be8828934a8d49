"""`gpuwatch doctor` against real OpenSSH sshd hosts on loopback and the real probe."""

from __future__ import annotations

import json
import os
import socket

import pytest

from gpuwatch_tui.cli import EXIT_DOCTOR_FAILED, EXIT_OK, main
from gpuwatch_tui.doctor import CHECK_NAMES
from gpuwatch_tui.verbs.doctor import render_doctor, run_doctor
from gpuwatch_tui.doctor.host_checks import clock_check, ptrace_check
from tests.core.helpers import host_entry, make_config, probes_on, settings_for, write_toml


def by_name(report):
    return {c.name: c for c in report.checks}


async def test_good_host_passes_every_check(sshd_factory, ssh_env):
    (good,) = sshd_factory(1)
    cfg = make_config(ssh_env, [host_entry(good)])
    (report,) = await run_doctor(cfg)
    checks = by_name(report)
    assert tuple(checks) == CHECK_NAMES
    assert checks["reachability"].status == "pass" and checks["reachability"].facts["banner"].startswith("SSH-2.0-")
    assert checks["host-key"].status == "pass" and good.host_key_fingerprint in checks["host-key"].summary
    assert checks["authentication"].status == "pass" and good.user in checks["authentication"].summary
    assert checks["python"].status == "pass" and checks["python"].facts["version"].startswith("3.")
    assert checks["gpu-source"].status == "pass" and checks["gpu-source"].facts["source"] == "nvidia-smi"
    assert checks["channel-headroom"].status == "pass"
    assert checks["channel-headroom"].facts["extra_sessions_opened"] == 4  # MaxSessions 10: the bound
    assert checks["clock-skew"].status == "pass" and abs(checks["clock-skew"].facts["skew_s"]) < 1
    assert checks["ptrace"].status in ("pass", "warn")
    assert report.status != "fail", report.to_json()
    assert not probes_on(good)  # the probe and every extra channel were closed


async def test_max_sessions_2_is_a_warning_with_the_limit(sshd_factory, ssh_env):
    (tight,) = sshd_factory(1, max_sessions=2)
    (report,) = await run_doctor(make_config(ssh_env, [host_entry(tight)]))
    headroom = by_name(report)["channel-headroom"]
    assert headroom.status == "warn", headroom
    assert headroom.facts["extra_sessions_opened"] == 1 and headroom.facts["max_sessions_seen"] == 2
    assert "MaxSessions" in headroom.summary and "MaxSessions" in headroom.fix
    # every channel opened for the test was closed again: a second run finds the same headroom
    (again,) = await run_doctor(make_config(ssh_env, [host_entry(tight)]))
    assert by_name(again)["channel-headroom"].facts["extra_sessions_opened"] == 1


async def test_max_sessions_1_fails(sshd_factory, ssh_env):
    (full,) = sshd_factory(1, max_sessions=1)
    (report,) = await run_doctor(make_config(ssh_env, [host_entry(full)]))
    headroom = by_name(report)["channel-headroom"]
    assert headroom.status == "fail" and headroom.facts["extra_sessions_opened"] == 0
    assert report.status == "fail"


async def test_wrong_key_unknown_host_key_changed_key_and_dead_host(sshd_factory, ssh_env, ssh_keys, tmp_path):
    from tests.support.sshd import write_known_hosts

    a, b, c = sshd_factory(3)
    kh = write_known_hosts(tmp_path / "known_hosts", [c, (b.address, b.port, a)], aliases=False)
    ident = str(ssh_env.identity_file)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.9", 0))
        dead_port = s.getsockname()[1]
    hosts = [
        {"name": "unknown", "ssh": f"{a.user}@{a.address}:{a.port}", "identity_file": ident},
        {"name": "changed", "ssh": f"{b.user}@{b.address}:{b.port}", "identity_file": ident},
        {"name": "badkey", "ssh": f"{c.user}@{c.address}:{c.port}", "identity_file": str(ssh_keys.wrong_private_key)},
        {"name": "dead", "ssh": f"{c.user}@127.0.0.9:{dead_port}", "identity_file": ident},
    ]
    raw = await run_doctor(make_config(ssh_env, hosts, known_hosts=str(kh)))
    reports = {r.host: by_name(r) for r in raw}
    # On an 80-column terminal each fingerprint is on one line, whole, and so is the command that trusts it.
    lines = render_doctor(raw, width=80).splitlines()
    for key in (a.host_key_fingerprint, b.host_key_fingerprint):
        assert any(key in line and len(line) <= 80 for line in lines), "\n".join(lines)
    assert any("ssh-keyscan" in line for line in lines)
    assert all(len(line) <= 80 for line in lines if " " in line.strip()), "\n".join(lines)
    unknown = reports["unknown"]["host-key"]
    assert unknown.status == "fail" and unknown.facts["state"] == "unknown"
    assert a.host_key_fingerprint in unknown.summary and "ssh-keyscan" in unknown.fix
    assert reports["unknown"]["authentication"].status == "skip"
    changed = reports["changed"]["host-key"]
    assert changed.status == "fail" and changed.facts["state"] == "changed"
    assert b.host_key_fingerprint in changed.summary and "ssh-keygen -R" in changed.fix
    assert reports["badkey"]["host-key"].status == "pass"
    assert reports["badkey"]["authentication"].status == "fail"
    assert "authorized_keys" in reports["badkey"]["authentication"].fix
    assert reports["dead"]["reachability"].status == "fail"
    assert "refused" in reports["dead"]["reachability"].summary
    for name in ("unknown", "changed", "badkey", "dead"):
        assert reports[name]["python"].status == "skip"
    for h in (a, b):  # never logged in where the key was not trusted
        assert "Accepted publickey" not in h.log_text()


async def test_pyspy_absent_from_path_is_uploadable(sshd_factory, ssh_env):
    from gpuwatch_tui.actions.pyspy_binary import local_pyspy

    mine = local_pyspy()  # the test extra installs py-spy: this machine has the binary to upload
    (host,) = sshd_factory(1)
    (report,) = await run_doctor(make_config(ssh_env, [host_entry(host)]))
    pyspy = by_name(report)["py-spy"]
    assert pyspy.facts["path"] is None  # the host's PATH is the fake-smi dir and /usr/bin: no py-spy
    assert pyspy.status == "pass" and "uploaded on the first dump" in pyspy.summary
    assert pyspy.facts["uploadable"]["machine"] == mine.machine
    # the same py-spy on the host's PATH is found there
    link_dir = host.dir / "pyspy-bin"
    link_dir.mkdir()
    os.symlink(mine.path, link_dir / "py-spy")
    host.set_path([str(host.bin_dir), str(link_dir), "/usr/bin", "/bin"])
    (report,) = await run_doctor(make_config(ssh_env, [host_entry(host)]))
    assert by_name(report)["py-spy"].facts["path"] == str(link_dir / "py-spy")


def test_cli_exit_status_and_json(sshd_factory, ssh_env, tmp_path, capsys):
    good, other = sshd_factory(2)
    cfg = write_toml(tmp_path / "hosts.toml", settings_for(ssh_env), [host_entry(good)])
    assert main(["doctor", "--json", "--config", str(cfg)]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["version"] == 1 and out["ok"] is True and out["counts"]["fail"] == 0
    assert [c["name"] for c in out["hosts"][0]["checks"]] == list(CHECK_NAMES)
    other.stop()
    cfg = write_toml(tmp_path / "two.toml", settings_for(ssh_env), [host_entry(good), host_entry(other)])
    assert main(["doctor", "--config", str(cfg)]) == EXIT_DOCTOR_FAILED
    text = capsys.readouterr().out
    assert f"{other.name}: fail" in text and "[FAIL] reachability" in text and "->" in text


def test_local_host_skips_ssh_checks(tmp_path, capsys):
    cfg = tmp_path / "local.toml"
    cfg.write_text('[settings]\nsample_interval = 0.2\n[[hosts]]\nname = "here"\nlocal = true\ngpu_source = "none"\n')
    code = main(["doctor", "--json", "--config", str(cfg)])
    out = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in out["hosts"][0]["checks"]}
    assert checks["authentication"]["status"] == "skip" and checks["channel-headroom"]["status"] == "skip"
    assert checks["python"]["status"] == "pass" and checks["gpu-source"]["status"] == "warn"
    assert code == EXIT_OK  # warnings alone do not fail


@pytest.mark.parametrize("skew,status", [(0.1, "pass"), (-5.0, "warn"), (300.0, "fail")])
def test_clock_thresholds(skew, status):
    check = clock_check([skew, skew, skew])
    assert check.status == status
    assert ("behind" if skew < 0 else "ahead") in check.summary


@pytest.mark.parametrize("facts,status,word", [
    ({"ptrace_scope": 1, "root": False, "cap_sys_ptrace": False}, "warn", "ptrace_scope=0"),
    ({"ptrace_scope": 0, "root": False, "cap_sys_ptrace": False}, "pass", ""),
    ({"ptrace_scope": 2, "root": True, "cap_sys_ptrace": True}, "pass", ""),
    ({"ptrace_scope": 1, "root": True, "cap_sys_ptrace": False, "container": True}, "warn", "SYS_PTRACE"),
    ({"ptrace_scope": 3, "root": False, "cap_sys_ptrace": False}, "warn", "reboot"),
])
def test_ptrace_words(facts, status, word):
    check = ptrace_check(facts)
    assert check.status == status and word in check.fix


def _local_smi_config(tmp_path, **scenario):
    from tests.support.fake_nvidia_smi import install_fake_nvidia_smi
    from tests.support.fake_smi_scenario import write_scenario

    install_fake_nvidia_smi(tmp_path / "bin")
    write_scenario(tmp_path / "smi.json", gpus=1, **scenario)
    cfg = tmp_path / "local.toml"
    cfg.write_text('[settings]\nsample_interval = 0.3\n[[hosts]]\nname = "here"\nlocal = true\n'
                   f'env = {{ PATH = "{tmp_path / "bin"}:/usr/bin:/bin", GPUWATCH_FAKE_SMI = "{tmp_path / "smi.json"}" }}\n')
    return cfg


@pytest.mark.parametrize("scenario", [{"fail": True}, {"exit_after_ticks": 2, "exit_code": 9}],
                         ids=["fails-at-start", "fails-after-two-ticks"])
def test_a_failing_gpu_source_fails_the_host_in_its_own_words(tmp_path, capsys, scenario):
    from tests.support.fake_nvidia_smi import DRIVER_FAILURE

    if "exit_code" in scenario:
        scenario["exit_message"] = DRIVER_FAILURE
    code = main(["doctor", "--json", "--config", str(_local_smi_config(tmp_path, **scenario))])
    out = json.loads(capsys.readouterr().out)
    gpu = {c["name"]: c for c in out["hosts"][0]["checks"]}["gpu-source"]
    assert gpu["status"] == "fail" and code == EXIT_DOCTOR_FAILED
    assert "nvidia-smi exited 9" in gpu["summary"] and "couldn't communicate with the NVIDIA driver" in gpu["summary"]


def test_no_gpu_source_at_all_is_a_warning_not_a_failure():
    from gpuwatch_tui.doctor.host_checks import gpu_check, source_fails

    absent = "NVML: libnvidia-ml.so.1 not found (no NVIDIA driver here); nvidia-smi: not on PATH"
    assert not source_fails(absent) and gpu_check(None, absent, absent, "none").status == "warn"
    failing = "NVML: libnvidia-ml.so.1 not found (no NVIDIA driver here); nvidia-smi exited 9: NVIDIA-SMI has failed"
    assert source_fails(failing) and gpu_check("nvidia-smi", None, failing, "none").status == "fail"
