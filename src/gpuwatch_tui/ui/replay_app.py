"""The dashboard on a recording: GpuwatchApp plus the replay keys (from the action registry)."""

from __future__ import annotations

from textual.binding import Binding

from ..actions.registry import REPLAY_ACTIONS, ActionSpec
from .app import GpuwatchApp
from .bindings import textual_action
from .replay_source import ReplaySource
from .run import user_themes_dir
from .theme_files import DEFAULT_THEME

# Registry keys as typed -> Textual's key names.
_KEYS = {"space": "space", "+": "plus", "-": "minus", "]": "right_square_bracket", "[": "left_square_bracket",
         "}": "right_curly_bracket", "{": "left_curly_bracket", ">": "greater_than_sign", "<": "less_than_sign"}
MINUTE = 60.0


def replay_binding(spec: ActionSpec) -> Binding:
    key = _KEYS.get(spec.key, spec.key)
    return Binding(key, textual_action(spec), spec.title, show=spec.name == "replay_play",
                   key_display=spec.key if key != spec.key else None)


class ReplayApp(GpuwatchApp):
    BINDINGS = [replay_binding(spec) for spec in REPLAY_ACTIONS]

    def __init__(self, source: ReplaySource, **kwargs) -> None:
        super().__init__(source, **kwargs)
        self._replay_moves = {
            "replay_play": source.toggle_play, "replay_faster": source.faster, "replay_slower": source.slower,
            "replay_forward": lambda: source.seek_by(MINUTE), "replay_back": lambda: source.seek_by(-MINUTE),
            "replay_forward_far": lambda: source.seek_by(10 * MINUTE),
            "replay_back_far": lambda: source.seek_by(-10 * MINUTE),
            "replay_next_change": self._next_change, "replay_previous_change": self._previous_change,
        }

    def offered_actions(self) -> tuple[ActionSpec, ...]:
        return super().offered_actions() + REPLAY_ACTIONS

    def on_mount(self) -> None:
        super().on_mount()
        if self.source.damage:
            self.notify(self.source.damage, title="recording damaged", severity="warning", timeout=15)

    def action_job_action(self, name: str) -> None:
        move = self._replay_moves.get(name)
        if move is None:
            super().action_job_action(name)  # k/u/d: the source refuses, with the reason
            return
        move()
        self._refresh_screen()  # keys are not throttled: show where the clock went at once

    def _next_change(self) -> None:
        if self.source.next_phase_change() is None:
            self.notify("no later phase change in this recording", timeout=3)

    def _previous_change(self) -> None:
        if self.source.previous_phase_change() is None:
            self.notify("no earlier phase change in this recording", timeout=3)


def run_replay_app(timeline, *, theme: str | None = None, speed: int = 1, playing: bool = True,
                   loop: bool = False, start: float | None = None) -> int:
    """Run the replay dashboard until the person quits; returns the exit code."""
    history = timeline.history
    source = ReplaySource(timeline, history=history, speed=speed, playing=playing, loop=loop, start=start)
    app = ReplayApp(source, theme=theme or DEFAULT_THEME, themes_dir=user_themes_dir(), readonly=False,
                    history=history)
    result = app.run()
    return result if isinstance(result, int) else (app.return_code or 0)
