"""Two probe trees side by side in one process: each one's sample (+ JSON encode) at 1 Hz, alternated, on the
same 8 real jobs with tailed logs and 8 GPUs, so both see the same host (load, other users' processes).

    python benchmarks/bench_probe_ab.py --other-src OTHER/src [--samples 60] [--warm 36] [--gpu nvml|nvidia-smi]
                                        [--quiet-host]

Thread CPU of the sampling call only (not the write, the sleep or other threads): where the shared machine
is too noisy for whole-process figures to tell two versions apart. --gpu nvml (default) uses the stand-in
libnvidia-ml.so.1 (tests/support/fake_nvml.c; the driver's own cost per call left out); the process re-runs
itself with LD_LIBRARY_PATH set, as the dynamic loader reads it at start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks"), str(ROOT)]


def load_probe(agent_py: Path) -> tuple[dict, dict]:
    """One tree's probe loaded in this process: agent.py's globals, and the modules beside it that it imported by
    plain name (a probe of several modules finds them in its own folder, as from its bundle). Each tree gets
    its own modules: those of the same names another tree loaded are taken out of sys.modules first."""
    own = {p.stem for p in agent_py.parent.glob("*.py")} - {"agent", "__init__"}
    for name in own:
        sys.modules.pop(name, None)
    ns = {"__name__": "probe_ab", "__file__": str(agent_py)}
    exec(compile(agent_py.read_text(), str(agent_py), "exec"), ns)
    return ns, {name: sys.modules[name] for name in own if name in sys.modules}


def probe_name(loaded: tuple[dict, dict], name: str):
    """A name of a loaded probe's: agent.py's, else that of the module of it defining the name."""
    ns, modules = loaded
    if name in ns:
        return ns[name]
    for module in modules.values():
        if name in vars(module):
            return vars(module)[name]
    raise KeyError(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--other-src", required=True, help="the src/ folder of the tree to compare with")
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--warm", type=float, default=36.0, help="seconds before measuring (past the young-job window)")
    ap.add_argument("--gpu", choices=("nvml", "nvidia-smi"), default="nvml")
    ap.add_argument("--quiet-host", action="store_true",
                    help="the probes read a copy of /proc/loadavg taken at start: a host where no process starts or "
                         "ends (as the real GPU host between jobs), which a shared test machine is not")
    ap.add_argument("--json")
    ap.add_argument("--fleet-dir", help=argparse.SUPPRESS)  # set by the re-run
    args = ap.parse_args()

    from bench_fleet_jobs import JobFleet

    if args.gpu == "nvml" and not args.fleet_dir:
        from tests.support.fake_nvml import build_fake_nvml, fake_nvml_env

        with tempfile.TemporaryDirectory(prefix="gpuwatch-probe-ab-") as tmp:
            fleet = JobFleet(Path(tmp), 8, 8)
            try:
                env = fake_nvml_env(build_fake_nvml(Path(tmp) / "nvml"), 8, fleet.pids, fleet.env())
                env["GPUWATCH_AB_PIDS"] = json.dumps({"pids": fleet.pids, "tails": fleet.tails()})
                os.spawnve(os.P_WAIT, sys.executable, [sys.executable, *sys.argv, "--fleet-dir", tmp], env)
            finally:
                fleet.stop()
        return
    if args.fleet_dir:
        wants = json.loads(os.environ["GPUWATCH_AB_PIDS"])
        run(args, wants["pids"], wants["tails"], None)
        return
    with tempfile.TemporaryDirectory(prefix="gpuwatch-probe-ab-") as tmp:
        fleet = JobFleet(Path(tmp), 8, 8)
        os.environ.update(fleet.env())
        try:
            run(args, fleet.pids, fleet.tails(), fleet)
        finally:
            fleet.stop()


def run(args, pids: list[int], tails: dict[str, str], fleet) -> None:
    trees = {"this": ROOT / "src" / "gpuwatch_tui" / "probe" / "agent.py",
             "other": Path(args.other_src) / "gpuwatch_tui" / "probe" / "agent.py"}
    probes = {}
    for name, path in trees.items():
        loaded = load_probe(path)
        ns = loaded[0]
        probe = ns["Probe"]({"interval": 1.0, "fact_deltas": True})
        if args.gpu == "nvml":
            import pynvml

            probe.gpu = probe_name(loaded, "NvmlSource")(pynvml)
        else:
            probe.gpu = probe_name(loaded, "open_gpu_source")("nvidia-smi", 1.0)
        probe.set_wants({"pids": pids, "tails": tails, "dirs": {}, "matches": {}})
        if args.quiet_host:
            # After the Probe is made (its pid cursors checked that the real file follows pid allocation):
            # every sample then reads the same loadavg bytes, as where no process started or ended.
            frozen = Path(args.fleet_dir or tempfile.gettempdir()) / ("loadavg-" + name)
            frozen.write_bytes(open("/proc/loadavg", "rb").read())
            ns["PROC_LOADAVG"] = probe_name(loaded, "KeptFile")(str(frozen), 128)
        probes[name] = probe
    cpu = {name: [] for name in probes}
    sizes = {name: [] for name in probes}
    start = time.time()
    order = list(probes)
    while True:
        warm = time.time() - start < args.warm
        for name in order:
            time.sleep(0.5)
            t0 = time.thread_time()
            frame = probes[name].sample()
            frame["v"] = 1
            data = (json.dumps(frame, separators=(",", ":")) + "\n").encode()
            used = time.thread_time() - t0
            if not warm:
                cpu[name].append(used)
                sizes[name].append(len(data))
        order.reverse()  # neither always goes first
        if len(cpu["this"]) >= args.samples:
            break
    result = {"gpu": args.gpu, "gpus": len(frame["gpus"]), "procs": len(frame["procs"]), "samples": args.samples,
              "quiet_host": args.quiet_host,
              "load_after": os.getloadavg()}
    for name in probes:
        result[name] = {"cpu_ms_per_sample_median": round(1000 * statistics.median(cpu[name]), 3),
                        "cpu_ms_per_sample_mean": round(1000 * statistics.mean(cpu[name]), 3),
                        "frame_bytes_median": statistics.median(sizes[name])}
        probes[name].gpu.close()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
