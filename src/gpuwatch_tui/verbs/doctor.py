"""`gpuwatch doctor`: every host diagnosed at once, printed as text or JSON."""

from __future__ import annotations

import asyncio
import textwrap

from ..config import Config
from ..jobs.logtail import sanitize_line
from ..doctor.checks import FAIL, SKIP, WARN, HostReport
from ..doctor.host_checks import diagnose_host

JSON_SCHEMA_VERSION = 1
MARKS = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": " -- "}


async def run_doctor(config: Config) -> list[HostReport]:
    connector = None
    if any(not h.local for h in config.hosts):
        from ..transport.ssh import SshConnector  # asyncssh only when a host needs it

        connector = SshConnector(config.settings)
    try:
        return list(await asyncio.gather(*(diagnose_host(h, config.settings, connector) for h in config.hosts)))
    finally:
        if connector is not None:
            await connector.close()


def doctor_failed(reports: list[HostReport]) -> bool:
    return any(r.status == FAIL for r in reports)


def doctor_json(reports: list[HostReport]) -> dict:
    counts = {s: sum(1 for r in reports for c in r.checks if c.status == s) for s in ("pass", WARN, FAIL, SKIP)}
    return {"version": JSON_SCHEMA_VERSION, "ok": not doctor_failed(reports), "counts": counts,
            "hosts": [r.to_json() for r in reports]}


MIN_WRAP_ROOM = 30  # narrower than this after the check's name, lines are left to the terminal


def wrapped(lead: str, text: str, width: int | None) -> list[str]:
    """`lead` + `text`, continued under the text's first column when it is wider than `width`: a fingerprint
    or a command moves whole to the next line instead of being split by the terminal's own wrap."""
    if width is None or len(lead) + len(text) <= width or width - len(lead) < MIN_WRAP_ROOM:
        return [lead + text]
    return textwrap.wrap(text, width, initial_indent=lead, subsequent_indent=" " * len(lead),
                         break_long_words=False, break_on_hyphens=False) or [lead]


def render_doctor(reports: list[HostReport], width: int | None = None) -> str:
    """The reports as text; with `width` (a terminal's), long summaries and fixes wrap at word boundaries."""
    lines: list[str] = []
    for report in reports:
        lines.append(f"{report.host}: {report.status}")
        for check in report.checks:
            # Summaries carry words from the host (banner, errors): no control bytes reach the terminal.
            lines.extend(wrapped(f"  [{MARKS[check.status]}] {check.name:<17} ", sanitize_line(check.summary), width))
            if check.fix and check.status in (WARN, FAIL):
                lines.extend(wrapped(f"  {'':6} {'':<17} -> ", sanitize_line(check.fix), width))
        lines.append("")
    bad = [r.host for r in reports if r.status == FAIL]
    lines.append(f"{len(reports)} host(s) checked; " + (f"failing: {', '.join(bad)}" if bad else "no failures"))
    return "\n".join(lines)
