"""``hpclaunch logs JOB [-f] [--attempt N]``: a job's per-attempt logs
(:mod:`hpclaunch.ops.logs`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import (
    exit_unless_completed,
    job_argument,
)
from hpclaunch.cli._session import pass_session
from hpclaunch.errors import JobNotFound
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from hpclaunch.ops.job import Job
    from hpclaunch.ops.session import Session
    from hpclaunch.slurm.jobs import JobInfo


@click.command("logs")
@job_argument
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
@pass_session
def logs_command(
    app: Session, job_id: str, follow: bool, attempt: int | None, timeout: float | None
) -> None:
    """Print the logs of JOB, a job submitted with hpclaunch.

    Each attempt (a requeue starts a new one) writes <log dir>/attempt-N.log; the lines
    go to stdout, and a "==> attempt N <==" header to stderr whenever the attempt changes.
    With -f, the exit code is 0 only if the job COMPLETED (like submit --follow).
    """
    job = helpers.job_with_logs(app, job_id)
    if not follow:
        printed = _print_lines(job.log_lines(attempt))
        if attempt is None and print_slurm_lines(job_id, job.slurm_messages()):
            return
        if not printed:
            _no_log(job, attempt)
        return

    def show(info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{job_id}: {info.state}{reason}", err=True)

    follower = job.follow(attempt=attempt, timeout=timeout, on_change=show)
    _print_lines(follower)
    print_slurm_lines(job_id, job.slurm_messages())
    assert follower.final is not None
    exit_unless_completed(follower.final)


def _print_lines(lines: Iterable[tuple[int, str]]) -> bool:
    """Print ``(attempt, line)``s with a header on stderr when the attempt changes."""
    current: int | None = None
    for number, line in lines:
        if number != current:
            click.echo(f"==> attempt {number} <==", err=True)
            current = number
        click.echo(line)
    return current is not None


def _no_log(job: Job, attempt: int | None) -> None:
    """No lines: say why; asking for an attempt that does not exist is an error (exit 1)."""
    job_id, log_dir = job.id, job.log_dir
    if attempt is None:
        click.echo(f"job {job_id} has no log yet in {log_dir}", err=True)
        return
    have = job.attempts_logged()
    if attempt in have:  # the attempt's log exists and is empty
        click.echo(f"job {job_id}: attempt {attempt}'s log is empty", err=True)
        return
    if not have:
        raise JobNotFound(
            f"job {job_id} has no attempt {attempt}: no attempt has written a log in {log_dir} yet",
            hint=f"'hpclaunch status {job_id}' says whether it has started",
        )
    which = ", ".join(map(str, have))
    raise JobNotFound(
        f"job {job_id} has no attempt {attempt}: its attempts with a log are {which} "
        f"(in {log_dir})",
        hint=f"'hpclaunch logs {job_id} --attempt {have[-1]}' shows the newest; without "
        "--attempt, every attempt in turn",
    )


def print_slurm_lines(job_id: str, lines: list[str]) -> bool:
    """Slurm's own lines for the job (time limit, OOM kill, ...) after its attempt logs."""
    if not lines:
        return False
    click.echo(f"==> slurm-{job_id}.out (Slurm's own messages) <==", err=True)
    for line in lines:
        click.echo(line)
    return True
