"""`gpuwatch scancel JOBID [--signal SIG] [--full | --batch] [--yes] [--json]`: cancel (or signal) a
Slurm job through the [slurm] login node. Shows the plan and asks on a terminal; without one it
refuses unless --yes. Every attempt goes to the audit log, like kill/restart/dump.

Exit codes: 0 done, 1 scancel failed, 2 refused or a usage mistake (no [slurm], no such job, ended,
pending with a signal), 3 the login node could not be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from ..actions.audit import AuditError, AuditLog, current_user
from ..config import Config
from ..slurm.cancel import CancelRefused, plan_cancel
from ..slurm.scancel import SIGNALS, check_job_id

EXIT_DONE, EXIT_FAILED, EXIT_REFUSED, EXIT_NOT_CONNECTED = 0, 1, 2, 3


def add_parser(sub, common, epilog: str) -> None:
    p = sub.add_parser(
        "scancel", parents=[common], help="cancel or signal a Slurm job (scancel on the [slurm] login node)",
        description="Cancel a Slurm job with scancel on the login node of [slurm]: without --signal the whole "
        "job ends CANCELLED and its nodes are freed. With --signal SIG only that signal is sent: by default "
        "to the job's srun steps; --full sends it to the batch script and all its children too (training "
        "started straight from the script), --batch to the batch shell only. Shows the plan and asks on a "
        "terminal; without one it refuses unless --yes.",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job_id", metavar="JOBID", help="the Slurm job id as `gpuwatch status` shows it (123 or 123_4)")
    p.add_argument("--signal", default=None, metavar="SIG",
                   help=f"send only this signal ({', '.join(SIGNALS)} or a number) instead of cancelling")
    steer = p.add_mutually_exclusive_group()
    steer.add_argument("--full", action="store_true", help="signal the batch script and all its children too")
    steer.add_argument("--batch", action="store_true", help="signal the batch shell only")
    p.add_argument("--yes", action="store_true", help="do it without asking")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


async def run_scancel(config: Config, args, *, readonly: bool, stdin: TextIO | None = None,
                      out: TextIO | None = None, err: TextIO | None = None, audit: AuditLog | None = None) -> int:
    # Not at the top: `gpuwatch` builds this verb's parser on every start, the dashboard's included.
    from ..slurm.client import SlurmClient
    from ..slurm.run import make_runner

    stdin, out, err = stdin or sys.stdin, out or sys.stdout, err or sys.stderr
    audit = audit or AuditLog()
    where = config.slurm.login if config.slurm is not None else "-"

    def refuse(reason: str, code: int = EXIT_REFUSED) -> int:
        try:
            audit.record(host=where, job=f"slurm-{args.job_id}", action="scancel", pids=(), command="",
                         result=f"refused: {reason}")
        except AuditError as exc:
            reason = f"{reason} (and {exc})"
        print(f"gpuwatch: scancel: {reason}", file=err)
        return code

    if config.slurm is None:
        return refuse("no [slurm] section in the config: gpuwatch does not know the login node")
    if readonly:
        return refuse("read-only mode: scancel is disabled (--readonly or settings.readonly)")
    try:
        check_job_id(args.job_id)
    except ValueError as exc:
        return refuse(str(exc))
    client = SlurmClient(make_runner(config), config.slurm)
    try:
        jobs = await client.job_details(args.job_id)
        job = next((j for j in jobs if args.job_id in (j.job_id, j.raw_id)), None)
        if job is None:
            probe = await client.runner.run(["scontrol", "show", "job", "-o", "--", args.job_id],
                                            timeout=config.slurm.command_timeout)
            if probe.error is not None:
                return refuse(probe.failure(), EXIT_NOT_CONNECTED)
            return refuse(f"Slurm does not know job {args.job_id} (ended long ago, or a typo)")
        try:
            plan = plan_cancel(job, where, args.signal, args.full, args.batch)
        except CancelRefused as exc:
            return refuse(str(exc))
        if not args.yes:
            if not stdin.isatty():
                return refuse("not confirmed: no terminal to ask on (add --yes)")
            out.write(plan.text() + "\nDo it? [y/N] ")
            out.flush()
            if stdin.readline().strip().lower() not in ("y", "yes"):
                return refuse("not confirmed")
        try:
            audit.record(host=where, job=f"slurm-{job.job_id}", action="scancel", pids=(), command=plan.command,
                         result="started", local_user=current_user())
        except AuditError as exc:
            print(f"gpuwatch: scancel: {exc}: not done (every action must be recorded)", file=err)
            return EXIT_REFUSED
        result = await client.run_plan(plan)
    finally:
        await client.runner.close()
    status = "done" if result.ok else "failed"
    try:
        audit.record(host=where, job=f"slurm-{job.job_id}", action="scancel", pids=(), command=plan.command,
                     result=status, local_user=current_user(),
                     detail={"summary": [result.failure()] if not result.ok else []})
    except AuditError as exc:
        print(f"gpuwatch: scancel: {exc}: this result is not in the audit log", file=err)
    if args.json:
        print(json.dumps({**plan.to_json(), "status": status, "returncode": result.returncode,
                          "error": None if result.ok else result.failure()}), file=out)
    elif result.ok:
        what = f"sent SIG{plan.argv[1].split('=')[1]} to" if args.signal else "cancelled"
        print(f"{what} Slurm job {job.job_id} ({job.name}) on {job.nodelist or 'no node yet'}", file=out)
    else:
        print(f"gpuwatch: scancel failed: {result.failure()}", file=err)
    if result.ok:
        return EXIT_DONE
    return EXIT_NOT_CONNECTED if result.returncode is None else EXIT_FAILED
