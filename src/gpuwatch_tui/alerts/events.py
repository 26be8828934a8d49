"""One alert: what happened, to which job, host or GPU, and when. Sinks serialise it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..jobs.logtail import sanitize_line
from ..safe_text import slack_escape

from .triggers import SEVERITY


@dataclass(frozen=True)
class AlertEvent:
    trigger: str  # one of TRIGGERS
    subject: str  # job id, host name, or "host:gpuN": what the alert is about (rate limits key on it)
    host: str
    title: str
    message: str
    time: float = field(default_factory=time.time)
    job: str | None = None  # job name
    job_id: str | None = None
    gpu: int | None = None
    evidence: tuple[str, ...] = ()
    sinks: tuple[str, ...] = ()  # where this event goes (from its rule)
    rule: str = ""  # the rule's name, for the log and the hook
    short_id: str | None = None  # the job's short id (what `gpuwatch kill HOST ID` takes)

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.trigger, "warning")

    def one_line(self) -> str:
        """Title and message as one line without control characters (for terminals and toasts)."""
        return sanitize_line(f"{self.title}: {self.message}")

    def to_json(self) -> dict:
        return {
            "type": "alert", "trigger": self.trigger, "severity": self.severity, "subject": self.subject,
            "host": self.host, "job": self.job, "job_id": self.job_id, "gpu": self.gpu,
            "title": self.title, "message": self.message, "evidence": list(self.evidence),
            "time": round(self.time, 3), "rule": self.rule, "short_id": self.short_id,
        }

    def slack_body(self) -> dict:
        """Slack-compatible incoming-webhook JSON: `text` is what Slack (and Mattermost, Rocket.Chat,
        Discord's /slack endpoint) show; the event itself rides along for other receivers."""
        lines = [f"*{self.title}*", self.message]
        lines += [f"• {e}" for e in self.evidence[:5]]
        # Slack parses <...> (mentions, links) and &: escaped, a job named <!channel> pings no one.
        return {"text": "\n".join(slack_escape(sanitize_line(x)) for x in lines), "gpuwatch": self.to_json()}
