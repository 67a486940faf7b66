"""``hpclaunch submit SPEC``: submit a spec (or show what would be submitted)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import exit_unless_completed, quota_option
from hpclaunch.cli._options import no_check_option, partition_option
from hpclaunch.cli._pipeline import submit_pipeline
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._submitting import print_dry_run, send_tree
from hpclaunch.cli.logs import print_slurm_lines
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hpclaunch.ops.job import Job
    from hpclaunch.ops.session import Session
    from hpclaunch.slurm.jobs import JobInfo


@click.command("submit")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Print the sbatch argv and script; submit nothing.")
@no_check_option
@click.option("--wait", is_flag=True, help="Follow the job to its end; exit 0 only if COMPLETED.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="With --wait (implied): print the job's log lines as they are written.",
)
@click.option("--timeout", type=float, metavar="SECONDS", help="Give up waiting after this long.")
@click.option(
    "--submission-id",
    metavar="ID",
    help="Your own id for this submission (letters, digits, _ and -). Submitting again "
    "with an id that a job already carries submits nothing and prints that job's id: "
    "a script can retry safely.",
)
@click.option(
    "--sync",
    is_flag=True,
    help="Send the working tree (git-tracked and untracked-not-ignored files) to a snapshot "
    "on the cluster, and run the job from it: later local edits do not change the job.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a field of SPEC for this submission, e.g. --set resources.nodes=2 --set "
    "tier=high (the value is YAML; validated as the file is; repeatable).",
)
@partition_option
@click.option(
    "--force",
    is_flag=True,
    help="With --submission-id: take the job that carries the id even if it was submitted "
    "from a different spec.",
)
@quota_option
@pass_session
def submit_command(
    app: Session,
    spec: str,
    dry_run: bool,
    no_check: bool,
    wait: bool,
    follow: bool,
    timeout: float | None,
    submission_id: str | None = None,
    sync: bool = False,
    quota: str | None = None,
    overrides: tuple[str, ...] = (),
    partition: str | None = None,
    force: bool = False,
) -> None:
    """Submit SPEC to Slurm and print the job id.

    SPEC may be a multi-job file (jobs:, with after:): every job is planned first, then
    submitted in dependency order; stdout gets one job id per line.

    State changes (with --wait) and the log location go to stderr, so that
    JOB=$(hpclaunch submit SPEC) captures only the id.

    Every job is tagged --comment=hpclaunch:<submission id>. If sbatch's reply is lost
    (timeout), the job is looked up by that tag instead of being submitted twice.
    """
    app.set_typed("quota", quota)
    if partition is not None:
        overrides = (*overrides, f"resources.partition={partition}")
    if helpers.is_pipeline(spec):
        if overrides:
            raise click.UsageError(
                "--set and --partition change a single-job spec; in a multi-job file, set the "
                "field under defaults: or under the job"
            )

        submit_pipeline(
            app,
            spec,
            dry_run=dry_run,
            no_check=no_check,
            wait=wait,
            follow=follow,
            timeout=timeout,
            submission_id=submission_id,
            sync=sync,
        )
        return

    if dry_run:
        job = app.dryrun(
            spec, overrides=overrides, check=not no_check, sync=sync, submission_id=submission_id
        )
        if overrides:
            click.echo(f"# spec {spec}, changed by: {shlex_join(f'--set={o}' for o in overrides)}")
        print_dry_run(job)
        if not no_check:  # asks the cluster, as the check did
            estimate = app.estimate(spec, overrides=overrides, rendered=job)
            click.echo("# estimate:")
            click.echo("\n".join(f"#   {line}" for line in estimate.lines()))
        return
    submitted = app.submit(
        spec,
        overrides=overrides,
        submission_id=submission_id,
        check=not no_check,
        sync=sync,
        send=send_tree,
        force=force,
    )
    if submitted.existing:
        click.echo(
            f"job {submitted.id} already carries submission id {submission_id}: not "
            "submitted again",
            err=True,
        )
    click.echo(submitted.id)
    click.echo(f"logs: {submitted.log_dir}/attempt-N.log", err=True)
    if wait or follow:
        follow_job(submitted, timeout, logs=follow)


def shlex_join(words: Iterable[str]) -> str:
    """Words quoted for a shell, joined by spaces."""
    return shlex.join(list(words))


def follow_job(job: Job, timeout: float | None, *, logs: bool) -> None:
    """Wait for the job (``--wait``), printing its lines as they come (``--follow``: then
    Slurm's own lines at the end, as ``logs -f`` does)."""

    def show(info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{info.ref.job_id}: {info.state}{reason}", err=True)

    follower = job.follow(timeout=timeout, on_change=show, logs=logs)
    try:
        for _, line in follower:
            click.echo(line)
    except KeyboardInterrupt:
        # Ctrl-C stops the following, not the job: say so, and how to stop the job.
        click.echo(
            f"\njob {job.id} is still in Slurm (only the following stopped); to stop it: "
            f"hpclaunch cancel {job.id}; to follow it again: hpclaunch logs -f {job.id}",
            err=True,
        )
        raise click.exceptions.Exit(130) from None
    final = follower.final
    assert final is not None
    if logs:
        print_slurm_lines(job.id, job.slurm_messages())
    exit_unless_completed(final)
