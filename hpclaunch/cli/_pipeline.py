"""``hpclaunch submit FILE`` for a multi-job file (``jobs:``): see :mod:`hpclaunch.pipeline`.

Every job is planned (and rendered) before the first one is submitted, so a mistake in the
last job submits nothing. Then each job is submitted in dependency order with
``--dependency`` built from the ids just returned. stdout gets the job ids, one per line
in submission order; stderr one ``name → id`` line per job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.pipeline import Step
    from hpclaunch.plan import SubmissionPlan


def submit_pipeline(
    app: App,
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
    from hpclaunch.cli._submitting import print_dry_run, scan_tree, send_tree, snapshot_cwd
    from hpclaunch.ops.jobs import naming, plan_job, require_paths, warn_over_quota
    from hpclaunch.ops.submit import check_before_submit
    from hpclaunch.pipeline import load_pipeline, step_submission_ids, with_dependencies
    from hpclaunch.plan import new_submission_id

    if follow:
        raise click.UsageError(
            "--follow streams one job's log; for a multi-job file use --wait, and "
            "'hpclaunch logs -f ID' for a job's log"
        )
    steps = load_pipeline(path)
    base = submission_id or new_submission_id()
    ids = step_submission_ids(base, [step.name for step in steps])
    tree = scan_tree() if sync else None
    cwd = snapshot_cwd(app, tree) if tree is not None else None
    plans: dict[str, SubmissionPlan] = {}
    for step in steps:  # everything is planned, checked and rendered before any sbatch
        source = f"{path}: job {step.name}"
        with naming(source):
            plan = plan_job(app, step.spec, ids[step.name], cwd=cwd, live_usage=True)
            warn_over_quota(app, plan, source)
            if not no_check and tree is None:
                require_paths(app, step.spec, plan, source)
            check_before_submit(app, plan, enabled=not no_check)
        plans[step.name] = plan
        placeholders = [(name, kind, f"<{name}>") for name, kind in step.after]
        job = app.backend.dryrun(with_dependencies(plan, placeholders))
        if dry_run:
            click.echo(f"# ===== job {step.name} ({len(plans)} of {len(steps)}) =====")
            print_dry_run(job)
    if dry_run:
        return
    if tree is not None:
        send_tree(app, tree)
    refs = _submit_in_order(app, path, steps, plans, base, retry=submission_id is not None)
    if wait:
        _wait_all(app, steps, refs, timeout)


def _submit_in_order(
    app: App,
    path: str,
    steps: tuple[Step, ...],
    plans: dict[str, SubmissionPlan],
    base: str,
    *,
    retry: bool,
) -> dict[str, JobRef]:
    from hpclaunch.errors import HpclaunchError, SubmissionError
    from hpclaunch.ops.submit import existing_job
    from hpclaunch.pipeline import with_dependencies

    refs: dict[str, JobRef] = {}
    for step in steps:
        waits = [(name, kind, refs[name].job_id) for name, kind in step.after]
        plan = with_dependencies(plans[step.name], waits)
        existing = existing_job(app, plan.submission_id) if retry else None
        try:
            ref = existing or app.backend.submit(app.backend.dryrun(plan))
        except HpclaunchError as exc:
            done = ", ".join(f"{name} → {ref.job_id}" for name, ref in refs.items())
            raise SubmissionError(
                f"{path}: job {step.name!r} was not submitted: {exc.message}"
                + (f"\nalready submitted: {done}" if done else ""),
                hint=f"fix it, then 'hpclaunch submit --submission-id {base} {path}' submits "
                "only the jobs not submitted yet"
                + (f"; or cancel the others: hpclaunch cancel {_ids(refs)}" if refs else ""),
            ) from exc
        if existing is None:
            from hpclaunch.ops.jobs import remember_submission

            remember_submission(app, plan, ref)
        refs[step.name] = ref
        after = ", ".join(f"{kind}:{name}" for name, kind in step.after)
        again = " (already submitted: not submitted again)" if existing else ""
        click.echo(
            f"{step.name} → {ref.job_id}{f'  after {after}' if after else ''}{again}", err=True
        )
        click.echo(ref.job_id)
    return refs


def _ids(refs: dict[str, JobRef]) -> str:
    return " ".join(ref.job_id for ref in refs.values())


def _wait_all(
    app: App, steps: tuple[Step, ...], refs: dict[str, JobRef], timeout: float | None
) -> None:
    """Follow every job to its end; exit 1 unless all COMPLETED."""
    from hpclaunch.observe import JobInfo, wait_for

    names = {ref.job_id: name for name, ref in refs.items()}

    def show(info: JobInfo) -> None:
        reason = f" ({info.reason})" if info.reason else ""
        click.echo(f"{names[info.ref.job_id]} {info.ref.job_id}: {info.state}{reason}", err=True)

    final = wait_for(app.backend, list(refs.values()), timeout=timeout, on_change=show)
    failed = [step.name for step in steps if not final[refs[step.name]].state.is_success]
    if failed:
        click.echo(f"not completed: {', '.join(failed)}", err=True)
        raise click.exceptions.Exit(1)
