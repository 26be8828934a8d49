"""Command palette entries: open a job, pause, next theme, and the job actions."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class GpuwatchCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        app = self.app
        commands = [
            ("Pause / resume display", app.action_toggle_pause, "p: freeze the screen; sampling continues"),
            ("Next theme", app.action_next_theme, "t: cycle gpuwatch themes"),
            ("Kill selected job", partial(app.action_job_action, "kill"), "k"),
            ("Restart selected job with -u", partial(app.action_job_action, "restart"), "u"),
            ("py-spy dump of selected job", partial(app.action_job_action, "dump"), "d"),
            ("Dismiss selected job (ended jobs only)", app.action_dismiss_job, "x: drop its final verdict"),
            ("Help: all keys", app.action_help, "?"),
        ]
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
