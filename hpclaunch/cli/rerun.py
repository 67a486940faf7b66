"""``hpclaunch rerun JOB``: submit the spec a job ran with again, changed as asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._session import pass_session
from hpclaunch.cli.submit import follow_job

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("rerun")
@job_argument
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a field of the job's spec, e.g. --set args='[--lr, 0.2]' --set "
    "resources.nodes=2 (the value is YAML; repeatable).",
)
@click.option("--tier", metavar="TIER", help="Run it in this tier (the same as --set tier=TIER).")
@click.option("--dry-run", is_flag=True, help="Print the spec it would submit; submit nothing.")
@click.option(
    "--wait", is_flag=True, help="Follow the new job to its end; exit 0 only if COMPLETED."
)
@click.option("--follow", "-f", is_flag=True, help="With --wait (implied): print its log lines.")
@click.option("--timeout", type=float, metavar="SECONDS", help="Give up waiting after this long.")
@pass_session
def rerun_command(
    app: Session,
    job_id: str,
    overrides: tuple[str, ...],
    tier: str | None,
    dry_run: bool,
    wait: bool,
    follow: bool,
    timeout: float | None,
) -> None:
    """Submit again the spec JOB ran with, changed by --set and --tier, and print the new
    job id.

    The history keeps the spec of every job submitted from here, and the directory it was
    submitted from: the rerun starts there, as JOB did. A sweep task (ARRAY_TASK) is rerun
    alone, as a sweep of its one point. 'hpclaunch history' shows which job a rerun came from.
    """
    if dry_run:
        import yaml  # noqa: PLC0415 (yaml)

        spec = app.job(job_id).rerun_dryrun(*overrides, tier=tier)
        click.echo(f"# the spec of job {job_id}, changed as asked; nothing submitted")
        click.echo(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), nl=False)
        return
    job = app.rerun(job_id, overrides, tier=tier)
    click.echo(job.id)
    click.echo(f"rerun of job {job_id}; logs: {job.log_dir}/attempt-N.log", err=True)
    if wait or follow:
        follow_job(job, timeout, logs=follow)
