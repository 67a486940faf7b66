"""``hpclaunch tier JOB NEWTIER``: move a pending job to another tier (one scontrol update)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session
    from hpclaunch.planning.retier import Retier
    from hpclaunch.slurm.queue import QueueRow


@click.command("tier")
@job_argument
@click.argument("new_tier", metavar="NEWTIER")
@click.option("--dry-run", is_flag=True, help="Print what would change and the scontrol argv.")
@pass_session
def tier_command(app: Session, job_id: str, new_tier: str, dry_run: bool) -> None:
    """Move pending job JOB to tier NEWTIER: its QOS and, on a site with quotas, its
    account and nice (in-quota or over-quota is decided again from the project's usage).

    Only a pending job can move; an array job id moves every pending task. One look at the
    job, one at the project's usage (sites with quotas), one update.
    """
    site = app.site_config
    if new_tier not in site.tiers:
        raise click.BadParameter(
            f"site {site.name} has no tier {new_tier!r}; tiers: {', '.join(site.tiers)}",
            param_hint="NEWTIER",
        )
    job = app.job(job_id)
    move = job.plan_tier(new_tier)
    retier = move.retier
    _say(retier, move.started)
    if dry_run:
        click.echo(f"dry run, nothing changed: {shlex.join(retier.argv)}")
        return
    job.tier(new_tier, plan=move)
    click.echo(f"job {job_id}: moved to tier {new_tier}")


def _say(retier: Retier, started: Sequence[QueueRow]) -> None:
    click.echo(f"job {retier.job_id} (pending):")
    for change in retier.changes():
        click.echo(f"  {change}")
    for note in retier.notes:
        click.echo(f"  - {note}")
    if "_" in retier.job_id or any(r.array_job for r in (retier.row, *started)):
        # scontrol update of an array job id applies to all its tasks; Slurm refuses the
        # QOS change of tasks that have started, which keep their tier.
        base = retier.job_id.split("_")[0]
        what = "this task" if "_" in retier.job_id else f"every pending task of array {base}"
        kept = f"; {len(started)} started task(s) keep their tier" if started else ""
        click.echo(f"  array job: {what} moves{kept}")
