"""The Python stacks of a job (a py-spy dump): what the analysis says on top, one tab per process.

The suspect of a collective hang gets the first tab, marked; frames that differ between ranks are
marked `*` and coloured, so the one rank doing something else stands out.
"""

from __future__ import annotations

from ..safe_rich import safe_rich

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static, TabbedContent, TabPane

from ...actions.stack_analysis import frames_text
from ..palette import Palette, Themed
from ..widgets.key_footer import KeyFooter

SUSPECT_MARK = "suspect · "


def short_verdict(verdict) -> str:
    """A few words for a tab label: "idle in time.sleep", "active in _fused_adam", "stopped"."""
    if verdict is None:
        return "no verdict"
    if verdict.kind in ("launcher", "stopped", "gone"):
        return verdict.kind
    if verdict.kind == "error":
        return "no dump"
    if verdict.kind == "sleep":
        return "idle in time.sleep"
    state = "active" if verdict.active else "idle"
    if verdict.frame is None:
        return state
    return f"{state} in {verdict.frame.name}"


def process_label(process, verdict, suspect: bool) -> str:
    """"rank 1 · pid 1085 · idle in <module>", with the suspect mark first when it is one."""
    parts = [f"rank {process.rank}"] if process.rank is not None else []
    parts.append(f"pid {process.pid}")
    parts.append(short_verdict(verdict))
    return (SUSPECT_MARK if suspect else "") + " · ".join(parts)


def ordered_processes(report) -> list:
    """Suspects first, then ranks in order, then processes without a rank (the launcher) by pid."""
    suspects = {v.pid for v in report.analysis.suspects}

    def key(p):
        return (p.pid not in suspects, p.rank if p.rank is not None else 1 << 30, p.pid)

    return sorted(report.processes, key=key)


class ProcessStacks(Themed, Static):
    """Every thread of one process: the verdict on top, then frames innermost first."""

    def __init__(self, process, verdict, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.process = process
        self.verdict = verdict

    def on_mount(self) -> None:
        self.update(safe_rich(self.build()))

    def theme_changed(self, palette: Palette) -> None:
        self._palette = palette
        self.update(safe_rich(self.build()))

    def build(self) -> Text:
        p, process, verdict = self.palette, self.process, self.verdict
        text = Text()
        if verdict is not None:
            bad = verdict.kind in ("stopped", "gone", "error")
            text.append(f"{verdict.kind}: ", p.style("phase-crashed", bold=True) if bad else "bold")
            text.append(verdict.why + "\n")
        if process.cmdline:
            text.append(" ".join(process.cmdline) + "\n", p.style("muted"))
        if not process.ok:
            text.append(process.message or f"no dump ({process.error_code or 'failed'})", p.style("phase-crashed"))
            text.append("\n")
            if process.stderr:
                text.append(process.stderr.rstrip() + "\n", p.style("muted"))
        if process.resumed:
            text.append("py-spy left it stopped: SIGCONT was sent\n", p.style("log-match"))
        main = process.main_thread
        for thread in process.threads:
            name = thread.name or "thread"
            state = "active" if thread.active else "idle"
            text.append(f"\nThread {thread.os_thread_id or thread.thread_id} {name} ({state})"
                        f"{'  holds the GIL' if thread.owns_gil else ''}\n", "bold")
            # The rank diff is computed on the main thread only.
            differs = verdict.differs if (verdict is not None and thread is main) else ()
            for line in frames_text(thread, differs):
                if line.startswith("*"):
                    text.append(line + "\n", p.style("log-match", bold=True))
                else:
                    text.append(line + "\n")
        return text


class StackViewScreen(Screen):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("left", "previous_tab", "Previous", show=False),
        Binding("right", "next_tab", "Next", show=False),
    ]

    def __init__(self, report) -> None:
        super().__init__()
        self.report = report

    def compose(self) -> ComposeResult:
        report = self.report
        analysis = report.analysis
        head = Text()
        head.append(f"py-spy dump of {report.label} on {report.host}", "bold")
        head.append(f" · {time.strftime('%H:%M:%S', time.localtime(report.taken_at))}"
                    f" · {len(report.processes)} process{'es' if len(report.processes) != 1 else ''}")
        yield Static(safe_rich(head), id="stack-title")
        summary = Text()
        if analysis.suspects:
            summary.append("suspect: " + ", ".join(s.label for s in analysis.suspects) + "\n", "bold")
        summary.append(analysis.summary)
        findings = getattr(report, "findings", None)  # grouped stacks, stuck or moving, recorder, RAS
        for line in findings() if findings is not None else ():
            summary.append("\n" + line)
        yield Static(safe_rich(summary), id="stack-summary")
        saved = f"saved to {report.saved_to}" if report.saved_to else "not saved"
        yield Static(Text(f"{saved} · * marks frames that differ between ranks", no_wrap=True,
                          overflow="ellipsis"), id="stack-saved")
        suspects = {v.pid for v in analysis.suspects}
        with TabbedContent(id="stack-tabs"):
            for process in ordered_processes(report):
                verdict = analysis.of(process.pid)
                suspect = process.pid in suspects
                with TabPane(process_label(process, verdict, suspect), id=f"pid-{process.pid}",
                             classes="-suspect" if suspect else ""):
                    with VerticalScroll(classes="stack-scroll"):
                        yield ProcessStacks(process, verdict, classes="stack-frames")
        yield KeyFooter()

    def on_mount(self) -> None:
        # The pane's class does not reach its tab: mark the suspect's tab itself.
        tabs = self.query_one(TabbedContent)
        for pane in self.query(TabPane):
            if pane.has_class("-suspect"):
                tabs.get_tab(pane).add_class("-suspect")

    def theme_changed(self, palette: Palette) -> None:
        for widget in self.query(ProcessStacks):
            widget.theme_changed(palette)

    def action_close(self) -> None:
        self.app.pop_screen()

    def _step(self, delta: int) -> None:
        tabs = self.query_one(TabbedContent)
        ids = [pane.id for pane in self.query(TabPane)]
        if tabs.active in ids:
            tabs.active = ids[(ids.index(tabs.active) + delta) % len(ids)]

    def action_next_tab(self) -> None:
        self._step(1)

    def action_previous_tab(self) -> None:
        self._step(-1)
