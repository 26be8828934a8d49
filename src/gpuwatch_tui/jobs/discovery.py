"""Find jobs among a host's processes: GPU processes grouped by launcher tree (pure functions).

torchrun / accelerate / deepspeed / mpirun start an agent that starts the ranks; DataLoader workers and
compile workers hang below the ranks. One job = one such tree, rooted at its launcher agent or its
training process (boundary.py: a sweep driver, notebook kernel or harness above it is not in the job),
named after the training script. The probe only reports processes it is asked about, so
`parents_to_watch` says which parent pids to ask for next, until the chain reaches a shell, an init,
a parent outside the job or an unknown parent.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from dataclasses import dataclass
from typing import Iterable

from ..model import GpuSample, ProcInfo
from .boundary import NO_EVIDENCE, TrainingEvidence, driver_kind

RESTART_WRAPPER = "gpuwatch-run"  # the comm of the wrapper a restart starts the job under (probe/ops_spawn.py)
# Parents that end the walk up: shells, session managers, schedulers, init, gpuwatch's restart wrapper.
STOP_NAMES = frozenset(
    {"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh", "sshd", "tmux", "tmux: server", "screen",
     "SCREEN", "systemd", "init", "login", "su", "sudo", "nohup", "setsid", "srun", "slurmstepd",
     "containerd-shim", "containerd-shim-runc-v2", "docker-init", "tini", "dumb-init", "supervisord",
     "runsv", "cron", "nvidia-smi", "timeout", "env", "conda", "uv", "make",
     RESTART_WRAPPER}
)
_LAUNCHERS = (
    ("torchrun", re.compile(r"(^|/)torchrun$")),
    ("torchrun", re.compile(r"^torch\.distributed\.(run|launch)$|torch/distributed/(run|launch)\.py$")),
    ("accelerate", re.compile(r"(^|/)accelerate(-launch)?$|^accelerate\.commands\.(launch|accelerate_cli)$")),
    ("deepspeed", re.compile(r"(^|/)deepspeed$|^deepspeed\.launcher\.(launch|runner)$|deepspeed/launcher/")),
)
# Launchers told by their program alone (an argument with the same name is not one).
_PROGRAM_LAUNCHERS = (
    ("mpi", re.compile(r"(^|/)(mpirun|mpiexec|mpiexec\.hydra|orterun|prterun|prted|orted|hydra_pmi_proxy)$")),
    ("horovod", re.compile(r"(^|/)horovodrun$")),
)
_PROGRAM_LAUNCHER_COMMS = {"mpirun": "mpi", "mpiexec": "mpi", "mpiexec.hydra": "mpi", "orterun": "mpi",
                           "prterun": "mpi", "prted": "mpi", "orted": "mpi", "hydra_pmi_proxy": "mpi",
                           "horovodrun": "horovod"}
_PY_FLAGS_WITH_ARG = {"-W", "-X", "-c", "-m", "--check-hash-based-pycs"}
_OUTPUT_DIR_FLAGS = ("--output_dir", "--output-dir", "--out_dir", "--out-dir", "--save_dir", "--save-dir",
                     "--checkpoint_dir", "--checkpoint-dir", "--default_root_dir", "--ckpt_dir", "--logdir")


def _base(arg: str) -> str:
    return arg.rstrip("/").rsplit("/", 1)[-1]


def is_python(proc: ProcInfo) -> bool:
    if proc.is_python:
        return True
    exe = _base(proc.cmdline[0]) if proc.cmdline else proc.name
    return exe.startswith("python") or proc.name.startswith("python")


def launcher_kind(proc: ProcInfo) -> str | None:
    """torchrun / accelerate / deepspeed / mpi / horovod when this process is a launcher agent, else None."""
    return _launcher_kind(proc.name, tuple(proc.cmdline))


@lru_cache(maxsize=4096)  # asked several times a frame for every job's processes, which rarely change
def _launcher_kind(name: str, cmdline: tuple[str, ...]) -> str | None:
    if name == "pt_elastic":
        return "torchrun"
    if name in _PROGRAM_LAUNCHER_COMMS:
        return _PROGRAM_LAUNCHER_COMMS[name]
    program = [cmdline[0]] if cmdline else []
    if len(cmdline) > 1 and _base(cmdline[0]).startswith("python") and not cmdline[1].startswith("-"):
        program.append(cmdline[1])  # python /venv/bin/horovodrun ...
    for kind, pattern in _PROGRAM_LAUNCHERS:
        if any(pattern.search(arg) for arg in program):
            return kind
    args = list(cmdline[:6])
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            args.append(args[i + 1])
    for kind, pattern in _LAUNCHERS:
        for arg in args:
            if pattern.search(arg):
                if kind == "accelerate" and _base(arg).startswith("accelerate") and "launch" not in cmdline[:4]:
                    if not arg.endswith("-launch") and "accelerate.commands" not in arg:
                        continue  # `accelerate config` or `accelerate env`, not a launcher
                return kind
    return None


def script_name(cmdline: Iterable[str]) -> str:
    """The training script of a command line: train.py, -m package.module, or the program name."""
    args = list(cmdline)
    if not args:
        return "?"
    exe = _base(args[0])
    if exe.startswith("python") or exe in ("pypy", "pypy3"):
        what = _python_operand(args)
        if what is None or (what[0] == "-m" and not what[1]):
            return exe
        if what[0] == "-m":
            return what[1]
        return "python -c" if what[0] == "-c" else _base(what[1])
    # Launchers and entry points: the first argument that looks like a script.
    for arg in args[1:]:
        if arg.endswith(".py"):
            return _base(arg)
    return exe


# Hydra overrides naming where a run (or a multirun's runs, one folder each) writes its outputs.
_OUTPUT_DIR_OVERRIDES = ("hydra.sweep.dir=", "hydra.run.dir=")


def output_dir_from_cmdline(cmdline: Iterable[str], cwd: str | None) -> str | None:
    args = list(cmdline)
    for i, arg in enumerate(args):
        for override in _OUTPUT_DIR_OVERRIDES:
            if arg.startswith(override) and len(arg) > len(override):
                value = arg[len(override):]
                return value if value.startswith("/") or not cwd else os.path.normpath(os.path.join(cwd, value))
        for flag in _OUTPUT_DIR_FLAGS:
            value = None
            if arg == flag and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
            if value:
                if not value.startswith("/") and cwd:
                    value = os.path.normpath(os.path.join(cwd, value))
                return value
    return None


def _is_stop(proc: ProcInfo) -> bool:
    if proc.name in STOP_NAMES or proc.pid <= 1:
        return True
    return driver_kind(proc) is not None


def parent_in_job(parent: ProcInfo, child: ProcInfo, evidence: TrainingEvidence) -> bool:
    """Whether `parent` of a job's process `child` belongs to that job: a launcher agent, or a Python process
    with evidence that it trains (its children are its workers). A shell, a session manager, a named driver, a
    Python process that only spawns runs (a sweep driver), or one off the GPU whose child runs a script of
    its own (a driver that imported torch) is outside: never grouped, never signalled."""
    if _is_stop(parent):
        return False
    if launcher_kind(parent):
        return True
    if not is_python(parent) or evidence.why(parent.pid) is None:
        return False
    return parent.pid in evidence.on_gpu or not runs_own_script(child.cmdline, parent.cmdline)


def runs_own_script(cmdline: Iterable[str], parent_cmdline: Iterable[str]) -> bool:
    """A Python command line that runs a script file other than its parent's, not one inside an installed
    package (torch's compile worker) and not a multiprocessing child: a run a driver started, never a worker
    of a training process (DataLoader and multiprocessing workers, a Lightning rank re-running its script)."""
    args = list(cmdline)
    if not args or not _base(args[0]).startswith(("python", "pypy")):
        return False
    script = _script_arg(args)
    if script is None or "/site-packages/" in script or "/dist-packages/" in script:
        return False
    return _base(script) != script_name(parent_cmdline)


def _script_arg(args: list[str]) -> str | None:
    """The script path a Python command line runs; None for -m, -c or none."""
    what = _python_operand(args)
    return what[1] if what is not None and what[0] == "file" and what[1].endswith(".py") else None


def _python_operand(args: list[str]) -> tuple[str, str] | None:
    """What a Python command line runs, past the interpreter's own options: ("-m", module), ("-c", ""),
    ("file", path), or None when nothing follows them."""
    i = 1
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return ("-m", args[i + 1] if i + 1 < len(args) else "")
        if arg == "-c":
            return ("-c", "")
        if arg in _PY_FLAGS_WITH_ARG:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return ("file", arg)
    return None


def spawns_runs(proc: ProcInfo) -> bool:
    """A process with a descendant that runs a script of its own (`runs_own_script`): a driver."""
    return any(runs_own_script(c.cmdline, proc.cmdline) for c in proc.children)


def driver_off_gpu(proc: ProcInfo, on_gpu) -> bool:
    """A named driver (a notebook kernel with torch imported), or a process that starts runs of scripts of
    their own, is a job only where it uses a GPU itself."""
    if proc.pid in on_gpu or launcher_kind(proc):
        return False
    return driver_kind(proc) is not None or spawns_runs(proc)


def is_multiprocessing_child(proc: ProcInfo) -> bool:
    """A process multiprocessing started with the spawn or forkserver method (its code is its parent's)."""
    args = proc.cmdline
    return "--multiprocessing-fork" in args or any(a.startswith("from multiprocessing") for a in args[1:4])


@dataclass(frozen=True)
class JobGroup:
    root: int
    root_start: float
    main: tuple[int, ...]  # root, ranks and the processes between them (not workers)
    gpu_pids: tuple[int, ...]
    gpus: tuple[int, ...]  # GPU indices
    name: str
    launcher: str | None
    logs: tuple[str, ...]


def gpu_pids_of(gpus: Iterable[GpuSample]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for g in gpus:
        for p in g.processes:
            out.setdefault(p.pid, []).append(g.index)
    return out


def chain_root(pid: int, procs: dict[int, ProcInfo],
               evidence: TrainingEvidence = NO_EVIDENCE) -> tuple[int, list[int]]:
    """Walk up from pid while parents are inside its job (`parent_in_job`); returns (root, chain root-last)."""
    chain = [pid]
    root = pid
    seen = {pid}
    while True:
        parent = procs.get(procs[root].ppid)
        if parent is None or parent.pid in seen or not parent_in_job(parent, procs[root], evidence):
            break
        root = parent.pid
        seen.add(root)
        chain.append(root)
    # Above a launcher, only another launcher joins (deepspeed runner -> launch -> ranks).
    for i, p in enumerate(chain):
        if launcher_kind(procs[p]):
            top = i
            for j in range(i + 1, len(chain)):
                if launcher_kind(procs[chain[j]]):
                    top = j
            return chain[top], chain[: top + 1]
    return root, chain


def parents_to_watch(procs: dict[int, ProcInfo], pids: Iterable[int],
                     evidence: TrainingEvidence = NO_EVIDENCE) -> set[int]:
    """Parent pids the probe should report next so chains can reach their launcher. The first parent
    outside the job (a driver) is asked for too, so it is known to be outside; nothing above it is."""
    want: set[int] = set()
    for pid in pids:
        if pid not in procs or driver_off_gpu(procs[pid], evidence.on_gpu):
            continue
        root, _ = chain_root(pid, procs, evidence)
        top = procs[root]
        # Asked for as long as the chain tops out there (present or not): dropping a parent once it
        # was reported would make the request list flip every frame.
        if top.ppid > 1 and (is_python(top) or launcher_kind(top)):
            want.add(top.ppid)
    return want


def log_paths(procs: Iterable[ProcInfo], limit: int = 2) -> tuple[str, ...]:
    """Files the job's stdout/stderr go to, root first; pipes and terminals cannot be followed."""
    out: list[str] = []
    for p in procs:
        for target in (p.stdout, p.stderr):
            if target is not None and target.kind == "file" and target.path not in out:
                out.append(target.path)
    return tuple(out[:limit])


def discover(procs: dict[int, ProcInfo], gpus: list[GpuSample], claimed: Iterable[int] = (),
             candidates: Iterable[int] = (), ml_loaded: Iterable[int] = ()) -> list[JobGroup]:
    """Group the host's GPU processes, and the probe's job candidates (Python processes with torch
    loaded and stdout to a file, or started by a launcher: jobs before they open a CUDA context),
    into jobs, skipping pids already claimed (configured jobs). `ml_loaded`: processes the probe saw
    with an ML runtime mapped (evidence that a parent trains, see boundary.py)."""
    claimed = set(claimed)
    on_gpu = gpu_pids_of(gpus)
    candidates = set(candidates)
    evidence = TrainingEvidence.of(on_gpu, candidates, ml_loaded)
    groups: dict[int, dict] = {}
    for pid in sorted(set(on_gpu) | candidates):
        if pid in claimed or pid not in procs or driver_off_gpu(procs[pid], on_gpu):
            continue
        root, chain = chain_root(pid, procs, evidence)
        if root in claimed:
            continue
        g = groups.setdefault(root, {"main": [], "gpu_pids": [], "gpus": set(), "seeds": []})
        for p in reversed(chain):
            if p not in g["main"]:
                g["main"].append(p)
        g["seeds"].append(pid)
        if pid in on_gpu:
            g["gpu_pids"].append(pid)
            g["gpus"].update(on_gpu[pid])
    # A GPU process below another GPU process of the same tree (a DataLoader worker touching CUDA)
    # is part of its job already through the walk above.
    out = []
    for root, g in groups.items():
        rp = procs[root]
        launcher = None
        for p in g["main"]:
            launcher = launcher or launcher_kind(procs[p])
        ranks = [procs[p] for p in sorted(g["gpu_pids"] or g["seeds"]) if not launcher_kind(procs[p])]
        if launcher and ranks:
            name = script_name(ranks[0].cmdline)
        elif launcher:  # the launcher seen before its ranks: the script it will run
            name = next((_base(a) for a in rp.cmdline[1:] if a.endswith(".py")), script_name(rp.cmdline))
        elif is_multiprocessing_child(rp) and rp.ppid in procs:  # a Pool / Process run: its driver's code
            name = script_name(procs[rp.ppid].cmdline)
        else:
            name = script_name(rp.cmdline)
        ordered = [rp] + [procs[p] for p in g["main"] if p != root]
        out.append(JobGroup(root, rp.start_time, tuple(g["main"]), tuple(sorted(g["gpu_pids"])),
                            tuple(sorted(g["gpus"])), name, launcher, log_paths(ordered)))
    return out


def configured_groups(pids: Iterable[int], procs: dict[int, ProcInfo]) -> list[tuple[int, list[int]]]:
    """The separate process trees among a configured job's matches, oldest first.

    A regex such as `train.py` may match two independent runs (two shells, two sessions): each
    tree (matched processes linked by parent pids) is its own job. Returns [(root, main pids)]."""
    matched = [p for p in dict.fromkeys(pids) if p in procs]
    mset = set(matched)
    trees: dict[int, list[int]] = {}
    for pid in matched:
        top, seen = pid, {pid}
        while procs[top].ppid in mset and procs[top].ppid not in seen:
            top = procs[top].ppid
            seen.add(top)
        trees.setdefault(top, []).append(pid)
    out = [(root, sorted(members, key=lambda p: (p != root, p))) for root, members in trees.items()]
    out.sort(key=lambda rm: (procs[rm[0]].start_time, rm[0]))
    return out


def configured_group(pids: Iterable[int], procs: dict[int, ProcInfo]) -> tuple[int, list[int]] | None:
    """Root and main pids among the processes a configured job's regex or pid file matched."""
    matched = [p for p in pids if p in procs]
    if not matched:
        return None
    matched_set = set(matched)
    tops = [p for p in matched if procs[p].ppid not in matched_set]
    root = min(tops or matched, key=lambda p: (procs[p].start_time, p))
    return root, sorted(matched_set, key=lambda p: (p != root, p))
