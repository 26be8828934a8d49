"""The start-up floor for bench_ui_startup.py: the smallest Textual app that paints the words the
bench waits for. Its first frame is what Textual and the interpreter cost before gpuwatch adds
anything (its imports, CSS, widgets, config)."""

from textual.app import App, ComposeResult
from textual.widgets import Static


class FloorApp(App):
    BINDINGS = [("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static("bench-local  Host")


if __name__ == "__main__":
    FloorApp().run()
