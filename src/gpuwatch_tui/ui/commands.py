"""Command palette entries: the registry's actions this dashboard offers, and one per job to open it."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..actions.registry import ActionSpec
from .bindings import textual_action


class GpuwatchCommands(Provider):
    def _command(self, spec: ActionSpec) -> tuple[str, object, str]:
        # run_action goes through the app's check_action, as the key does.
        return spec.title, partial(self.app.run_action, textual_action(spec)), f"{spec.key}: {spec.description}"

    def _commands(self) -> list[tuple[str, object, str]]:
        app = self.app
        commands = [self._command(spec) for spec in app.offered_actions()]
        for job in app.source.jobs():
            commands.append((f"Open job {job.name} on {job.host}", partial(app.open_job, job.id), job.phase))
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
