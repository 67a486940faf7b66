"""Submit a multi-job file (``jobs:``, see :mod:`hpclaunch.planning.pipeline`): what ``hpclaunch
submit FILE`` and ``session.pipelines.submit`` both do.

Every job is planned, checked and rendered before the first is submitted, so a mistake in
the last job submits nothing. Then each is submitted in dependency order with
``--dependency`` built from the ids just returned, and recorded in the history. With the
caller's own submission id a retry submits only the jobs not submitted yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.errors import HpclaunchError, SubmissionError
from hpclaunch.ops.context import Context
from hpclaunch.ops.plan_job import (
    naming,
    plan_job,
    remember_submission,
    require_paths,
    warn_over_quota,
)
from hpclaunch.ops.records import remember_end
from hpclaunch.ops.submit import check_before_submit, existing_job
from hpclaunch.planning.pipeline import load_pipeline, step_submission_ids, with_dependencies
from hpclaunch.planning.plan import new_submission_id
from hpclaunch.slurm.jobs import wait_for

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.planning.pipeline import Step
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.jobs import JobInfo

__all__ = [
    "PipelineEnd",
    "PlannedPipeline",
    "plan_pipeline",
    "submit_pipeline",
    "wait_pipeline",
]


@dataclass(frozen=True)
class PlannedPipeline:
    """Every job of a file, planned and rendered (``rendered``: with ``<name>`` where a
    dependency's job id will be), and the submission id the jobs' ids derive from."""

    path: str
    steps: tuple[Step, ...]
    plans: dict[str, SubmissionPlan]
    rendered: dict[str, RenderedJob]
    base: str


def plan_pipeline(
    context: Context,
    path: str,
    *,
    submission_id: str | None = None,
    check: bool = True,
    cwd: str | None = None,
) -> PlannedPipeline:
    """Plan, check and render every job of the file at ``path`` (``cwd``: a ``--sync``
    snapshot's directory, whose paths are not checked: not on the cluster yet).

    Raises:
        SpecError, PlanError: A job is wrong, or this site or cluster cannot run it.
    """

    steps = load_pipeline(path)
    base = submission_id or new_submission_id()
    ids = step_submission_ids(base, [step.name for step in steps])
    plans: dict[str, SubmissionPlan] = {}
    rendered: dict[str, RenderedJob] = {}
    for step in steps:
        source = f"{path}: job {step.name}"
        with naming(source):
            plan = plan_job(context, step.spec, ids[step.name], cwd=cwd, live_usage=True)
            warn_over_quota(context, plan, source)
            if check and cwd is None:
                require_paths(context, step.spec, plan, source)
            check_before_submit(context, plan, enabled=check)
        plans[step.name] = plan
        placeholders = [(name, kind, f"<{name}>") for name, kind in step.after]
        rendered[step.name] = context.backend.dryrun(with_dependencies(plan, placeholders))
    return PlannedPipeline(path, steps, plans, rendered, base)


def submit_pipeline(
    context: Context,
    planned: PlannedPipeline,
    *,
    retry: bool,
    on_submitted: Callable[[Step, JobRef, bool], None] | None = None,
) -> dict[str, JobRef]:
    """Submit the planned jobs in dependency order; ``retry`` (the caller gave the
    submission id): a job that already carries its id is taken, not submitted again.
    ``on_submitted(step, ref, existing)`` after each.

    Raises:
        SubmissionError: A job was refused; the message lists those already submitted.
    """

    refs: dict[str, JobRef] = {}
    path, base = planned.path, planned.base
    for step in planned.steps:
        waits = [(name, kind, refs[name].job_id) for name, kind in step.after]
        plan = with_dependencies(planned.plans[step.name], waits)
        existing = existing_job(context, plan.submission_id) if retry else None
        try:
            ref = existing or context.backend.submit(context.backend.dryrun(plan))
        except HpclaunchError as exc:
            done = ", ".join(f"{name} → {ref.job_id}" for name, ref in refs.items())
            ids = " ".join(ref.job_id for ref in refs.values())
            raise SubmissionError(
                f"{path}: job {step.name!r} was not submitted: {exc.message}"
                + (f"\nalready submitted: {done}" if done else ""),
                hint=f"fix it, then 'hpclaunch submit --submission-id {base} {path}' submits "
                "only the jobs not submitted yet"
                + (f"; or cancel the others: hpclaunch cancel {ids}" if refs else ""),
            ) from exc
        if existing is None:
            remember_submission(context, plan, ref)
        refs[step.name] = ref
        if on_submitted is not None:
            on_submitted(step, ref, existing is not None)
    return refs


@dataclass(frozen=True)
class PipelineEnd:
    """How a pipeline's jobs ended: each one's final info by name, and the names of those
    that did not complete (the pipeline failed when there is one)."""

    final: dict[str, JobInfo]
    not_completed: tuple[str, ...]


def wait_pipeline(
    context: Context,
    refs: Mapping[str, JobRef],
    *,
    timeout: float | None = None,
    on_change: Callable[[str, JobInfo], None] | None = None,
) -> PipelineEnd:
    """Follow every job (name → job) to its end with one status call per poll for all,
    store each end in the history, and say which did not complete; ``on_change(name,
    info)`` when a job's state or reason changes.

    Raises:
        WatchTimeout: ``timeout`` seconds passed first.
    """

    names = {ref.job_id: name for name, ref in refs.items()}

    def changed(info: JobInfo) -> None:
        if on_change is not None:
            on_change(names[info.ref.job_id], info)

    final = wait_for(context.backend, list(refs.values()), timeout=timeout, on_change=changed)
    remember_end(context, final.values())
    by_name = {name: final[ref] for name, ref in refs.items()}
    failed = tuple(name for name, info in by_name.items() if not info.state.is_success)
    return PipelineEnd(by_name, failed)
