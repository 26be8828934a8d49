"""One line about the job's output directory: files, size, newest file and its age."""

from __future__ import annotations

from rich.text import Text

from ...model import DirStat
from .. import formatting
from .themed_static import ThemedStatic


class OutdirLine(ThemedStatic):
    def build(self, stat: DirStat | None, now: float) -> Text:
        p = self.palette
        text = Text()
        text.append("output ", p.style("muted"))
        if stat is None:
            text.append("no output directory known", p.style("muted"))
            return text
        text.append(stat.path)
        if stat.error:
            text.append(f"  {stat.error}", p.style("host-bad"))
        elif not stat.exists:
            text.append("  does not exist (yet)", p.style("host-warn"))
        else:
            text.append(f"  {stat.files} files, {formatting.size(stat.total_bytes)}", p.style("muted"))
            if stat.newest_name:
                text.append("  newest ", p.style("muted"))
                text.append(stat.newest_name)
                if stat.newest_mtime is not None:
                    text.append(f" {formatting.age(now - stat.newest_mtime)} ago", p.style("muted"))
        return text
