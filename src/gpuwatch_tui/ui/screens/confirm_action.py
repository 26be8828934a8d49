"""Ask before acting on a host: everything the action would touch, and the exact command, on one card.

The plan comes from the action service (`plan`, which does no I/O); nothing runs until the person
confirms. Cancel has the focus, so a stray enter at 3 a.m. changes nothing; `y` confirms.
"""

from __future__ import annotations

import shlex

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...actions.registry import by_name
from ..safe_rich import safe_rich

def target_command(target) -> str:
    """A target's command line as one string (a tuple of argv words is quoted as a shell would show it)."""
    cmd = getattr(target, "cmdline", None)
    if cmd is None:
        cmd = getattr(target, "command", "")
    if isinstance(cmd, (tuple, list)):
        return shlex.join(str(word) for word in cmd)
    return str(cmd or getattr(target, "name", ""))


def target_row(target) -> Text:
    """`pid  user  role  command` for one process the action would touch."""
    user = str(getattr(target, "user", None) or "?")
    role = str(getattr(target, "role", None) or "")
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append(f"{target.pid:>7} ", "bold")
    row.append(f"{user:<10.10} {role:<10.10} ")
    row.append(target_command(target))
    return row


class TargetRow(Static):
    """One process; its command line is cut to the card's width, the whole of it shows on hover."""


class ConfirmActionScreen(ModalScreen[bool]):
    """Dismisses with True only when the person confirms."""

    BINDINGS = [
        Binding("y", "confirm", "Yes, do it"),
        Binding("n", "cancel", "No"),
        Binding("escape", "cancel", "Cancel"),
        Binding("left,right", "toggle_button", "Switch button", show=False),
    ]

    def __init__(self, plan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        plan = self.plan
        spec = by_name(plan.action)
        cancel = getattr(plan, "slurm_cancel", None)
        with Vertical(id="confirm-box", classes=f"-{plan.action}"):
            title = Text()
            # A Slurm job is not signalled: Slurm cancels it (and frees its allocation) when scancel runs.
            title.append(f"{spec.title} (cancel with scancel)?" if cancel is not None else f"{spec.title}?", "bold")
            title.append(f"  {plan.label} on {plan.host}")
            yield Static(safe_rich(title), id="confirm-title")
            facts = Text()
            facts.append("host ", "bold")
            facts.append(plan.host)
            facts.append("   job ", "bold")
            facts.append(f"{plan.label} ({plan.job_id})")
            yield Static(safe_rich(facts), id="confirm-facts")
            count = len(plan.targets)
            if cancel is not None:  # scancel: Slurm ends every process of the job, on every node
                head = (f"Slurm job {cancel.job.job_id} ({cancel.job.state}) on {cancel.job.nodelist or '-'}, "
                        f"user {cancel.job.user or '?'}: every process on every node")
            else:
                head = f"{count} process{'es' if count != 1 else ''}:     pid user       role       command"
            yield Static(safe_rich(Text(head, style="bold", no_wrap=True, overflow="ellipsis")), id="confirm-targets-head")
            with VerticalScroll(id="confirm-targets"):
                for target in plan.targets:
                    row = TargetRow(safe_rich(target_row(target)), classes="confirm-target")
                    row.tooltip = safe_rich(target_command(target))
                    yield row
            yield Static(Text("command", style="bold"), classes="confirm-label")
            yield Static(safe_rich(Text(plan.command)), id="confirm-command")
            if plan.warnings:
                yield Static(safe_rich(Text("\n".join(f"! {w}" for w in plan.warnings))), id="confirm-warnings")
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel (n)", id="confirm-cancel")
                label = "scancel" if cancel is not None else (by_name(plan.action).confirm_label or "Do it")
                yield Button(f"{label} (y)", id="confirm-ok",
                             variant="error" if plan.action == "kill" else "warning")

    def on_mount(self) -> None:
        self.query_one("#confirm-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-ok")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_toggle_button(self) -> None:
        cancel = self.query_one("#confirm-cancel", Button)
        (self.query_one("#confirm-ok", Button) if cancel.has_focus else cancel).focus()
