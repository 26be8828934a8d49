"""The registry's actions as Textual key bindings and action strings: read by the app, the command
palette and the help screen."""

from __future__ import annotations

from textual.binding import Binding

from ..actions.registry import ActionSpec

# Registry keys as typed -> Textual's key names.
_TEXTUAL_KEYS = {"?": "question_mark", "/": "slash"}
# Registry actions the app runs itself; every other one is a job action (`action_job_action(name)`).
_APP_METHODS = {
    "quit": "quit", "help": "help", "pause": "toggle_pause", "theme": "next_theme", "dismiss": "dismiss_job",
    "report": "write_report", "bundle": "write_bundle",
}


def textual_action(spec: ActionSpec) -> str:
    """The Textual action string a registry action runs."""
    method = _APP_METHODS.get(spec.name)
    return method if method is not None else f"job_action({spec.name!r})"


def binding_for(spec: ActionSpec) -> Binding:
    key = _TEXTUAL_KEYS.get(spec.key, spec.key)
    # The footer keeps to the app-wide keys (what fits in 80 columns); help and the palette list the rest.
    return Binding(key, textual_action(spec), spec.title, show=spec.scope == "app",
                   key_display=spec.key if key != spec.key else None)
