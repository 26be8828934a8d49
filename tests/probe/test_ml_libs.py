"""The probe's ML-runtime fact (ml_libs.py, the frame's "ml"): a watched Python process off the GPU with torch
mapped is listed, one without is not; a process that imports torch after it was first looked at is listed
once its address space grew."""

from __future__ import annotations

import importlib.util
import time

import pytest

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
READY = "import sys, time\n{imp}\nsys.stdout.write('ready\\n'); sys.stdout.flush()\n{after}\ntime.sleep(60)\n"


def _ready(proc):
    assert proc.stdout.readline() == b"ready\n"


@needs_torch
def test_torch_mapped_is_seen_and_plain_python_is_not(probe_mod, spawn):
    import subprocess

    ml = probe_mod("ml_libs").MlLibs()
    with_torch = spawn(READY.format(imp="import torch", after=""), stdout=subprocess.PIPE)
    plain = spawn(READY.format(imp="import json", after=""), stdout=subprocess.PIPE)
    _ready(with_torch)
    _ready(plain)
    assert ml.loaded(with_torch.pid, 1.0, now=100.0) is True
    assert ml.loaded(plain.pid, 1.0, now=100.0) is False
    # (no maps read for a small address space: nothing counted against the process)
    assert ml.judged[(plain.pid, 1.0)][2] == 0
    ml.forget_except({(with_torch.pid, 1.0)})
    assert list(ml.judged) == [(with_torch.pid, 1.0)]


@needs_torch
def test_a_late_import_is_seen_after_the_recheck_interval(probe_mod, spawn):
    import subprocess

    mod = probe_mod("ml_libs")
    ml = mod.MlLibs()
    late = spawn(READY.format(imp="import json", after="sys.stdin.readline(); import torch\n"
                              "sys.stdout.write('ready\\n'); sys.stdout.flush()"),
                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    _ready(late)
    assert ml.loaded(late.pid, 1.0, now=100.0) is False
    late.stdin.write(b"go\n")
    late.stdin.flush()
    _ready(late)
    assert ml.loaded(late.pid, 1.0, now=100.0 + mod.ML_RECHECK_S / 2) is False  # not asked again so soon
    deadline = time.monotonic() + 30
    now = 100.0
    while not ml.loaded(late.pid, 1.0, now=now):
        assert time.monotonic() < deadline
        now += mod.ML_RECHECK_S
    assert ml.judged[(late.pid, 1.0)][2] >= 1
