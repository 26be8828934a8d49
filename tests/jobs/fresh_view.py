"""The reference the view-reuse tests compare a kept view with."""

from __future__ import annotations

from gpuwatch_tui.jobs.export import job_view


def fresh_view(job, now: float):
    """A view built from scratch, leaving the job's kept parts as they were."""
    parts = dict(job.view_parts)
    job.view_parts.clear()
    try:
        return job_view(job, now)
    finally:
        job.view_parts.clear()
        job.view_parts.update(parts)
