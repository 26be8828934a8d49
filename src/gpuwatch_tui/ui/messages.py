"""Messages the dashboard posts to itself."""

from __future__ import annotations

from textual.message import Message


class SourceChanged(Message):
    """The source has new data. Only the newest matters, so a queued one is replaced."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SourceChanged)


class ActionFinished(Message):
    """A confirmed action (kill, restart, dump) has run; posted by its worker, handled by the app.

    `outcome` is the service's ActionOutcome; `error` is set instead when running it raised (the
    service reports refusals inside the outcome, so this is the unexpected case)."""

    def __init__(self, plan, outcome=None, error: str | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.outcome = outcome
        self.error = error


class ReportWritten(Message):
    """`e`: the incident report's worker is done; `path` where it was written, or `error` in words."""

    def __init__(self, job, path=None, error: str | None = None) -> None:
        super().__init__()
        self.job = job
        self.path = path
        self.error = error
