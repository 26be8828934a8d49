"""What a host's header line cannot hold (a GPU error, an unknown key's fingerprint, the command that trusts
it) goes on note lines under it, wrapped, never cut: at 80x24 a person can read all of it."""

from __future__ import annotations

import json
import re
import time

from gpuwatch_tui.config import load_config
from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.recorded_source import RecordedSource
from gpuwatch_tui.ui.run import build_app
from gpuwatch_tui.ui.widgets.host_notes import NOTE_INDENT, errors_stay_below, wrap_note

from tests.e2e.harness import write_config
from tests.support.fake_nvidia_smi import DRIVER_FAILURE

from .conftest import FLEET

FINGERPRINT = "SHA256:q3LkM0Jg2o7vJtq8yWcR1pXc9bN4fH6sTzA5eKdUuYw"
GPU_ERROR = f"nvidia-smi exited 9: {DRIVER_FAILURE.strip()}"


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def note_text(lines: list[str], first_words: str) -> str:
    """The note that starts with `first_words`, its wrapped lines joined with single spaces."""
    start = next(n for n, line in enumerate(lines) if line.lstrip().startswith(first_words))
    indent = len(lines[start]) - len(lines[start].lstrip())
    words = [lines[start].strip()]
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) != indent or not line.strip() or "▌" in line:
            break
        words.append(line.strip())
    return " ".join(words)


def small_fleet(path):
    """trainer-b with its GPU query failing, and lab-d as the SSH transport reports an unknown key."""
    data = json.loads(FLEET.read_text(encoding="utf-8"))
    hosts = {h["name"]: h for h in data["hosts"]}
    hosts["trainer-b"]["gpu_error"] = GPU_ERROR
    hosts["lab-d"].update(error=f"unknown host key for [10.0.4.21]:2222: ssh-ed25519 {FINGERPRINT}",
                          hint="verify the fingerprint, then trust it: ssh-keyscan -p 2222 10.0.4.21 >> "
                               "/home/oncall/.ssh/known_hosts")
    data["hosts"] = [hosts["trainer-b"], hosts["lab-d"]]
    data["jobs"] = [j for j in data["jobs"] if j["host"] == "trainer-b"]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


async def until(pilot, test, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.1)


def test_a_fingerprint_and_a_command_stay_whole_when_wrapped():
    text = f"unknown host key for [127.0.0.2]:40222: ssh-ed25519 {FINGERPRINT}"
    lines = wrap_note(text, 80)
    assert len(lines) == 2 and lines[1] == FINGERPRINT  # too long for one line: the fingerprint moves whole
    assert all(len(NOTE_INDENT + line) <= 80 for line in lines)
    assert " ".join(lines) == text
    assert wrap_note(text, 200) == [text]
    escape = wrap_note("GPU: \x1b]52;c;aGk=\x07 gone", 80)[0]
    assert "\x1b" not in escape and "\x07" not in escape  # host text is shown, not obeyed


def test_an_error_that_moved_under_the_header_comes_back_only_with_room_to_spare():
    assert errors_stay_below(81, 80, were_below=False)
    assert not errors_stay_below(80, 80, were_below=False)
    assert errors_stay_below(75, 80, were_below=True)  # a figure one digit shorter: stays put
    assert not errors_stay_below(60, 80, were_below=True)


async def test_gpu_error_and_fingerprint_are_readable_at_80x24(tmp_path):
    app = GpuwatchApp(RecordedSource(small_fleet(tmp_path / "fleet.json")))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: any("▌lab-d" in line for line in screen_lines(app)), 30, "the first frame")
        lines = screen_lines(app)
        assert note_text(lines, "GPU:") == f"GPU: {GPU_ERROR}", "\n".join(lines)
        assert any(FINGERPRINT in line for line in lines), "\n".join(lines)
        assert note_text(lines, "verify the fingerprint").endswith("/home/oncall/.ssh/known_hosts")
        header = next(line for line in lines if "▌trainer-b" in line)
        assert "GPU:" not in header  # not cut at the edge: under the header, whole

        # Wide enough, the error stays on the header line, as before.
        def header_holds_the_error():
            return any("▌trainer-b" in line and f"GPU: {GPU_ERROR}" in line for line in screen_lines(app))

        await pilot.resize_terminal(400, 50)
        await until(pilot, header_holds_the_error, 30, "the error back on the header at 400 columns")


def test_gpu_error_at_80x24(snap_compare, tmp_path):
    assert snap_compare(GpuwatchApp(RecordedSource(small_fleet(tmp_path / "fleet.json"))), terminal_size=(80, 24))


async def test_over_ssh_the_unknown_key_and_the_failed_nvidia_smi_read_whole_at_80x24(
        sshd_factory, ssh_env, tmp_path):
    from tests.support.sshd import write_known_hosts

    good, stranger = sshd_factory(2)
    known = write_known_hosts(tmp_path / "known_hosts", [good], aliases=True)
    config = load_config(str(write_config(tmp_path / "gpuwatch.toml", ssh_env, [good, stranger],
                                          known_hosts=str(known))))
    good.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{good.name}", fail=True)
    app = build_app(config, min_refresh_interval=0)
    async with app.run_test(size=(80, 24)) as pilot:
        def store():
            return app.source.monitor.store.hosts if app.source.monitor is not None else {}

        def ready():
            hosts = store()
            return (good.name in hosts and hosts[good.name].gpu_error
                    and stranger.name in hosts and hosts[stranger.name].state == "host-key-unknown")

        await until(pilot, ready, 60, "the GPU error and the unknown key")
        await pilot.pause(0.5)
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert stranger.host_key_fingerprint in text, text  # on one line, whole
        gpu_error = store()[good.name].gpu_error
        assert "exited 9" in gpu_error, gpu_error
        assert re.sub(r"\s+", " ", note_text(lines, "GPU:")) == re.sub(r"\s+", " ", f"GPU: {gpu_error}").strip()
        await app.source.stop()
