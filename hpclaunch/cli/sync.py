"""``hpclaunch sync JOB|SWEEP``: upload the offline W&B runs of a job or a sweep
(:meth:`Job.sync_trackers`, :meth:`SweepRun.sync_trackers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import complete_job_ids
from hpclaunch.cli._session import pass_session
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("sync")
@click.argument("target", metavar="JOB|SWEEP", shell_complete=complete_job_ids)
@click.option("--dry-run", is_flag=True, help="List the runs to upload; upload nothing.")
@pass_session
def sync_command(app: Session, target: str, dry_run: bool) -> None:
    """Upload the offline W&B runs of JOB or SWEEP (each attempt's, into its one run) from
    here, for compute nodes without internet (tracking: {wandb: {mode: offline}}, or auto
    on a site whose tracking: says offline: true).

    It runs 'wandb sync' with the job's Python, logged in as 'wandb login' (or
    WANDB_API_KEY) says; runs synced before are skipped.
    """
    if helpers.is_job_id(target) and not helpers.names_a_sweep(target):
        runs = app.job(target).sync_trackers(dry_run=dry_run)
    else:
        runs = app.sweeps.find(target).sync_trackers(dry_run=dry_run)
    if not runs:
        click.echo(f"{target}: no offline W&B run to sync")
        return
    verb = "to sync" if dry_run else "synced"
    for run in runs:
        click.echo(f"{verb}: {run}")
