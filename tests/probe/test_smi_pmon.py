"""Per-process SM % where only nvidia-smi is: `nvidia-smi pmon -c 1 -s u`, parsed by its header (driver 580 adds
jpg and ofa columns), "-" for a process with no sample (0 %) or a GPU with no process; run by the probe in the
background only while a GPU holds more than one process."""

from __future__ import annotations

import os

from gpuwatch_tui.probe.gpu_proc_util import parse_pmon
from tests.support.fake_nvidia_smi import install_fake_nvidia_smi
from tests.support.fake_smi_scenario import ScenarioFile

from .test_gpu_metric_reads import ProbeLines

# as driver 580 printed it on an H200 (a matmul loop beside an idle context holder), GPU 1 empty
PMON_580 = """\
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command 
# Idx           #    C/G      %      %      %      %      %      %    name 
    0     812345     C     97     41      -      -      -      -    python3        
    0     812346     C      -      -      -      -      -      -    python3        
    1          -     -      -      -      -      -      -      -    -              
"""
# an older driver's columns (no jpg/ofa)
PMON_470 = """\
# gpu        pid  type    sm   mem   enc   dec   command
# Idx          #   C/G     %     %     %     %   name
    0      4242     C    88    30     -     -   python
    0      4343     C     3     0     -     -   python
"""


def test_pmon_output_is_read_by_its_header():
    assert parse_pmon(PMON_580) == {0: {812345: 97.0, 812346: 0.0}, 1: {}}
    assert parse_pmon(PMON_470) == {0: {4242: 88.0, 4343: 3.0}}


def test_pmon_output_without_a_header_or_with_garbage_reads_as_nothing():
    assert parse_pmon("") == {}
    assert parse_pmon("    0   4242   C   88   30   -   -   python\n") == {}  # no header: columns unknown
    assert parse_pmon("# gpu pid type sm\nx y z w\n    0 12 C \x1b[31m\n") == {0: {}}  # no share read


def test_the_probe_reads_each_process_share_of_a_shared_gpu_through_pmon(tmp_path):
    bindir = tmp_path / "bin"
    install_fake_nvidia_smi(bindir)
    procs = [{"gpu": 0, "pid": 4242, "used_memory_mib": 60000, "sm_pct": 97},
             {"gpu": 0, "pid": 4343, "used_memory_mib": 2000},  # holds a context, runs nothing
             {"gpu": 1, "pid": 4444, "used_memory_mib": 2000, "sm_pct": 50}]  # alone on GPU 1: not read
    scenario = ScenarioFile(tmp_path / "scenario.json").write(gpus=2, phase="training", processes=procs)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", GPUWATCH_FAKE_SMI=str(scenario.path))
    probe = ProbeLines(env)
    try:
        def shares(frame):
            return {p["pid"]: p["sm_pct"] for g in frame["gpus"] for p in g.get("processes", [])}
        frame = probe.frame_where(lambda f: shares(f).get(4242) is not None)
        assert shares(frame) == {4242: 97, 4343: 0, 4444: None}
    finally:
        probe.close()
