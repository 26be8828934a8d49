"""The Slurm view over time: the queue as last read, and jobs that left it with their final state.

`poll()` reads the queue once; a job seen before and gone now is looked up in sacct (or scontrol)
for its final state and exit code and kept, as ended, for `ended_keep` seconds. The first poll
also lists the user's recently ended jobs, so a fresh `gpuwatch status` shows them too.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .client import QueueRead, SlurmClient
from .records import SlurmJob


class SlurmWatch:
    def __init__(self, client: SlurmClient) -> None:
        self.client = client
        self.queue: dict[str, SlurmJob] = {}
        self.ended: dict[str, tuple[SlurmJob, float]] = {}  # id -> (final record, when we saw it end)
        self.last: QueueRead | None = None
        self.problems: list[str] = []
        self.polls = 0

    async def poll(self) -> QueueRead:
        read = await self.client.queue()
        self.last = read
        self.problems = list(read.problems)
        now = time.time()
        if read.error is not None:
            return read  # keep the last known queue: a failed read is not an empty queue
        current = {j.job_id: j for j in read.jobs}
        # A job in squeue in an ended state (COMPLETING done, or kept briefly) counts as ended already.
        for job in list(current.values()):
            if job.is_ended:
                self.ended[job.job_id] = (job, now)
                del current[job.job_id]
        # The pending rest of an array ("12_[3-9]") changes its id as tasks start: it did not end.
        left = [job_id for job_id in self.queue
                if job_id not in current and job_id not in self.ended and "[" not in job_id]
        if self.polls == 0:
            recent, problems = await self.client.recently_ended()
            self.problems += problems
            for job in recent:
                if job.job_id not in current:
                    self.ended.setdefault(job.job_id, (job, now))
        if left:
            finals, problems = await self.client.final_states(left)
            self.problems += problems
            by_id = {j.job_id: j for j in finals}
            by_raw = {j.raw_id: j for j in finals if j.raw_id}
            for job_id in left:
                before = self.queue[job_id]
                final = by_id.get(job_id) or by_raw.get(before.raw_id or "")
                self.ended[job_id] = (_merge(before, final), now)
        self.queue = current
        keep = self.client.config.ended_keep
        self.ended = {k: v for k, v in self.ended.items() if now - v[1] <= keep}
        self.polls += 1
        return read

    def jobs(self) -> list[SlurmJob]:
        """Running first, then pending, then ended (most recent first)."""
        active = [j for j in self.queue.values() if not j.is_pending]
        pending = [j for j in self.queue.values() if j.is_pending]
        ended = [j for j, _ in sorted(self.ended.values(), key=lambda e: -e[1])]
        return active + pending + ended

    def running(self) -> list[SlurmJob]:
        return [j for j in self.queue.values() if j.is_active and j.nodes]

    def to_json(self) -> dict:
        last = self.last
        return {
            "login": self.client.config.login,
            "user": self.client.user,
            "source": last.source if last else None,
            "read_at": last.at if last else None,
            "read_s": round(last.duration_s, 4) if last else None,
            "error": last.error if last else None,
            "accounting": self.client.accounting,
            "problems": self.problems,
            "jobs": [j.to_json() for j in self.jobs()],
        }


def _merge(before: SlurmJob, final: SlurmJob | None) -> SlurmJob:
    """The final record, with what only the queue knew (expanded log paths, nodes) kept."""
    if final is None:
        # Gone from the queue and unknown to sacct/scontrol (purged already): say so, guess nothing.
        return replace(before, state="UNKNOWN", reason="left the queue; no record of its end", source="squeue")
    return replace(final, stdout=final.stdout or before.stdout, stderr=final.stderr or before.stderr,
                   nodes=final.nodes or before.nodes, nodelist=final.nodelist or before.nodelist,
                   name=final.name or before.name, job_id=before.job_id)
