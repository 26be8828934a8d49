"""What the job is doing, why we think so (evidence with numbers), and which key helps."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from ...actions.registry import key_hint
from ...views import JobView
from .. import formatting, levels
from .themed_static import ThemedStatic


class VerdictPanel(ThemedStatic):
    def build(self, job: JobView, now: float) -> Text:
        p = self.palette
        phase = job.phase or "unknown"
        text = Text()
        text.append(f" {phase.upper()} ", p.style(levels.phase_variable(phase), bold=True) + Style(reverse=True))
        if job.detail:
            text.append(f" {job.detail}", p.style(levels.phase_variable(phase), bold=True))
        since = job.since
        if since:  # 0 / None: never seen running, no meaningful "since"
            text.append(f"  for {formatting.age(now - since)}", p.style("muted"))
        text.append(f"  confidence {job.confidence:.0%}", p.style("muted"))
        if job.exit_code is not None:
            text.append(f"  exit code {job.exit_code}", p.style("phase-crashed", bold=True))
        if job.provisional:  # the same words `status` prints: too little history for a final verdict
            text.append(f"\n ? provisional: {job.provisional}", p.style("muted"))
        for fact in job.evidence:
            text.append("\n • ", p.style("muted"))
            text.append(fact)
        if job.advice:
            text.append("\n → ", p.style("phase-training", bold=True))
            text.append(job.advice, Style(bold=True))
        # The engine names actions; here they become keys ("u: restart with -u"), those this dashboard offers.
        offered = {spec.name for spec in self.app.offered_actions()}
        keys = [key_hint(name) for name in job.actions if name in offered]
        if keys:
            text.append("\n   " + " · ".join(keys), p.style("phase-training", bold=True))
        return text
