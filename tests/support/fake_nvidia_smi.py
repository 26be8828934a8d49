#!/usr/bin/env python3
"""Test-only stand-in for `nvidia-smi`, replaying CSV recorded on a real NVIDIA H200.

Stdlib only; run as a script (see `install_fake_nvidia_smi`).  Supported:

    nvidia-smi --query-gpu=FIELDS [--format=csv[,noheader][,nounits]] [-lms N | --loop-ms=N | -l S | --loop=S] [-i IDS]
    nvidia-smi --query-compute-apps=FIELDS [--format=...] [-lms N ...] [-i IDS]
    nvidia-smi -L
    nvidia-smi pmon [-c COUNT] [-s u]   (each process's SM %: a scenario process's "sm_pct", "-" where unset)
    nvidia-smi            (a minimal summary)

Like the real tool, in loop mode it prints one batch (one line per GPU, or per
compute app; nothing when there are none) every N ms, flushing each batch,
until killed; without a loop option it prints one batch and exits.  Error
behaviour copied from nvidia-smi 580 on an H200:
unknown option -> "ERROR: Option X is not recognized. Please run 'nvidia-smi -h'." exit 255;
unknown field -> 'Field "x" is not a valid field to query.' exit 2;
bad --format -> "Format modifier is not recognized." exit 2;
no GPUs (or -i matching none) -> "No devices were found" exit 6.

The scenario (JSON file named by $GPUWATCH_FAKE_SMI, re-read every tick; see
tests/data/nvidia-smi/README.md for all keys) scripts what it reports.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import signal
import stat
import sys
import time
from pathlib import Path

SCENARIO_ENV = "GPUWATCH_FAKE_SMI"
DATA_ENV = "GPUWATCH_FAKE_SMI_DATA"
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"
DEFAULT_SCENARIO = {"gpus": 1, "phase": "idle"}
DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)

#: Column order of the recorded h200-<phase>.gpu.csv files (the probe's query-gpu command).
GPU_RECORDED_FIELDS = [
    "index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total",
    "temperature.gpu", "power.draw", "power.limit", "clocks.sm",
]
#: Column order of the recorded h200-<phase>.apps.csv files (the probe's query-compute-apps command).
APPS_RECORDED_FIELDS = ["timestamp", "gpu_uuid", "pid", "used_memory"]
#: The driver of the H200 the recordings come from (its CSVs have no such column); a scenario's
#: "fields" may set another.
RECORDED_DRIVER_VERSION = "580.159.04"

# canonical field -> (header text, unit or None); aliases map to canonical names.
GPU_FIELDS = {
    "timestamp": ("timestamp", None),
    "count": ("count", None),
    "index": ("index", None),
    "uuid": ("uuid", None),
    "name": ("name", None),
    "utilization.gpu": ("utilization.gpu [%]", "%"),
    "memory.used": ("memory.used [MiB]", "MiB"),
    "memory.total": ("memory.total [MiB]", "MiB"),
    "memory.free": ("memory.free [MiB]", "MiB"),
    "temperature.gpu": ("temperature.gpu", None),
    "power.draw": ("power.draw [W]", "W"),
    "power.limit": ("power.limit [W]", "W"),
    "clocks.sm": ("clocks.current.sm [MHz]", "MHz"),
    "clocks.mem": ("clocks.current.memory [MHz]", "MHz"),
    "driver_version": ("driver_version", None),
}
GPU_ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "utilization.gpu": "utilization.gpu",
}
APPS_FIELDS = {
    "timestamp": ("timestamp", None),
    "gpu_uuid": ("gpu_uuid", None),
    "gpu_name": ("gpu_name", None),
    "pid": ("pid", None),
    "process_name": ("process_name", None),
    "used_memory": ("used_gpu_memory [MiB]", "MiB"),
}
APPS_ALIASES = {"used_gpu_memory": "used_memory", "name": "process_name"}


class Exit(Exception):
    def __init__(self, code: int, message: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message


def gpu_uuid(prefix: str, index: int) -> str:
    """UUID the fake reports for GPU *index* when the scenario sets uuid_prefix."""
    return f"{prefix}-{index}"


def _now_stamp() -> str:
    now = _dt.datetime.now()
    return now.strftime("%Y/%m/%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}"


# --------------------------------------------------------------------------- recordings

_cache: dict[str, tuple[float, object]] = {}


def _canonical_header(col: str) -> str:
    col = col.split("[", 1)[0].strip()
    return GPU_ALIASES.get(col, APPS_ALIASES.get(col, col))


def _read_csv(path: Path, default_fields: list[str]) -> list[dict[str, str]]:
    key = str(path)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        raise Exit(12, f"fake nvidia-smi: recording not found: {path} (see tests/data/nvidia-smi/README.md)")
    hit = _cache.get(key)
    if hit and hit[0] == mtime:
        return hit[1]  # type: ignore[return-value]
    fields = list(default_fields)
    rows = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if cells[0] in ("index", "timestamp") and not rows:
            fields = [_canonical_header(c) for c in cells]  # a header line
            continue
        if len(cells) != len(fields):
            continue  # torn/odd line in a recording: skip it
        rows.append(dict(zip(fields, cells)))
    _cache[key] = (mtime, rows)
    return rows


def _data_dir(scen: dict) -> Path:
    return Path(scen.get("data_dir") or os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR)


def gpu_recording(scen: dict, phase: str) -> list[list[dict[str, str]]]:
    """Recorded samples for *phase*, one list of rows per recorded GPU (first-seen order)."""
    model = scen.get("recording", "h200")
    rows = _read_csv(_data_dir(scen) / f"{model}-{phase}.gpu.csv", GPU_RECORDED_FIELDS)
    per: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        per.setdefault(r.get("index", "0"), []).append(r)
    if not per:
        raise Exit(12, f"fake nvidia-smi: recording for phase {phase!r} has no rows")
    return list(per.values())


def apps_recording(scen: dict, phase: str) -> list[dict[str, str]]:
    model = scen.get("recording", "h200")
    path = _data_dir(scen) / f"{model}-{phase}.apps.csv"
    if not path.exists():
        return []
    return _read_csv(path, APPS_RECORDED_FIELDS)


# --------------------------------------------------------------------------- scenario

_last_good: dict | None = None


def load_scenario() -> dict:
    """The scenario from $GPUWATCH_FAKE_SMI (default: 1 idle GPU). A torn or invalid file
    keeps the last good scenario."""
    global _last_good
    path = os.environ.get(SCENARIO_ENV)
    if not path:
        return dict(DEFAULT_SCENARIO)
    try:
        scen = json.loads(Path(path).read_text())
        if not isinstance(scen, dict):
            raise ValueError("scenario must be a JSON object")
    except (OSError, ValueError) as exc:
        if _last_good is not None:
            return _last_good
        raise Exit(12, f"fake nvidia-smi: cannot read scenario {path}: {exc}")
    _last_good = scen
    return scen


def _per_gpu(scen: dict, i: int) -> dict:
    return (scen.get("per_gpu") or {}).get(str(i)) or {}


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "Yes" if v else "No"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def gpu_rows(scen: dict, tick: int, stamp: str | None = None) -> list[dict[str, str]]:
    """Field->value dicts for every GPU at *tick* (all rows of a batch share one timestamp)."""
    stamp = stamp or _now_stamp()
    n = int(scen.get("gpus", 1))
    start = int(scen.get("start_row", 0))
    prefix = scen.get("uuid_prefix")
    out = []
    for i in range(n):
        pg = _per_gpu(scen, i)
        phase = pg.get("phase", scen.get("phase", "idle"))
        rec = gpu_recording(scen, phase)
        series = rec[i % len(rec)]
        row = dict(series[(tick + start + int(pg.get("start_row", 0))) % len(series)])
        row["index"] = str(i)
        if "uuid" in pg:
            row["uuid"] = pg["uuid"]
        elif prefix:
            row["uuid"] = gpu_uuid(prefix, i)
        elif i >= len(rec):
            row["uuid"] = gpu_uuid("GPU-fake", i)
        for src in (scen.get("fields") or {}, pg.get("fields") or {}):
            for k, v in src.items():
                row[GPU_ALIASES.get(k, k)] = _fmt(v)
        row.setdefault("driver_version", RECORDED_DRIVER_VERSION)
        row["timestamp"] = stamp
        row["count"] = str(n)
        try:
            row.setdefault("memory.free", str(int(float(row["memory.total"])) - int(float(row["memory.used"]))))
        except (KeyError, ValueError):
            row.setdefault("memory.free", "[N/A]")
        row["_phase"] = phase
        out.append(row)
    return out


def _process_name(pid) -> str:
    try:
        return os.readlink(f"/proc/{int(pid)}/exe")
    except (OSError, ValueError):
        return "python3"


def app_rows(scen: dict, gpus: list[dict[str, str]]) -> list[dict[str, str]]:
    stamp = gpus[0]["timestamp"] if gpus else _now_stamp()
    procs = scen.get("processes", [])
    out = []
    if procs == "recorded":
        n_rec: dict[str, list[str]] = {}
        for g in gpus:
            phase = g["_phase"]
            if phase not in n_rec:
                n_rec[phase] = [s[0].get("uuid", "") for s in gpu_recording(scen, phase)]
            rec_uuids = n_rec[phase]
            src_uuid = rec_uuids[int(g["index"]) % len(rec_uuids)]
            seen: dict[str, dict[str, str]] = {}
            for r in apps_recording(scen, phase):
                if r.get("gpu_uuid") == src_uuid:
                    prev = seen.get(r.get("pid", ""))
                    if prev is None or _num(r.get("used_memory")) >= _num(prev.get("used_memory")):
                        seen[r.get("pid", "")] = r
            for r in seen.values():
                out.append({
                    "gpu_uuid": g["uuid"], "gpu_name": g.get("name", ""), "pid": r.get("pid", ""),
                    "used_memory": r.get("used_memory", "[N/A]"), "process_name": _process_name(r.get("pid")),
                    "timestamp": stamp,
                })
        return out
    by_index = {g["index"]: g for g in gpus}
    for p in procs or []:
        g = by_index.get(str(p.get("gpu", 0)))
        if g is None:
            continue
        out.append({
            "gpu_uuid": g["uuid"],
            "gpu_name": g.get("name", ""),
            "pid": str(p["pid"]),
            "used_memory": _fmt(p.get("used_memory_mib", 0)),
            "process_name": p.get("name") or _process_name(p["pid"]),
            "timestamp": stamp,
        })
    return out


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return -1.0


# --------------------------------------------------------------------------- CLI


def _unrecognized(opt: str) -> Exit:
    return Exit(255, f"ERROR: Option {opt} is not recognized. Please run 'nvidia-smi -h'.\n\n")


def parse_args(argv: list[str]) -> dict:
    opts: dict = {"format": ["csv"], "interval": None}
    i = 0

    def value(i: int, opt: str) -> str:
        if i + 1 >= len(argv):
            raise _unrecognized(opt)
        return argv[i + 1]

    while i < len(argv):
        a = argv[i]
        name, eq, val = a.partition("=")
        if name in ("--query-gpu", "--query-compute-apps"):
            if not eq:
                val = value(i, a)
                i += 1
            if "query" in opts:
                raise _unrecognized(a)
            opts["query"] = "gpu" if name == "--query-gpu" else "apps"
            opts["fields"] = [f.strip() for f in val.split(",") if f.strip()]
        elif name == "--format":
            if not eq:
                val = value(i, a)
                i += 1
            opts["format"] = [f.strip() for f in val.split(",") if f.strip()]
        elif name in ("-lms", "--loop-ms", "-l", "--loop"):
            if not eq:
                val = value(i, a)
                i += 1
            try:
                n = float(val)
            except ValueError:
                raise _unrecognized(a)
            ms = n if name in ("-lms", "--loop-ms") else n * 1000.0
            opts["interval"] = max(ms, 1.0) / 1000.0
        elif name in ("-i", "--id"):
            if not eq:
                val = value(i, a)
                i += 1
            opts["ids"] = [x.strip() for x in val.split(",") if x.strip()]
        elif a in ("-L", "--list-gpus"):
            opts["list"] = True
        elif a in ("-h", "--help"):
            opts["help"] = True
        else:
            raise _unrecognized(a)
        i += 1
    fmt = opts["format"]
    if "csv" not in fmt or any(f not in ("csv", "noheader", "nounits") for f in fmt):
        raise Exit(2, "Format modifier is not recognized.\n")
    if "query" in opts:
        table, aliases = (GPU_FIELDS, GPU_ALIASES) if opts["query"] == "gpu" else (APPS_FIELDS, APPS_ALIASES)
        canon = []
        for f in opts["fields"]:
            c = aliases.get(f, f)
            if c not in table:
                raise Exit(2, f'Field "{f}" is not a valid field to query.\n\n')
            canon.append(c)
        opts["canon"] = canon
        opts["table"] = table
    return opts


def _select(gpus: list[dict[str, str]], ids: list[str] | None) -> list[dict[str, str]]:
    if not ids:
        return gpus
    return [g for g in gpus if g["index"] in ids or g.get("uuid") in ids]


def _check_failures(scen: dict, tick: int) -> None:
    fail = scen.get("fail")
    if fail:
        msg = DRIVER_FAILURE if fail is True else str(fail)
        raise Exit(int(scen.get("fail_code", 9)), msg + "\n")
    after = scen.get("exit_after_ticks")
    if after is not None and tick >= int(after):
        raise Exit(int(scen.get("exit_code", 1)), str(scen.get("exit_message", "")) + ("\n" if scen.get("exit_message") else ""))
    if int(scen.get("gpus", 1)) <= 0:
        raise Exit(6, "No devices were found\n")


def render_batch(opts: dict, scen: dict, tick: int, header: bool) -> str:
    gpus = _select(gpu_rows(scen, tick), opts.get("ids"))
    if not gpus:
        raise Exit(6, "No devices were found\n")
    table, canon = opts["table"], opts["canon"]
    nounits = "nounits" in opts["format"]
    rows = gpus if opts["query"] == "gpu" else app_rows(scen, gpus)
    lines = []
    if header:
        lines.append(", ".join(table[c][0] for c in canon))
    for r in rows:
        cells = []
        for c in canon:
            v = r.get(c, "[N/A]")
            unit = table[c][1]
            if unit and not nounits and not v.startswith("["):
                v = f"{v} {unit}"
            cells.append(v)
        lines.append(", ".join(cells))
    return "".join(line + "\n" for line in lines)


# `nvidia-smi pmon -s u` as driver 580 prints it on an H200: two header lines, then a line per process (a GPU
# without one: "-" in every column), a value it has no sample of as "-".
PMON_HEADER = ("# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command \n"
               "# Idx           #    C/G      %      %      %      %      %      %    name \n")


def pmon(argv: list[str]) -> int:
    count = 1
    i = 0
    while i < len(argv):
        if argv[i] == "-c" and i + 1 < len(argv):
            count = int(argv[i + 1])
            i += 2
        elif argv[i] == "-s" and i + 1 < len(argv):
            i += 2
        else:
            raise _unrecognized(argv[i])
    out = sys.stdout
    out.write(PMON_HEADER)
    for _ in range(count):
        time.sleep(0.3)  # the real one samples for about a second
        scen = load_scenario()
        _check_failures(scen, 0)
        procs = scen.get("processes") or []
        for g in gpu_rows(scen, 0):
            mine = [p for p in procs if isinstance(p, dict) and str(p.get("gpu", 0)) == g["index"]]
            if not mine:
                out.write(f"{g['index']:>5} {'-':>10} {'-':>5} " + " ".join(f"{'-':>6}" for _ in range(6))
                          + "    -              \n")
            for p in mine:
                sm = "-" if p.get("sm_pct") is None else str(int(p["sm_pct"]))
                name = os.path.basename(p.get("name") or "python3")
                out.write(f"{g['index']:>5} {p['pid']:>10} {'C':>5} {sm:>6} " + " ".join(f"{'-':>6}" for _ in range(5))
                          + f"    {name:<15}\n")
        out.flush()
    return 0


def run(argv: list[str]) -> int:
    if argv[:1] == ["pmon"]:
        return pmon(argv[1:])
    opts = parse_args(argv)
    out = sys.stdout
    if opts.get("help"):
        out.write("NVIDIA System Management Interface -- fake for gpuwatch tests\n")
        return 0
    if "query" not in opts:
        scen = load_scenario()
        _check_failures(scen, 0)
        gpus = _select(gpu_rows(scen, 0), opts.get("ids"))
        if not gpus:
            raise Exit(6, "No devices were found\n")
        for g in gpus:
            if opts.get("list"):
                out.write(f"GPU {g['index']}: {g.get('name', '')} (UUID: {g.get('uuid', '')})\n")
            else:
                out.write(
                    f"GPU {g['index']} {g.get('name', '')} {g.get('uuid', '')}: util {g.get('utilization.gpu')}% "
                    f"mem {g.get('memory.used')}/{g.get('memory.total')} MiB {g.get('power.draw')} W\n"
                )
        out.flush()
        return 0
    interval = opts["interval"]
    header = "noheader" not in opts["format"]
    t0 = time.monotonic()
    tick = 0
    while True:
        scen = load_scenario()
        while scen.get("hang"):  # a wedged driver: no output at all until un-hung (or killed)
            time.sleep(interval or 0.2)
            scen = load_scenario()
            t0 = time.monotonic() - tick * (interval or 0)
        _check_failures(scen, tick)
        out.write(render_batch(opts, scen, tick, header))
        out.flush()
        header = False
        if interval is None:
            return 0
        tick += 1
        delay = t0 + tick * interval - time.monotonic()
        if delay < -interval:  # fell far behind (e.g. SIGSTOP): re-anchor instead of bursting
            t0 = time.monotonic() - tick * interval
            delay = 0
        if delay > 0:
            time.sleep(delay)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # die on a closed pipe, like a C program
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except Exit as exc:
        try:
            sys.stdout.flush()
        except OSError:
            pass
        if exc.message:
            sys.stderr.write(exc.message if exc.message.endswith("\n") else exc.message + "\n")
            sys.stderr.flush()
        return exc.code
    except KeyboardInterrupt:
        return 130


# --------------------------------------------------------------------------- installing


def install_fake_nvidia_smi(bindir: Path | str, name: str = "nvidia-smi") -> Path:
    """Write an executable `<bindir>/nvidia-smi` that execs this script with the test
    interpreter. Returns its path."""
    bindir = Path(bindir)
    bindir.mkdir(parents=True, exist_ok=True)
    target = bindir / name
    script = Path(__file__).resolve()
    target.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n')
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRUSR)
    return target


if __name__ == "__main__":
    sys.exit(main())
