"""``hpclaunch tier JOB NEWTIER``: move a pending job to another tier (one scontrol update)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App
from hpclaunch.cli._jobargs import check_job_id, complete_job_ids

if TYPE_CHECKING:
    from hpclaunch.history import SubmissionRecord
    from hpclaunch.queue import QueueRow
    from hpclaunch.retier import Retier

#: States of a job that has started: its QOS and account are fixed.
_STARTED = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED"})


@click.command("tier")
@click.argument("job_id", metavar="JOB", callback=check_job_id, shell_complete=complete_job_ids)
@click.argument("new_tier", metavar="NEWTIER")
@click.option("--dry-run", is_flag=True, help="Print what would change and the scontrol argv.")
@click.pass_obj
def tier_command(app: App, job_id: str, new_tier: str, dry_run: bool) -> None:
    """Move pending job JOB to tier NEWTIER: its QOS and, on a site with quotas, its
    account and nice (in-quota or over-quota is decided again from the project's usage).

    Only a pending job can move; an array job id moves every pending task. One look at the
    job, one at the project's usage (sites with quotas), one update.
    """
    from hpclaunch.discover import load_capabilities, max_age_from_env
    from hpclaunch.errors import BackendError, JobNotFound
    from hpclaunch.queue import tier_of
    from hpclaunch.retier import check_allowed, plan_retier

    site = app.site
    if new_tier not in site.tiers:
        raise click.BadParameter(
            f"site {site.name} has no tier {new_tier!r}; tiers: {', '.join(site.tiers)}",
            param_hint="NEWTIER",
        )
    rows = app.backend.queue_job(job_id)
    if not rows:
        raise JobNotFound(
            f"job {job_id} is not in Slurm's queue (it ended, or never existed)",
            hint="'hpclaunch queue --me' lists your pending and running jobs",
        )
    pending = [r for r in rows if r.pending]
    started = [r for r in rows if not r.pending]
    if not pending and started[0].state not in _STARTED:
        raise BackendError(
            f"job {job_id} has ended ({started[0].state}): there is nothing to move",
            hint="resubmit it with the tier you want",
        )
    row = pending[0] if pending else started[0]  # a started job: plan_retier refuses it
    record = _record(job_id)
    old_tier = (record.tier if record is not None else None) or tier_of(row, site)
    retier = plan_retier(
        row,
        site,
        new_tier,
        job_id=job_id,
        old_tier=old_tier,
        quota_used=_quota_used(app, row, new_tier),
    )
    check_allowed(
        retier, load_capabilities(app.backend, site.name, max_age=max_age_from_env(app.env))
    )
    _say(retier, started)
    if dry_run:
        import shlex

        click.echo(f"dry run, nothing changed: {shlex.join(retier.argv)}")
        return
    _update(app, retier)
    click.echo(f"job {job_id}: moved to tier {new_tier}")
    if record is not None:
        from hpclaunch.history import record_amendment

        try:
            record_amendment(record, tier=new_tier, qos=retier.new_qos, quota=retier.quota)
        except OSError as exc:  # the job moved: the history is only a convenience
            click.echo(f"Warning: could not record the new tier in the history: {exc}", err=True)


def _quota_used(app: App, row: QueueRow, new_tier: str) -> int | None:
    """The project's in-quota GPUs without this job's own (one look at the queue), when the new
    tier's placement depends on them; ``None`` otherwise."""
    from hpclaunch.queue import project_of
    from hpclaunch.quota import read_usage
    from hpclaunch.retier import counted_gpus

    site = app.site
    project = project_of(site, row.account)
    if project not in site.quotas or site.tiers[new_tier].preemptible:  # type: ignore[index]
        return None
    assert project is not None
    # The usage counts this job too while it is in-quota: moving it must not count it twice.
    used = read_usage(app.backend, site, project)
    return max(0, used - counted_gpus(site, row, project))


def _update(app: App, retier: Retier) -> None:
    """The one update (``scontrol update`` or its RPC); its refusals become errors with
    hints."""
    from hpclaunch.errors import BackendError, JobNotFound, UpdateRefused
    from hpclaunch.retier import scontrol_hint

    try:
        app.backend.update_job(retier.job_id, retier.slurm_changes)
    except UpdateRefused as exc:
        said = exc.said
        if "Invalid job id" in said:
            raise JobNotFound(
                f"job {retier.job_id} is gone: {said}", hint="it ended meanwhile"
            ) from None
        raise BackendError(
            f"Slurm refused to move job {retier.job_id} to tier {retier.new_tier}: {said}",
            hint=scontrol_hint(said),
        ) from None


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


def _record(job_id: str) -> SubmissionRecord | None:
    from hpclaunch.history import find_record

    return find_record(job_id=job_id) or find_record(job_id=job_id.split("_")[0])
