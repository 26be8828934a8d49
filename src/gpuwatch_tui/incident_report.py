"""An incident report: one Markdown file about one job, paste-able into a ticket as it is.

Verdict, evidence and phase history; GPU utilisation, memory and power over the history window as
Unicode sparklines; the last log lines (sanitised, in a fence longer than any backtick run inside,
so the log cannot close it); the process tree; the latest saved py-spy dump; host facts. The
dashboard's `e` key and `gpuwatch report HOST JOB` both call `write_report`.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from platformdirs import user_state_dir

from .actions.dump import _safe, dump_prefix, dumps_dir
from .errors import GpuwatchError
from .jobs.job_lookup import find_job as lookup_job
from .jobs.logtail import sanitize_line
from .views import JobView
from .vocab import fmt_duration, fmt_utc

BLOCKS = "▁▂▃▄▅▆▇█"
GAP = "·"  # a sample that was not measured: a gap, never a zero
DEFAULT_LOG_LINES = 60


class ReportError(GpuwatchError):
    """The report could not be made or written; the words say why."""


def reports_dir() -> Path:
    return Path(user_state_dir("gpuwatch")) / "reports"


def sparkline(values, top: float) -> str:
    out = []
    for v in values:
        if v is None or top <= 0:
            out.append(GAP)
        else:
            out.append(BLOCKS[max(0, min(len(BLOCKS) - 1, int(v / top * (len(BLOCKS) - 1) + 0.5)))])
    return "".join(out)


def fenced(lines: list[str], info: str = "text") -> str:
    """A fence longer than the longest backtick run in the text: the text cannot end it early."""
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + info, *lines, fence])


def _md(text: str) -> str:
    """One line of remote text for Markdown prose: no controls, no HTML, no line breaks."""
    return sanitize_line(text).replace("<", "&lt;").replace(">", "&gt;")


def find_job(monitor, host: str, job: str, now: float) -> JobView:
    """The job `job` (short id, id, or a name only one job on the host has) names; ReportError when none
    does, job_lookup.AmbiguousJob when several live jobs share the name."""
    views = monitor.tracker.views(now) if monitor.tracker is not None else []
    view = lookup_job(views, host, job, now)
    if view is not None:
        return view
    names = ", ".join(sorted(f"{v.host}:{v.label}" for v in views)) or "none"
    raise ReportError(f"no job {job!r} on host {host!r} (jobs seen: {names})")


def latest_dump(host: str, job_id: str, directory: Path | None = None) -> Path | None:
    """The newest dump saved of the job whose short id is `job_id` on `host` (never another job's of the
    same name)."""
    if not job_id:
        return None
    try:
        found = sorted((directory or dumps_dir()).glob(f"{dump_prefix(host, job_id)}*.json"),
                       key=lambda p: p.stat().st_mtime)
    except OSError:
        return None
    return found[-1] if found else None


def job_file_stem(view: JobView) -> str:
    """`<host>_<short id>_<name>`: the start of a report's or bundle's file name (names repeat, ids do not)."""
    middle = f"{view.short_id}_" if view.short_id else ""
    return f"{_safe(view.host)}_{middle}{_safe(view.name)}"


def render_report(monitor, view: JobView, now: float, log_lines: int = DEFAULT_LOG_LINES,
                  dump_path: Path | None = None) -> str:
    out = [f"# Incident: {_md(view.label)} on {_md(view.host)}", "",
           f"Written {fmt_utc(now)} by gpuwatch.", "", "## Verdict", ""]
    detail = f" ({_md(view.detail)})" if view.detail else ""
    out.append(f"**{view.phase}**{detail} for {fmt_duration(max(0.0, now - view.since))} "
               f"(since {fmt_utc(view.since)})" if view.since else f"**{view.phase}**{detail}")
    if view.provisional:
        out.append(f"\nProvisional: {_md(view.provisional)}")
    if view.exit_code is not None or view.exit_signal is not None:
        out.append(f"\nExit: code {view.exit_code}, signal {view.exit_signal}")
    if view.advice:
        out.append(f"\nAdvice: {_md(view.advice)}")
    out += ["", "### Evidence", ""] + [f"- {_md(e)}" for e in view.evidence] + (["- (none)"] if not view.evidence else [])
    out += ["", "### Phase history", "", "| since (UTC) | phase |", "|---|---|"]
    out += [f"| {fmt_utc(p.since)} | {p.phase} |" for p in view.history] or ["| - | - |"]
    out += ["", "## GPUs", ""]
    rec = monitor.store.hosts.get(view.host)
    gpus = [(i, rec.gpus[i]) for i in view.gpus if rec is not None and i in rec.gpus]
    if not gpus:
        out.append("No GPU of this job was seen.")
    for index, g in gpus:
        latest = g.latest
        limit = latest.power_limit_w or max((p for p in g.power_history if p is not None), default=0)
        out += [f"GPU {index} ({_md(latest.name)}), {len(g.util_history)} samples, oldest first:", "",
                fenced([f"util  {sparkline(g.util_history, 100)}  now {latest.util_pct}%",
                        f"mem   {sparkline(g.mem_history, 100)}  now {latest.mem_used_mib} / {latest.mem_total_mib} MiB",
                        f"power {sparkline(g.power_history, limit)}  now {latest.power_w} W of {limit} W"]), ""]
    out += ["## Log", ""]
    lines = [sanitize_line(x) for x in monitor.tracker.log_lines(view.id, log_lines)] if monitor.tracker else []
    out.append(f"Last {len(lines)} lines of `{_md(view.log or '(no log)')}` ({view.log_lines} lines seen):")
    out += ["", fenced(lines or ["(no log lines)"]), ""]
    out += ["## Processes", ""]
    procs = monitor.tracker.procs(view.id) if monitor.tracker else []
    rows = []
    for p in procs:
        rows.append(f"{p.pid:>7} {p.ppid:>7} {p.state:<2} {p.cpu_s:>9.1f} {p.rss_bytes / 2**20:>8.0f}  "
                    + sanitize_line(" ".join(p.cmdline) or p.name, 300))
        rows += [f"{'':>7} {c.pid:>7} child  {sanitize_line(getattr(c, 'name', ''), 80)}" for c in p.children[:20]]
    out.append(fenced([f"{'PID':>7} {'PPID':>7} ST {'CPU s':>9} {'RSS MiB':>8}  COMMAND", *rows]
                      if rows else ["(no live process)"]))
    if view.leftovers is not None:  # what the job left running after its main process went
        left = view.leftovers
        out += ["", "## Leftovers", "",
                f"{left.count} process{'es' if left.count != 1 else ''} still running since {fmt_utc(left.since)}"
                f" (the top process, pid {left.root_pid}, went), holding {left.gpu_memory_bytes / 2**30:.1f} GiB"
                f" of GPU memory on GPU {', '.join(map(str, left.gpus)) or '-'}:", ""]
        out.append(fenced([f"{'PID':>7} ST {'GPU MiB':>8} GPUS  COMMAND"] + [
            f"{p.pid:>7} {p.state or '?':<2} {p.gpu_memory_bytes / 2**20:>8.0f} {','.join(map(str, p.gpus)) or '-':<5} "
            + sanitize_line(" ".join(p.cmdline) or p.name, 300) for p in left.processes]))
    out += ["", "## Latest py-spy dump", ""]
    if dump_path is None:
        out.append("None saved for this job.")
    else:
        try:
            text = json.dumps(json.loads(dump_path.read_text(encoding="utf-8")), indent=1)
            body = [sanitize_line(x) for x in text.splitlines()[:300]]
            out += [f"From `{_md(str(dump_path))}`:", "", fenced(body, "json")]
        except (OSError, ValueError) as exc:
            out.append(f"Could not read {_md(str(dump_path))}: {exc}")
    out += ["", "## Host", ""]
    feed = monitor.sessions.get(view.host)
    hello = getattr(feed, "hello", None) or {}
    facts = {"state": rec.state if rec else "?", "gpu source": rec.gpu_source if rec else None,
             "hostname": hello.get("hostname"), "python": hello.get("python"), "cpus": hello.get("cpu_count"),
             "uptime": fmt_duration(now - hello["boot_time"]) if hello.get("boot_time") else None,
             "GPU models": ", ".join(sorted({g.latest.name for g in rec.gpus.values()})) if rec and rec.gpus else None}
    out += [f"- {k}: {_md(str(v))}" for k, v in facts.items() if v is not None]
    return "\n".join(out) + "\n"


def write_report(monitor, host: str, job: str, directory: Path | str | None = None,
                 log_lines: int = DEFAULT_LOG_LINES, now: float | None = None) -> Path:
    """Write the incident report for `job` (name or id) on `host`; returns the file's path.
    Raises ReportError (no such job, or the directory cannot be written) with a clear message."""
    now = time.time() if now is None else now
    view = find_job(monitor, host, job, now)
    text = render_report(monitor, view, now, log_lines, latest_dump(view.host, view.short_id))
    return save_report(text, view, now, directory)


def save_report(text: str, view: JobView, now: float, directory: Path | str | None = None) -> Path:
    """Write a rendered report under a name with host, job and time (never over another one).
    Only file I/O: the dashboard runs it off its loop. Raises ReportError when it cannot write."""
    directory = Path(directory) if directory is not None else reports_dir()
    path = directory / f"{job_file_stem(view)}_{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}.md"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        n = 1
        while path.exists():
            n += 1
            path = path.with_name(f"{path.stem.rsplit('~', 1)[0]}~{n}.md")
        tmp = path.with_suffix(".md.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)  # no half-written report left on a full disk
            raise
    except OSError as exc:
        raise ReportError(f"cannot write the report in {directory}: {exc.strerror or exc}") from None
    return path
