"""The scenario programs are real processes: run the quick ones and read their logs with the rules."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.logtail import LogBuffer
from gpuwatch_tui.jobs.rules import RuleSet

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def run(name: str, tmp_path: Path, *args: str, timeout: float = 30):
    """Like `python name.py ... > log 2>&1` (no -u, no PYTHONUNBUFFERED)."""
    log = tmp_path / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(log, "wb") as out:
        proc = subprocess.run([sys.executable, str(SCENARIOS / f"{name}.py"), *args], stdout=out,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp_path,
                              timeout=timeout)
    return proc.returncode, read(log)


def read(path: Path):
    buf = LogBuffer()
    interp = LogInterpreter(RuleSet.with_user_rules())
    hints = []
    buf.feed_bytes(path.read_bytes(), 1.0)
    for line in buf.take_new():
        interp.feed_line(line.text, 1.0)
        if interp.hint and (not hints or hints[-1] != interp.hint.phase):
            hints.append(interp.hint.phase)
    return interp, hints


QUICK = ["--steps", "4", "--step-time", "0.02"]


def test_finish(tmp_path):
    code, (interp, hints) = run("finish", tmp_path, *QUICK)
    assert code == 0 and interp.finished_at is not None
    assert (interp.progress.current.step, interp.progress.current.total) == (4, 4)


def test_train_hf(tmp_path):
    code, (interp, hints) = run("train_hf", tmp_path, *QUICK, "--eval-every", "2")
    assert code == 0 and {"training", "checkpointing"} <= set(hints)
    assert interp.progress.current.loss > 0 and interp.finished_at is not None
    assert (tmp_path / "hf_out" / "checkpoint-4").is_dir()


def test_train_lightning_style(tmp_path):
    code, (interp, hints) = run("train_lightning_style", tmp_path, *QUICK)
    assert code == 0 and hints[:3] == ["starting", "training", "evaluating"]
    assert interp.progress.current.epoch == 1 and interp.finished_at is not None


def test_train_logging_and_tqdm(tmp_path):
    code, (interp, _) = run("train_logging", tmp_path, *QUICK)
    assert code == 0 and (interp.progress.current.step, interp.progress.current.total) == (4, 4)
    code, (interp, _) = run("train_tqdm", tmp_path, *QUICK)
    assert code == 0 and interp.progress.current.total == 4


def test_loading_then_training(tmp_path):
    code, (interp, hints) = run("loading", tmp_path, "--steps", "2", "--step-time", "0.05", "--shards", "3",
                                "--shard-mb", "1")
    assert code == 0 and hints == ["loading", "training"]


def test_crash_traceback(tmp_path):
    code, (interp, _) = run("crash_traceback", tmp_path, *QUICK)
    assert code == 1 and interp.failure.detail == "exception"
    assert interp.failure.summary.startswith("RuntimeError: loss became nan")


@pytest.mark.parametrize("name,code", [("crash_sigkill", -9), ("crash_segfault", -11)])
def test_crash_without_a_word(tmp_path, name, code):
    rc, (interp, _) = run(name, tmp_path, *QUICK)
    assert rc == code and interp.failure is None  # nothing in the log says why


def test_buffered_stdout_really_stays_empty(tmp_path):
    log = tmp_path / "buffered.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(SCENARIOS / "buffered.py"), "--steps", "1000",
                                 "--step-time", "0.01"], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        time.sleep(1.0)
        assert proc.poll() is None and log.stat().st_size == 0
    finally:
        proc.kill()
        proc.wait()


def test_hang_blocks_with_flat_cpu(tmp_path):
    log = tmp_path / "hang.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-u", str(SCENARIOS / "hang.py"), *QUICK], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while log.read_bytes().count(b"\n") < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu1 = int(stat[11]) + int(stat[12])
        time.sleep(0.5)
        stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        assert stat[0] == "S" and int(stat[11]) + int(stat[12]) - cpu1 <= 2
    finally:
        proc.kill()
        proc.wait()
