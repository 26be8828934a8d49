"""The process that started the probe is never a job candidate: a Python test runner or a shell's Python
that imported torch and writes stdout to a file looks like a job, but it is the probe's own ancestor
(seen when the loopback test hosts found the suite's own pytest as a job). Real processes: a torch-loaded
Python writing to a file starts a Python that judges it, with and without the ancestor rule."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

INNER = """
import json, os, time
from gpuwatch_tui.transport.probe_bundle import LoadedProbe
candidates = LoadedProbe().module("candidates")
JobCandidates, read_parent = candidates.JobCandidates, candidates.read_parent
ppid = os.getppid()
c = JobCandidates()
c.seen = {ppid: read_parent(ppid)}
c.consider(ppid, time.time())
excluded = c.found.get(ppid)
c.ancestors, c.judged, c.found = set(), {}, {}
c.consider(ppid, time.time())
print(json.dumps({"with_rule": excluded, "without_rule": c.found.get(ppid)}))
"""

OUTER = "import sys, subprocess, torch; subprocess.run([sys.executable, '-c', sys.argv[1]], stdout=open(sys.argv[2], 'w'))"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_torch_python_that_started_the_probe_is_no_candidate(tmp_path):
    out = tmp_path / "verdict.json"
    with open(tmp_path / "outer.log", "w") as log:  # stdout to a file: what makes a Python a job
        subprocess.run([sys.executable, "-c", OUTER, INNER, str(out)], stdout=log, check=True, timeout=120)
    verdict = json.loads(out.read_text())
    assert verdict["without_rule"] == "torch"  # it would be taken for a job...
    assert verdict["with_rule"] is None  # ...but it is the probe's ancestor
