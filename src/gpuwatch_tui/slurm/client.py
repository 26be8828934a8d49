"""The Slurm commands gpuwatch runs, as async calls returning typed records.

    client = SlurmClient(runner, slurm_config)
    queue = await client.queue()                  # QueueRead: jobs + problems (+ error)
    ended = await client.final_states(["123"])    # sacct, or scontrol when accounting is off
    result = await client.run_plan(plan_cancel(job, login))  # scancel, checked (slurm/cancel.py)
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass, field

from .records import SlurmJob
from .runner import CommandResult, CommandRunner
from .sacct import accounting_disabled, parse_sacct, sacct_argv
from .scontrol_job import parse_node_hosts, parse_scontrol_jobs, scontrol_argv
from .settings import SlurmConfig
from .squeue_json import parse_squeue_json, parse_version, squeue_json_argv, supports_json
from .squeue_text import parse_squeue_text, squeue_argv


@dataclass
class QueueRead:
    jobs: list[SlurmJob]
    at: float
    source: str  # "squeue" (text) or "squeue-json"
    problems: list[str] = field(default_factory=list)  # lines or records that could not be read
    error: str | None = None  # the whole read failed (login node down, squeue missing, ...)
    duration_s: float = 0.0


class SlurmClient:
    def __init__(self, runner: CommandRunner, config: SlurmConfig) -> None:
        self.runner = runner
        self.config = config
        self.user: str | None = None if config.user == "*" else config.user
        self._user_known = config.user is not None
        self.version: tuple[int, int] | None = None
        self.accounting: bool | None = None if config.sacct else False  # None: not tried yet
        # Node name -> host name, for %N in log paths (slurmstepd writes the host name); asked once per node.
        self.node_hosts: dict[str, str] = {}

    def _host_of(self, node: str) -> str:
        return self.node_hosts.get(node, node)

    async def _learn_node_hosts(self, text: str, first_nodes: set[str]) -> bool:
        """Where raw output still has %N, learn the host names of `first_nodes` (`scontrol show node`).
        True when one differs from its node name (the output must be read again)."""
        if "%N" not in text:
            return False
        missing = sorted(n for n in first_nodes if n not in self.node_hosts)
        if not missing:
            return False
        result = await self._run(["scontrol", "show", "node", "-o", "--", ",".join(missing)])
        learned = parse_node_hosts(result.stdout) if result.ok else {}
        for node in missing:
            self.node_hosts[node] = learned.get(node, node)
        return any(self.node_hosts[n] != n for n in missing)

    async def _run(self, argv: list[str]) -> CommandResult:
        return await self.runner.run(argv, timeout=self.config.command_timeout)

    async def whose_jobs(self) -> str | None:
        """The user whose jobs are listed: configured, the login node's SSH user, or who we are here."""
        if not self._user_known:
            if self.runner.where == "local":
                self.user = getpass.getuser()
            else:
                host = getattr(self.runner, "host", None)
                self.user = getattr(host, "user", None)
                if self.user is None:
                    result = await self._run(["id", "-un"])
                    self.user = result.stdout.strip() if result.ok and result.stdout.strip() else None
            self._user_known = self.user is not None
        return self.user

    async def slurm_version(self) -> tuple[int, int] | None:
        if self.version is None:
            result = await self._run(["squeue", "--version"])
            if result.ok:
                self.version = parse_version(result.stdout)
        return self.version

    async def queue(self) -> QueueRead:
        t0 = time.monotonic()
        user = await self.whose_jobs()
        if self.config.queue_format == "json" and supports_json(await self.slurm_version()):
            result = await self._run(squeue_json_argv(user))
            if result.ok:
                try:
                    jobs = parse_squeue_json(result.stdout, node_host=self._host_of)
                    if await self._learn_node_hosts(result.stdout, {j.nodes[0] for j in jobs if j.nodes}):
                        jobs = parse_squeue_json(result.stdout, node_host=self._host_of)
                    return QueueRead(jobs, time.time(), "squeue-json", duration_s=time.monotonic() - t0)
                except ValueError as exc:
                    problem = str(exc)
            else:
                problem = result.failure()
            # A version whose JSON we cannot read still has the text form: fall back, and say so.
            read = await self._queue_text(user, t0)
            read.problems.insert(0, f"squeue --json unusable, read the text form: {problem}")
            return read
        return await self._queue_text(user, t0)

    async def _queue_text(self, user: str | None, t0: float) -> QueueRead:
        result = await self._run(squeue_argv(user))
        if not result.ok:
            return QueueRead([], time.time(), "squeue", error=result.failure(), duration_s=time.monotonic() - t0)
        parsed = parse_squeue_text(result.stdout, self._host_of)
        if await self._learn_node_hosts(result.stdout, {j.nodes[0] for j in parsed.jobs if j.nodes}):
            parsed = parse_squeue_text(result.stdout, self._host_of)
        return QueueRead(parsed.jobs, time.time(), "squeue", parsed.problems, duration_s=time.monotonic() - t0)

    async def job_details(self, job_id: str) -> list[SlurmJob]:
        """`scontrol show job`: what slurmctld remembers (for MinJobAge after the end); [] if nothing."""
        result = await self._run(scontrol_argv(job_id))
        if not result.ok:
            return []
        jobs = parse_scontrol_jobs(result.stdout, self._host_of)
        if await self._learn_node_hosts(result.stdout, {j.nodes[0] for j in jobs if j.nodes}):
            jobs = parse_scontrol_jobs(result.stdout, self._host_of)
        return jobs

    async def final_states(self, job_ids: list[str]) -> tuple[list[SlurmJob], list[str]]:
        """Final state and exit code of jobs that left the queue: sacct where accounting answers,
        scontrol otherwise (and for jobs sacct does not know yet). Returns (jobs, problems)."""
        found: dict[str, SlurmJob] = {}
        problems: list[str] = []
        if job_ids and self.accounting is not False:
            result = await self._run(sacct_argv(job_ids))
            if result.ok:
                self.accounting = True
                jobs, problems = parse_sacct(result.stdout)
                found.update((j.job_id, j) for j in jobs if j.job_id in job_ids or j.raw_id in job_ids)
            elif accounting_disabled(result.stderr):
                self.accounting = False
            else:
                problems.append(result.failure())
        for job_id in job_ids:
            if job_id in found or any(j.raw_id == job_id for j in found.values()):
                continue
            for job in await self.job_details(job_id):
                if job.job_id == job_id or job.raw_id == job_id:
                    found[job.job_id] = job
        return list(found.values()), problems

    async def recently_ended(self) -> tuple[list[SlurmJob], list[str]]:
        """The user's jobs that ended within `ended_keep` (what a fresh `status` shows as ended)."""
        user = await self.whose_jobs()
        problems: list[str] = []
        if self.accounting is not False:
            since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - self.config.ended_keep))
            argv = sacct_argv([])[:-1] + [f"--starttime={since}", "--state=CA,CD,DL,F,NF,OOM,PR,TO,BF"]
            argv += [f"--user={user}"] if user else ["--allusers"]
            result = await self._run(argv)
            if result.ok:
                self.accounting = True
                jobs, problems = parse_sacct(result.stdout)
                return [j for j in jobs if j.is_ended], problems
            if accounting_disabled(result.stderr):
                self.accounting = False
            else:
                problems.append(result.failure())
        # No accounting: slurmctld still lists jobs that ended less than MinJobAge ago.
        result = await self._run(["scontrol", "show", "job", "-o"])
        if not result.ok:
            if "No jobs in the system" not in result.stdout + result.stderr:
                problems.append(result.failure())
            return [], problems
        jobs = parse_scontrol_jobs(result.stdout, self._host_of)
        if await self._learn_node_hosts(result.stdout, {j.nodes[0] for j in jobs if j.nodes and j.is_ended}):
            jobs = parse_scontrol_jobs(result.stdout, self._host_of)
        jobs = [j for j in jobs if j.is_ended and (user is None or j.user == user)]
        return jobs, problems

    async def run_plan(self, plan) -> CommandResult:
        """Run a confirmed CancelPlan (cancel.py)."""
        return await self._run(list(plan.argv))

