"""The readable table that `gpuwatch status` prints, from the same snapshot as --json."""

from __future__ import annotations

from .actions.registry import cli_hint
from .probe import gpu_metrics
from .safe_text import safe_text
from .vocab import fmt_age


def _fmt(value, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


# A metric shown against another ("used/total") shares that one's column (gpu_metrics.TOTALS).
_COLUMNS = [m for m in gpu_metrics.METRICS if m.column]


def _cell(metric: gpu_metrics.GpuMetric, gpu: dict) -> str:
    total = gpu_metrics.TOTALS.get(metric.name)
    if total is None:
        return _fmt(gpu.get(metric.name), metric.suffix)
    return f"{_fmt(gpu.get(metric.name))}/{_fmt(gpu.get(total))}{metric.suffix}"


def _table(rows: list[list[str]]) -> list[str]:
    # Host text is made safe before the widths are taken: shown escapes are wider than the raw bytes.
    rows = [[safe_text(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _label(job: dict) -> str:
    return f"{job['short_id']} {job['name']}" if job.get("short_id") else job["name"]


def render_status(snapshot: dict) -> str:
    lines: list[str] = []
    hosts = [["HOST", "STATE", "AGE", "GPU SOURCE", "DETAIL"]]
    for h in snapshot["hosts"]:
        detail = h.get("error") or h.get("gpu_error") or ""
        hosts.append([h["name"], h["state"], fmt_age(h["last_sample_age_s"]), h["gpu_source"] or "-", detail[:100]])
    lines += _table(hosts)
    for h in snapshot["hosts"]:
        if h.get("hint"):
            lines.append(f"  {h['name']}: {h['hint']}")
    gpus = [["HOST", "GPU", "NAME"] + [m.column for m in _COLUMNS] + ["PIDS"]]
    for h in snapshot["hosts"]:
        for g in h["gpus"]:
            gpus.append([h["name"], str(g["index"]), g["name"]] + [_cell(m, g) for m in _COLUMNS]
                        + [",".join(str(p["pid"]) for p in g["processes"]) or "-"])
    if len(gpus) > 1:
        lines.append("")
        lines += _table(gpus)
    jobs = snapshot.get("jobs") or []
    if jobs:
        rows = [["HOST", "ID", "JOB", "PIDS", "PHASE", "SINCE", "PROGRESS", "EVIDENCE"]]
        for j in jobs:
            prog = j.get("progress") or {}
            step = "-" if prog.get("step") is None else str(prog["step"])
            if prog.get("step") is not None and prog.get("total") is not None:
                step += f"/{prog['total']}"
            phase = j["phase"] + (f" ({j['detail']})" if j.get("detail") else "")
            if j.get("provisional"):
                phase += "?"  # too little history for the verdict to be final (why: below the table)
            since = fmt_age(snapshot["time"] - j["since"]) if j.get("since") else "-"
            hosts = j.get("hosts") or ()
            host = f"{j['host']} +{len(hosts) - 1}" if len(hosts) > 1 else j["host"]  # a job over several hosts
            rows.append([host, j.get("short_id") or "-", j["name"], ",".join(map(str, j.get("pids", []))), phase,
                         since, step, "; ".join(j.get("evidence", []))[:120]])
        lines.append("")
        lines += _table(rows)
        # One line per reason (a fresh `status` gives most jobs the same one), naming the jobs by id
        provisional: dict[str, list[str]] = {}
        for j in jobs:
            if j.get("provisional"):
                why = j.get("provisional_why") or "too little history"
                provisional.setdefault(why, []).append(f"{j['host']}/{_label(j)}")
        for why, named in provisional.items():
            lines.append(f"  ? provisional: {why}: {', '.join(named)}")
        for j in jobs:
            if j.get("advice"):
                lines.append(f"  {j['host']}/{_label(j)}: {j['advice']}")
            # A script reads commands, not keys: the CLI verb of each advised action, naming the job by
            # its id (its name may be every job's).
            for name in j.get("actions") or ():
                command = cli_hint(name, j["host"], j.get("short_id") or j["name"])
                if command is not None:
                    lines.append(f"    {command}")
            if j.get("leftovers"):
                lines.append(f"  {j['host']}/{_label(j)}: {leftovers_line(j['leftovers'], snapshot['time'])}")
                lines.append(f"    {cli_hint('reap', j['host'], j.get('short_id') or j['name'])}")
    return "\n".join(safe_text(line) for line in lines)  # the hints and advice lines carry host text too


def leftovers_line(left: dict, now: float) -> str:
    """"leftovers: 2 processes (pids 41, 42) hold 14.6 GiB on GPU 0, 1, since 3m ago": what a job left running
    after its main process or launcher went."""
    n = left["count"]
    text = f"leftovers: {n} process{'es' if n != 1 else ''} (pids {', '.join(map(str, left['pids']))})"
    if left.get("gpu_memory_bytes"):
        text += f" {'holds' if n == 1 else 'hold'} {left['gpu_memory_bytes'] / 2**30:.1f} GiB on GPU {', '.join(map(str, left['gpus']))}"
    else:
        text += " still running, no GPU memory"
    return text + f", since {fmt_age(now - left['since'])} ago" if left.get("since") else text
