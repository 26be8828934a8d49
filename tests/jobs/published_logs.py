"""The corpus of published training logs (tests/data/published_logs): reading it and replaying an
excerpt through the real log interpreter and phase engine.

Each excerpt is fed as a probe would deliver it, one line (or one carriage-return frame) a second,
while the process is alive and busy on one CPU core; no GPU facts unless the excerpt's toml gives a
`[gpu]` table. At the last line the process either goes on running (`ends = "running"`) or exits with
an unknown status (`ends = "exits"`, as for a job gpuwatch did not start), and the engine is asked
for its verdict. Shared by tests/jobs/test_published_logs.py and scripts/score_published_logs.py.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.logtail import LogBuffer
from gpuwatch_tui.jobs.observation import ExitFacts, GpuReading, JobObservation, LogFacts, ResourceSample
from gpuwatch_tui.jobs.phase import infer_phase
from gpuwatch_tui.jobs.rules import RuleSet
from gpuwatch_tui.model import FdTarget, TailChunk

CORPUS = Path(__file__).resolve().parent.parent / "data" / "published_logs"
PHASES = ("starting", "loading", "compiling", "training", "evaluating", "checkpointing", "finished", "crashed",
          "stalled", "silent")
NUMBERS = ("step", "total", "epoch", "loss")
TRUTH_KEYS = ("phase", "reason", *NUMBERS)
ENDS = ("running", "exits")
T0 = 1_800_000_000.0
SAMPLE_EVERY_S = 5.0
LOG_PATH = "/srv/run/train.log"
# A piece of the log as it arrives: a whole line, or one frame of a bar redrawn with carriage returns.
_PIECE = re.compile(rb"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$")


@dataclass(frozen=True)
class Excerpt:
    name: str  # "<framework>/<short-name>"
    log: Path
    meta: dict
    truth: dict
    ends: str
    gpu: dict | None = None

    @property
    def framework(self) -> str:
        return self.meta["framework"]


@dataclass
class Outcome:
    """What the engine made of an excerpt at its last line."""

    phase: str
    reason: str | None
    evidence: tuple[str, ...]
    numbers: dict = field(default_factory=dict)  # step, total, epoch, loss as the progress tracker has them

    def value(self, key: str):
        return self.phase if key == "phase" else self.reason if key == "reason" else self.numbers.get(key)


def load_corpus(root: Path = CORPUS) -> list[Excerpt]:
    """Every excerpt with its toml, sorted by name; a malformed toml raises ValueError naming the file."""
    out = []
    for meta_path in sorted(root.glob("*/*.toml")):
        log = meta_path.with_suffix(".log")
        name = f"{meta_path.parent.name}/{meta_path.stem}"
        try:
            meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{meta_path}: {e}") from e
        truth = meta.get("truth", {})
        ends = meta.get("process", {}).get("ends")
        problems = [f"missing {k}" for k in ("framework", "source", "repository", "retrieved", "note")
                    if not meta.get(k)]
        if not log.is_file():
            problems.append(f"no {log.name} beside it")
        if meta.get("framework") != meta_path.parent.name:
            problems.append(f"framework {meta.get('framework')!r} is not its folder {meta_path.parent.name!r}")
        if ends not in ENDS:
            problems.append(f"[process] ends must be one of {ENDS}, not {ends!r}")
        problems += [f"unknown truth key {k!r}" for k in truth if k not in TRUTH_KEYS]
        if truth.get("phase") not in PHASES:
            problems.append(f"truth phase must be one of {PHASES}, not {truth.get('phase')!r}")
        if "reason" in truth and truth.get("phase") != "crashed":
            problems.append("truth reason is for a crashed phase only")
        problems += [f"truth {k} must be a number" for k in NUMBERS
                     if k in truth and (isinstance(truth[k], bool) or not isinstance(truth[k], (int, float)))]
        if problems:
            raise ValueError(f"{meta_path}: " + "; ".join(problems))
        out.append(Excerpt(name, log, meta, truth, ends, meta.get("gpu")))
    return out


def _sample(t: float, start: float, log_bytes: int, gpu: dict | None) -> ResourceSample:
    gpus = ()
    if gpu is not None:
        gpus = (GpuReading(0, gpu.get("util_pct"), gpu.get("mem_mib"), gpu.get("power_w"),
                           gpu.get("power_limit_w", 700.0)),)
    return ResourceSample(time=t, cpu_s=100.0 + (t - start), children_cpu_s=0.0, gpus=gpus, states=("R",),
                          log_bytes=log_bytes)


def replay(excerpt: Excerpt, rules: RuleSet | None = None) -> Outcome:
    """The excerpt fed line by line to the real interpreter, then the real engine's verdict at its end."""
    data = excerpt.log.read_bytes()
    buf = LogBuffer(max_lines=5000)
    interp = LogInterpreter(rules or RuleSet.with_user_rules())
    start = T0 - 60.0  # the process started a minute before its first line
    samples = [_sample(start, start, 0, excerpt.gpu)]
    t = T0
    size = 0
    for piece in _PIECE.findall(data):
        t += 1.0
        size += len(piece)
        new, live = buf.feed_and_take(TailChunk("j1.log0", LOG_PATH, piece, False, 0, size, t, None), t)
        if new:
            interp.feed_lines(new, t)
        if live:
            interp.feed_live(live, t)
        if t - samples[-1].time >= SAMPLE_EVERY_S:
            samples.append(_sample(t, start, size, excerpt.gpu))
    samples.append(_sample(t + 1.0, start, size, excerpt.gpu))
    progress = interp.progress.current
    log = LogFacts(
        path=LOG_PATH, total_bytes=buf.total_bytes, last_growth_at=buf.last_growth, hint=interp.hint,
        failure=interp.failure, failures=len(interp.failures), finished_at=interp.finished_at,
        progress=progress if progress.updated_at is not None else None, last_progress_at=interp.last_progress_at,
        exit_code=interp.exit_code, signal=interp.signal, phase_progress=dict(interp.phase_progress),
        phase_progress_phase=interp.phase_progress_phase, observed=True, size=size, mtime=t,
        finished_text=interp.finished_text, finished_seq=interp.finished_seq,
    )
    stdout = FdTarget(LOG_PATH, "file", append=False, size=size)
    obs = JobObservation(samples=samples, started_at=start, log=log, stdout=stdout, stderr=stdout,
                         unbuffered=True, unbuffered_reason="PYTHONUNBUFFERED=1", has_gpus=excerpt.gpu is not None)
    verdict = infer_phase(obs, t + 1.0, None)
    if excerpt.ends == "exits":
        obs.exit = ExitFacts(t + 1.5)
        verdict = infer_phase(obs, t + 2.0, verdict)
    else:
        verdict = infer_phase(obs, t + 2.0, verdict)
    numbers = {"step": progress.step, "total": progress.total, "epoch": progress.epoch, "loss": progress.loss}
    return Outcome(verdict.phase, verdict.detail, verdict.evidence, numbers)


def agrees(key: str, expected, got) -> bool:
    """Whether the engine's value for a truth key is the truth: words exactly, numbers to the digits printed."""
    if key in ("phase", "reason"):
        return got == expected
    if got is None or isinstance(got, str):
        return False
    if key == "loss":
        return math.isclose(got, expected, rel_tol=1e-3, abs_tol=5e-5)
    return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-6)
