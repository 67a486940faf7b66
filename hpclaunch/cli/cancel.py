"""``hpclaunch cancel``: cancel jobs by id, by name, or all of yours that hpclaunch started."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import check_job_ids, complete_job_ids
from hpclaunch.cli._session import pass_session
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.cancel import Cancelled
    from hpclaunch.ops.session import Session


@click.command("cancel")
@click.argument(
    "job_ids", nargs=-1, callback=check_job_ids, metavar="[IDS]...", shell_complete=complete_job_ids
)
@click.option(
    "--name",
    "names",
    multiple=True,
    metavar="NAME",
    help="Cancel your unfinished jobs with exactly this name, as squeue prints it (repeatable).",
)
@click.option(
    "--all",
    "all_jobs",
    is_flag=True,
    help="Cancel every unfinished job in your hpclaunch history for this site.",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (for --all).")
@pass_session
def cancel_command(
    app: Session, job_ids: list[str], names: tuple[str, ...], all_jobs: bool, yes: bool
) -> None:
    """Cancel jobs IDS, jobs named NAME, or --all of your hpclaunch jobs.

    Safe to repeat: a job that already finished is reported, not an error. Exit code 1
    when an id is unknown to Slurm or scancel fails.

    Names are compared exactly with what squeue prints: Slurm keeps the name as given to
    sbatch, so a name with quotes or spaces must be typed the same way (quote it).
    """
    if not (job_ids or names or all_jobs):
        raise click.UsageError("name the jobs: IDS, --name NAME or --all")
    refs: list[str | JobRef] = list(job_ids)
    for name in names:
        found = helpers.jobs_named(app, name)
        if not found:
            click.echo(f"no unfinished job of yours is named {name!r}", err=True)
        refs.extend(found)
    if all_jobs:
        refs.extend(_all_unfinished(app, yes))
    done = app.cancel(refs)
    for job in done:
        _print(job)
    if not all(job.ok for job in done):
        raise click.exceptions.Exit(1)


def _all_unfinished(app: Session, yes: bool) -> list[JobRef]:
    """The unfinished jobs of the history (this site), after confirmation."""
    live = helpers.unfinished_jobs(app)
    if live is None:
        click.echo("no hpclaunch jobs recorded for this site", err=True)
        return []
    if not live:
        click.echo("none of your hpclaunch jobs is unfinished: nothing to cancel", err=True)
        return []
    for info in live:
        click.echo(f"  {info.ref.job_id}  {info.name or ''}  {info.state}", err=True)
    if not yes:
        click.confirm(f"Cancel these {len(live)} jobs?", abort=True, err=True)
    return [info.ref for info in live]


def _print(job: Cancelled) -> None:
    info = job.info
    job_id = info.ref.job_id
    if job.outcome == "finished":
        code = f", exit code {info.exit_code}" if info.exit_code is not None else ""
        click.echo(f"{job_id}: already finished ({info.state}{code})")
    elif job.outcome == "unknown":
        click.echo(f"{job_id}: not found: unknown to Slurm's queue and accounting", err=True)
    else:
        click.echo(f"{job_id}: cancelled ({info.name or 'no name'}, was {info.state})")
