"""``hpclaunch logs JOB [-f] [--attempt N]``: a job's per-attempt logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App, remote_files
from hpclaunch.cli._jobargs import (
    check_job_id,
    complete_job_ids,
    exit_unless_completed,
    submission_record,
)

if TYPE_CHECKING:
    from hpclaunch.logs import LogTail


@click.command("logs")
@click.argument("job_id", callback=check_job_id, shell_complete=complete_job_ids)
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing new lines, across requeues and attempts, until the job ends.",
)
@click.option(
    "--attempt", type=click.IntRange(min=0), metavar="N", help="Only attempt N (0: first)."
)
@click.option("--timeout", type=float, metavar="SECONDS", help="With -f: stop after this long.")
@click.pass_obj
def logs_command(
    app: App, job_id: str, follow: bool, attempt: int | None, timeout: float | None
) -> None:
    """Print the logs of JOB, a job submitted with hpclaunch.

    Each attempt (a requeue starts a new one) writes <log dir>/attempt-N.log; the lines
    go to stdout, and a "==> attempt N <==" header to stderr whenever the attempt changes.
    With -f, the exit code is 0 only if the job COMPLETED (like submit --follow).
    """
    from hpclaunch.logs import LogTail

    record = submission_record(
        job_id, "logs", f"; for another job, 'scontrol show job {job_id}' shows its StdOut path"
    )
    tail = LogTail(record.logs, attempt=attempt, files=remote_files(app))
    printer = _Printer(tail)
    if not follow:
        if not printer.print_new(final=True):
            which = "" if attempt is None else f" for attempt {attempt}"
            click.echo(f"job {job_id} has no log{which} yet in {record.logs}", err=True)
        return
    _follow(app, job_id, printer, timeout)


class _Printer:
    """Prints what a LogTail returns, with a header on stderr when the attempt changes."""

    def __init__(self, tail: LogTail) -> None:
        self.tail = tail
        self.attempt: int | None = None

    def print_new(self, final: bool = False) -> bool:
        printed = False
        for number, lines in self.tail.read_new_by_attempt(final=final):
            if number != self.attempt:
                click.echo(f"==> attempt {number} <==", err=True)
                self.attempt = number
            for line in lines:
                click.echo(line)
            printed = True
        return printed


def _follow(app: App, job_id: str, printer: _Printer, timeout: float | None) -> None:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.observe import JobInfo, wait_for

    ref = JobRef(job_id)

    def show(info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{job_id}: {info.state}{reason}", err=True)

    # A requeued job goes PREEMPTED/REQUEUED -> PENDING -> RUNNING under the same id:
    # wait_for only stops at a final state, so following crosses attempts.
    def print_new() -> None:
        printer.print_new()

    final = wait_for(app.backend, [ref], timeout=timeout, on_change=show, on_round=print_new)[ref]
    printer.print_new(final=True)
    exit_unless_completed(final)
