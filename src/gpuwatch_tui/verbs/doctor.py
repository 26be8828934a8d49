"""`gpuwatch doctor`: every host diagnosed at once, printed as text or JSON."""

from __future__ import annotations

import asyncio

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


def render_doctor(reports: list[HostReport]) -> str:
    lines: list[str] = []
    for report in reports:
        lines.append(f"{report.host}: {report.status}")
        for check in report.checks:
            # Summaries carry words from the host (banner, errors): no control bytes reach the terminal.
            lines.append(f"  [{MARKS[check.status]}] {check.name:<17} {sanitize_line(check.summary)}")
            if check.fix and check.status in (WARN, FAIL):
                lines.append(f"  {'':6} {'':<17} -> {sanitize_line(check.fix)}")
        lines.append("")
    bad = [r.host for r in reports if r.status == FAIL]
    lines.append(f"{len(reports)} host(s) checked; " + (f"failing: {', '.join(bad)}" if bad else "no failures"))
    return "\n".join(lines)
