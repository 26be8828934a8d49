"""The wire contract (probe/wire.py) is written once and both sides keep to it: the frames a real probe writes
carry exactly the wire's keys, and every key the client's frame parser reads is one of them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwatch_tui.feeds import hostsession
from gpuwatch_tui.feeds import probe_frames
from gpuwatch_tui.probe import gpu_metrics, wire
from gpuwatch_tui.transport.probe_bundle import build_payload, local_argv, probe_modules

from .test_nvml_reads import ScriptedNvml

CHILD = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
         "time.sleep(60)")


def keys_read(path: Path) -> set[str]:
    """The string keys a module reads out of dicts: x["key"], x.get("key"), x.pop("key")."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        else:
            continue
        if isinstance(key, str):
            out.add(key)
    return out


def every_wire_key() -> set[str]:
    return {key for name in dir(wire) if name.endswith("_KEYS") for key in getattr(wire, name)}


def test_both_sides_read_the_one_contract():
    # the parser, the host session and the phase engine import the wire's own values rather than copies
    assert hostsession.PROTOCOL_VERSION is wire.PROTOCOL_VERSION
    assert probe_frames.ROOT_FACTS is wire.ROOT_FACTS and probe_frames.CHILD_FACTS is wire.CHILD_FACTS
    assert probe_frames.GPU_FACTS is wire.GPU_FACTS and probe_frames.TAIL_KEPT is wire.TAIL_KEPT
    # and the probe is shipped this very file
    assert probe_modules()["wire"] == Path(wire.__file__).read_text(encoding="utf-8")


def test_every_key_the_frame_parser_reads_is_one_the_probe_sends():
    read = keys_read(Path(probe_frames.__file__))
    assert {"procs", "cmdline", "index", "newest_name", "seen_gone_at"} <= read  # (the scan finds the reads)
    assert read - every_wire_key() == set()
    # A GPU's readings are read by the names of the metric table, which the wire's GPU_KEYS are made of.
    assert set(gpu_metrics.NAMES) <= every_wire_key()


def test_the_keys_read_by_a_parser_that_drifted_are_caught(tmp_path):
    # a parser reading a key under another name than the probe's, as a drift would have it
    drifted = tmp_path / "drifted.py"
    drifted.write_text(Path(probe_frames.__file__).read_text(encoding="utf-8").replace('"seen_gone_at"', '"gone_at"'))
    assert keys_read(drifted) - every_wire_key() == {"gone_at"}


def test_a_real_probes_frames_carry_exactly_the_wires_keys(probe_ns, probe_mod, tmp_path, spawn):
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1\n")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.pt").write_bytes(b"x" * 10)
    with open(log, "ab") as out:
        job = spawn(CHILD, stdout=out)
    short = spawn("import time; time.sleep(60)")
    deadline = time.monotonic() + 30
    while not Path(f"/proc/{job.pid}/task/{job.pid}/children").read_text().split():
        assert time.monotonic() < deadline, "the job starts its child"
        time.sleep(0.05)
    probe = probe_ns["Probe"]({"interval": 1})  # no fact deltas: every key, every frame
    probe.gpu = probe_mod("gpu_nvml").NvmlSource(ScriptedNvml())
    probe.set_wants({"pids": [job.pid, short.pid], "tails": {"train": str(log)}, "dirs": {"out": str(tmp_path)}})
    notes = probe_mod("action_notes")
    probe.notes = notes.ActionNotes(str(tmp_path / "notes"))  # a kill's record on the short one
    notes.write_record(notes.make_record({"action": "kill", "user": "ana", "id": "0123456789abcdef", "targets": [
        {"pid": short.pid, "start_ticks": 1}]}, time.time()), str(tmp_path / "notes"))
    first = probe.sample()
    short.kill()
    short.wait()
    second = probe.sample()
    for frame in (first, second):
        frame["v"] = wire.PROTOCOL_VERSION  # (stamped as it is written)
        assert frame["type"] in wire.FRAME_TYPES
        assert set(wire.SAMPLE_KEYS) - set(frame) <= {"load1", "notes"} and set(frame) <= set(wire.SAMPLE_KEYS)
        (gpu,) = frame["gpus"]
        assert set(gpu) == set(wire.GPU_KEYS)
        assert all(set(p) == set(wire.GPU_PROCESS_KEYS) for p in gpu["processes"])
        (tail,) = frame["tails"]
        assert set(tail) == set(wire.TAIL_KEYS)
        (folder,) = frame["dirs"]
        assert set(folder) == set(wire.DIR_KEYS)
    (note,) = first["notes"]  # (sent once: not in the second frame)
    assert set(wire.NOTE_KEYS) - {"status_file", "finding"} == set(note) and "notes" not in second
    proc = next(p for p in first["procs"] if p["pid"] == job.pid)
    assert set(proc) == set(wire.PROC_KEYS)
    assert proc["children"] and all(set(c) == set(wire.CHILD_KEYS) for c in proc["children"])
    assert set(proc["stdout"]) == set(wire.FD_TARGET_KEYS)
    (gone,) = second["gone"]
    assert gone["pid"] == short.pid and set(gone) == set(wire.GONE_KEYS)


def test_a_real_probes_hello_carries_exactly_the_wires_keys():
    # the probe as a host runs it; stdin closed after the payload: it says hello, then exits
    run = subprocess.run(local_argv(sys.executable), input=build_payload({"interval": 1, "gpu_source": "none"}),
                         capture_output=True, timeout=60, check=False)
    hello = json.loads(run.stdout.split(b"\n", 1)[0])
    assert hello["type"] == "hello" and set(hello) == set(wire.HELLO_KEYS)


def test_the_shipped_modules_are_python_3_6_grammar():
    with pytest.raises(SyntaxError):  # (what the check rejects: grammar newer than 3.6)
        ast.parse("if (n := 1):\n    pass\n", feature_version=(3, 6))
    sources = {**probe_modules(), "agent": (Path(wire.__file__).parent / "agent.py").read_text(encoding="utf-8")}
    assert {"wire", "procfs", "gpu_nvml", "gpu_smi", "gpu_choice", "tails", "dispatch", "ops_base"} <= set(sources)
    for name, source in sources.items():
        ast.parse(source, filename=name, feature_version=(3, 6))
        assert "from __future__ import annotations" not in source  # (3.7+)

