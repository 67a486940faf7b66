"""``hpclaunch submit FILE`` for a multi-job file (``jobs:``): see
:mod:`hpclaunch.planning.pipeline`.

Every job is planned (and rendered) before the first one is submitted, so a mistake in the
last job submits nothing. Then each job is submitted in dependency order with
``--dependency`` built from the ids just returned. stdout gets the job ids, one per line
in submission order; stderr one ``name → id`` line per job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._submitting import print_dry_run, send_tree

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.session import Session
    from hpclaunch.planning.pipeline import Step
    from hpclaunch.slurm.jobs import JobInfo


def submit_pipeline(
    app: Session,
    path: str,
    *,
    dry_run: bool,
    no_check: bool,
    wait: bool,
    follow: bool,
    timeout: float | None,
    submission_id: str | None,
    sync: bool,
) -> None:
    """Plan every job of the file at ``path``, then submit them in dependency order."""
    if follow:
        raise click.UsageError(
            "--follow streams one job's log; for a multi-job file use --wait, and "
            "'hpclaunch logs -f ID' for a job's log"
        )
    if dry_run:
        planned = app.pipelines.dryrun(
            path, submission_id=submission_id, check=not no_check, sync=sync
        )
        for number, step in enumerate(planned.steps, 1):
            click.echo(f"# ===== job {step.name} ({number} of {len(planned.steps)}) =====")
            print_dry_run(planned.rendered[step.name])
        return
    refs: dict[str, JobRef] = {}

    def say(step: Step, ref: JobRef, existing: bool) -> None:
        after = ", ".join(f"{kind}:{name}" for name, kind in step.after)
        again = " (already submitted: not submitted again)" if existing else ""
        click.echo(
            f"{step.name} → {ref.job_id}{f'  after {after}' if after else ''}{again}", err=True
        )
        click.echo(ref.job_id)
        refs[step.name] = ref

    app.pipelines.submit(
        path,
        submission_id=submission_id,
        check=not no_check,
        sync=sync,
        send=send_tree,
        on_submitted=say,
    )
    if wait:
        _wait_all(app, refs, timeout)


def _wait_all(app: Session, refs: dict[str, JobRef], timeout: float | None) -> None:
    """Follow every job to its end; exit 1 unless all COMPLETED."""

    def show(name: str, info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{name} {info.ref.job_id}: {info.state}{reason}", err=True)

    end = app.pipelines.wait(refs, timeout=timeout, on_change=show)
    if end.not_completed:
        click.echo(f"not completed: {', '.join(end.not_completed)}", err=True)
        raise click.exceptions.Exit(1)
