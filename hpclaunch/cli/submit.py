"""``hpclaunch submit SPEC``: submit a spec (or show what would be submitted)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import exit_unless_completed, quota_option
from hpclaunch.ops.session import Session

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hpclaunch.backends.base import JobRef
    from hpclaunch.slurm.jobs import JobInfo


@click.command("submit")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Print the sbatch argv and script; submit nothing.")
@click.option(
    "--no-check", is_flag=True, help="Do not check the plan against the live cluster first."
)
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
@click.option(
    "--partition",
    metavar="NAME",
    help="Run in this partition of the site (the same as --set resources.partition=NAME).",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --submission-id: take the job that carries the id even if it was submitted "
    "from a different spec.",
)
@quota_option
@click.pass_obj
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
    from hpclaunch.planning.pipeline import is_pipeline_file

    app.set_typed("quota", quota)
    if partition is not None:
        overrides = (*overrides, f"resources.partition={partition}")
    if is_pipeline_file(spec):
        if overrides:
            raise click.UsageError(
                "--set and --partition change a single-job spec; in a multi-job file, set the "
                "field under defaults: or under the job"
            )
        from hpclaunch.cli._pipeline import submit_pipeline

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
    from hpclaunch.cli._submitting import print_dry_run, send_tree
    from hpclaunch.ops.snapshot import Snapshot
    from hpclaunch.ops.submit import submit_spec

    tree = Snapshot.of_cwd(app) if sync else None
    result = submit_spec(
        app,
        spec,
        overrides=overrides,
        submission_id=submission_id,
        check=not no_check,
        dry_run=dry_run,
        force=force,
        cwd=tree.cwd if tree is not None else None,
        before_submit=(lambda _plan: send_tree(tree)) if tree is not None else None,
    )
    if dry_run:
        if overrides:
            click.echo(f"# spec {spec}, changed by: {shlex_join(f'--set={o}' for o in overrides)}")
        print_dry_run(result.job)
        return
    ref = result.ref
    assert ref is not None  # not a dry run
    if result.existing:
        click.echo(
            f"job {ref.job_id} already carries submission id {submission_id}: not submitted again",
            err=True,
        )
    click.echo(ref.job_id)
    click.echo(f"logs: {result.plan.log_dir}/attempt-N.log", err=True)
    if wait or follow:
        _follow(app, ref, timeout, result.plan.log_dir if follow else None, result.plan.job_dir)


def shlex_join(words: Iterable[str]) -> str:
    """Words quoted for a shell, joined by spaces."""
    import shlex

    return shlex.join(list(words))


def _follow(
    app: Session, ref: JobRef, timeout: float | None, log_dir: str | None, job_dir: str
) -> None:
    """Wait for the job (``--wait``), printing its lines as they come (``--follow``: then
    Slurm's own lines at the end, as ``logs -f`` does)."""
    from hpclaunch.cli.logs import print_slurm_lines
    from hpclaunch.ops.logs import LogFollower, slurm_lines

    def show(info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{info.ref.job_id}: {info.state}{reason}", err=True)

    follower = LogFollower(app, ref, log_dir, timeout=timeout, on_change=show)
    try:
        for _, line in follower:
            click.echo(line)
    except KeyboardInterrupt:
        # Ctrl-C stops the following, not the job: say so, and how to stop the job.
        click.echo(
            f"\njob {ref.job_id} is still in Slurm (only the following stopped); to stop it: "
            f"hpclaunch cancel {ref.job_id}; to follow it again: hpclaunch logs -f {ref.job_id}",
            err=True,
        )
        raise click.exceptions.Exit(130) from None
    final = follower.final
    assert final is not None
    if log_dir is not None:
        print_slurm_lines(ref.job_id, slurm_lines(app, job_dir, ref.job_id))
    exit_unless_completed(final)
