"""Where a job ends going up the process tree: which parent of a training process is still inside its job.

A job is rooted at its training process or at its launcher agent. A training process is one with evidence of
training: it holds a GPU context, the probe named it a job candidate, or it has an ML runtime (torch, JAX,
TensorFlow, the CUDA runtime) mapped. A parent with that evidence keeps its children in its job (DataLoader
and multiprocessing workers, the ranks of `torch.multiprocessing.spawn`, compile workers). A parent without
it merely spawns runs: a sweep driver, a harness running jobs one after another. Named drivers (a notebook
kernel, a test harness, a workflow runner) never join a job even with torch loaded: what they start are runs
of their own. Such a parent is never inside a job, so no kill or restart plan can name it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from ..model import ProcInfo

# Programs that start runs without being one: notebook kernels, test harnesses, workflow and sweep runners,
# servers. Matched on the program a command line runs (`_program`), never on its other arguments.
_DRIVERS = (
    ("notebook", re.compile(r"^(ipykernel_launcher|ipykernel|colab_kernel_launcher|jupyter(-[a-z]+)?)( |$)")),
    ("test-harness", re.compile(r"^(pytest|py\.test|tox|unittest)( |$)")),
    ("workflow", re.compile(r"^(snakemake|nextflow|luigi|airflow|prefect|dvc)( |$)")),
    ("sweep", re.compile(r"^(wandb agent|optuna|nni|nnictl|ray start|raylet|gcs_server)( |$)|^ray::")),
    ("server", re.compile(r"^(vllm\.entrypoints\S*|vllm serve|gunicorn|uvicorn)( |$)")),
)
_PY_FLAGS_WITH_ARG = frozenset({"-W", "-X", "--check-hash-based-pycs"})


def _program(cmdline: tuple[str, ...]) -> str:
    """What a command line runs, in words: its executable, or for an interpreter its -m module or script,
    followed by the first argument (`wandb agent`, `ray start`)."""
    if not cmdline:
        return ""
    words = list(cmdline)
    exe = words[0].rstrip("/").rsplit("/", 1)[-1]
    i = 1
    if exe.startswith("python") or exe in ("pypy", "pypy3"):
        while i < len(words) and words[i].startswith("-") and words[i] != "-m":
            i += 2 if words[i] in _PY_FLAGS_WITH_ARG else 1
        if i < len(words) and words[i] == "-m":
            i += 1
        if i >= len(words):
            return exe
        exe = words[i].rstrip("/").rsplit("/", 1)[-1]
        if exe.endswith(".py"):
            exe = exe[:-3]
        i += 1
    return exe if i >= len(words) else exe + " " + words[i]


def driver_kind(proc: ProcInfo) -> str | None:
    """notebook / test-harness / workflow / sweep / server when this process is a named driver, else None."""
    return _driver_kind(tuple(proc.cmdline[:8]))


@lru_cache(maxsize=4096)  # asked for every parent of every job each time a host's processes change
def _driver_kind(cmdline: tuple[str, ...]) -> str | None:
    program = _program(cmdline)
    for kind, pattern in _DRIVERS:
        if pattern.search(program):
            return kind
    return None


@dataclass(frozen=True)
class TrainingEvidence:
    """Which of a host's processes are training processes, as the frame shows: on a GPU, a probe job
    candidate (torch mapped with stdout to a file, or started by a launcher), or an ML runtime mapped."""

    on_gpu: frozenset[int] = frozenset()
    candidates: frozenset[int] = frozenset()
    ml_loaded: frozenset[int] = frozenset()

    @classmethod
    def of(cls, on_gpu: Iterable[int] = (), candidates: Iterable[int] = (),
           ml_loaded: Iterable[int] = ()) -> "TrainingEvidence":
        return cls(frozenset(on_gpu), frozenset(candidates), frozenset(ml_loaded))

    def why(self, pid: int) -> str | None:
        """The evidence that `pid` trains, in words, or None."""
        if pid in self.on_gpu:
            return "holds a GPU context"
        if pid in self.candidates:
            return "a job candidate"
        if pid in self.ml_loaded:
            return "an ML runtime loaded"
        return None


NO_EVIDENCE = TrainingEvidence()
