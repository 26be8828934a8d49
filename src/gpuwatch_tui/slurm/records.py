"""One Slurm job as gpuwatch sees it: typed, whichever command or Slurm version it was read from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# States in which a job holds nodes and its processes run (squeue's long names).
ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
                           "CONFIGURING", "RESIZING"})
PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                            "SPECIAL_EXIT"})
# States a job ends in (sacct / scontrol after it left the queue).
ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"})


@dataclass(frozen=True)
class SlurmJob:
    job_id: str  # the id scancel and scontrol take: "123", or "123_4" for an array task
    name: str
    user: str
    state: str  # squeue's long form: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    reason: str | None = None  # why it is pending (or held); None when Slurm says "None"
    nodes: tuple[str, ...] = ()  # expanded host names, in Slurm's order (the first is the batch host)
    nodelist: str = ""  # Slurm's compressed form, as printed: gpu[01-04]
    elapsed_s: int | None = None
    time_limit_s: int | None = None  # None: UNLIMITED (or unknown)
    stdout: str | None = None  # paths with every %-pattern Slurm (or we) could fill filled in
    stderr: str | None = None
    exit_code: int | None = None  # for ended jobs: the batch script's exit status
    exit_signal: int | None = None  # ... or the signal that ended it
    array_job_id: str | None = None
    array_task_id: str | None = None
    raw_id: str | None = None  # Slurm's unique numeric job id (an array task has its own)
    partition: str | None = None
    work_dir: str | None = None
    submit_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    source: str = "squeue"  # squeue, squeue-json, scontrol, sacct: where the facts came from
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def base_state(self) -> str:
        """'CANCELLED by 0' -> 'CANCELLED' (sacct adds who cancelled)."""
        return self.state.split()[0] if self.state else ""

    @property
    def is_pending(self) -> bool:
        return self.base_state in PENDING_STATES

    @property
    def is_active(self) -> bool:
        return self.base_state in ACTIVE_STATES

    @property
    def is_ended(self) -> bool:
        return self.base_state in ENDED_STATES

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("extra")
        out["nodes"] = list(self.nodes)
        out["pending"] = self.is_pending
        out["active"] = self.is_active
        out["ended"] = self.is_ended
        return out
