"""The job pane's leftovers section: the processes a job left running after its main process or launcher
went, how much GPU memory they hold and where, since when, and the key that ends them."""

from __future__ import annotations

import shlex

from rich.text import Text

from ...actions.registry import by_name
from ...views import LeftoverView
from .. import formatting

GIB = 2**30


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"  # as nvidia-smi and the grid count GPU memory
from .themed_static import ThemedStatic

MAX_ROWS = 4  # more are counted, not listed: the log keeps the room


class LeftoversPanel(ThemedStatic):
    def build(self, left: LeftoverView, now: float, readonly: bool) -> Text:
        p = self.palette
        text = Text()
        n = left.count
        text.append(f"leftovers: {n} process{'es' if n != 1 else ''}", p.style("leftover", bold=True))
        gone = f"pid {left.root_pid}" if left.root_pid is not None else "its main process"
        if left.gpu_memory_bytes:
            gpus = ", ".join(map(str, left.gpus))
            verb = "holds" if n == 1 else "hold"
            text.append(f" {verb} {gib(left.gpu_memory_bytes)} on GPU {gpus}", p.style("leftover"))
        else:
            text.append(" still running", p.style("leftover"))
        text.append(f"  ({gone} went {formatting.age(now - left.since)} ago)", p.style("muted"))
        if not readonly:
            spec = by_name("reap")
            text.append(f"  {spec.key}: {spec.title.lower()}", p.style("muted"))
        for proc in left.processes[:MAX_ROWS]:
            text.append("\n")
            text.append(f"  {proc.pid:>7} ", p.style("muted"))
            text.append(f"{proc.state or '?':<2}")
            held = f"{gib(proc.gpu_memory_bytes)} on GPU {','.join(map(str, proc.gpus))}" if proc.gpus \
                else "no GPU memory"
            text.append(f" {held:<22} ", p.style("leftover" if proc.gpus else "muted"))
            text.append(proc.name + "  ", p.style("muted"))
            text.append(shlex.join(proc.cmdline) if proc.cmdline else "")
        if n > MAX_ROWS:
            text.append(f"\n  and {n - MAX_ROWS} more", p.style("muted"))
        return text
