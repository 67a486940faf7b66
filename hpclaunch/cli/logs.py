"""``hpclaunch logs JOB [-f] [--attempt N]``: a job's per-attempt logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App, remote_files
from hpclaunch.cli._jobargs import check_job_id, complete_job_ids, exit_unless_completed
from hpclaunch.ops.records import submission_record

if TYPE_CHECKING:
    from hpclaunch.logs import LogTail, RemoteFiles


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

    _refuse_array(job_id)
    record = submission_record(
        job_id, "logs", f"; for another job, 'scontrol show job {job_id}' shows its StdOut path"
    )
    files = remote_files(app)
    tail = LogTail(record.logs, attempt=attempt, files=files)
    printer = _Printer(tail)
    if not follow:
        printed = printer.print_new(final=True)
        if attempt is None and _print_slurm_messages(record.job_dir, job_id, files):
            return
        if not printed:
            _no_log(job_id, attempt, record.logs, tail)
        return
    _follow(app, job_id, printer, timeout)
    _print_slurm_messages(record.job_dir, job_id, files)


def _refuse_array(job_id: str) -> None:
    """A sweep's array id has no log of its own: each task has its own."""
    if "_" in job_id:
        return
    from hpclaunch.sweep.record import list_sweeps

    for sweep in list_sweeps():
        for array in sweep.arrays:
            if array.job_id == job_id:
                raise click.ClickException(
                    f"job {job_id} is an array of sweep {sweep.sweep_id} ({array.count} tasks): "
                    f"each task has its own log; use {job_id}_<task>, e.g. "
                    f"'hpclaunch logs {job_id}_0' ('hpclaunch sweep status {sweep.sweep_id}' "
                    "lists the tasks)"
                )


def _no_log(job_id: str, attempt: int | None, log_dir: str, tail: LogTail) -> None:
    """No lines: say why; asking for an attempt that does not exist is an error (exit 1)."""
    if attempt is None:
        click.echo(f"job {job_id} has no log yet in {log_dir}", err=True)
        return
    from hpclaunch.logs import attempt_logs, attempt_of

    have = [attempt_of(p) for p in attempt_logs(log_dir, tail.files)]
    if attempt in have:  # the attempt's log exists and is empty
        click.echo(f"job {job_id}: attempt {attempt}'s log is empty", err=True)
        return
    which = ", ".join(map(str, have)) if have else "none yet"
    raise click.ClickException(
        f"job {job_id} has no attempt {attempt}: it has {len(have)} attempt log(s) ({which}) "
        f"in {log_dir}"
    )


def _print_slurm_messages(job_dir: str, job_id: str, files: RemoteFiles | None) -> bool:
    """Slurm's own lines for the job (time limit, OOM kill, ...) after its attempt logs."""
    from hpclaunch.logs import slurm_messages

    lines = slurm_messages(job_dir, job_id, files)
    if not lines:
        return False
    click.echo(f"==> slurm-{job_id}.out (Slurm's own messages) <==", err=True)
    for line in lines:
        click.echo(line)
    return True


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
