"""Plan a sweep and submit it as one or more job arrays.

:func:`plan_sweep` is pure (like :func:`hpclaunch.plan.build_plan`): it expands the points,
plans the batch script once (tier ``low`` unless the spec sets ``tier``), puts the task step
(:mod:`hpclaunch.sweep.task`) in front of the launch, and splits the points into arrays whose
indices stay below ``MaxArraySize``. :func:`submit_sweep` writes the params file and runs one
``sbatch`` per array.

``max_concurrent`` (``%N``) holds over the whole sweep: with one array it is that array's
``%N``; with several, each array gets ``%N`` and starts only after the one before it ended
(``--dependency=afterany:<previous array>``), so at most N tasks ever run at once. Without
``max_concurrent`` the arrays are independent and may all run at once.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import PlanError
from hpclaunch.plan import SubmissionPlan, build_plan, job_python
from hpclaunch.render import RenderedJob
from hpclaunch.spec import JobSpec, SweepValue
from hpclaunch.sweep.points import ArrayChunk, expand, params_lines, split_arrays
from hpclaunch.sweep.task import PARAMS_NAME, placeholders
from hpclaunch.transport.base import Runner

__all__ = ["SweepPlan", "plan_sweep", "submit_sweep"]

#: Slurm's default MaxArraySize (slurm.conf(5)), used when the cluster cannot be asked.
DEFAULT_MAX_ARRAY_SIZE = 1001


@dataclass(frozen=True)
class SweepPlan:
    """A planned sweep.

    Attributes:
        plan: The batch script's plan (``sweep_params`` set; the task step first in
            ``launch_prefix``); its submission id is the sweep id.
        points: The expanded points, in index order.
        arrays: How the points are split into arrays.
        chained: Each array waits for the one before (``max_concurrent`` over several).
    """

    plan: SubmissionPlan
    points: tuple[dict[str, SweepValue], ...]
    arrays: tuple[ArrayChunk, ...]
    chained: bool

    @property
    def sweep_id(self) -> str:
        """The sweep's id (the plan's submission id; names the job directory)."""
        return self.plan.submission_id

    @property
    def params_file(self) -> str:
        """Where the points are written (``<job dir>/sweep-params.jsonl``)."""
        assert self.plan.sweep_params is not None
        return self.plan.sweep_params

    def sbatch_argv(self, index: int, previous: str | None) -> tuple[str, ...]:
        """The sbatch argv of array ``index`` (``previous``: the job id it waits for)."""
        chunk = self.arrays[index]
        argv = [
            "sbatch",
            "--parsable",
            f"--array={chunk.array_spec}",
            f"--comment=hpclaunch:{self.array_submission_id(index)}",
        ]
        if self.chained and previous is not None:
            try:  # on the command line, --dependency replaces the script's: keep both
                own = self.plan.option("--dependency")
            except KeyError:
                own = None
            argv.append(f"--dependency={own + ',' if own else ''}afterany:{previous}")
        return (*argv, self.plan.script_path, str(chunk.offset))

    def array_submission_id(self, index: int) -> str:
        """Each array's own tag (``<sweep id>-a<index>``), so that a lost sbatch reply is
        matched to the right array."""
        return f"{self.sweep_id}-a{index}"


def plan_sweep(
    spec: JobSpec,
    site: SiteConfig,
    *,
    submission_id: str,
    home: str,
    max_array_size: int,
    cwd: str | None = None,
    python: str | None = None,
    quota_used: int | None = None,
    quota_mode: str = "allow",
) -> SweepPlan:
    """Plan ``spec``'s sweep on ``site`` (pure; see the module docstring).

    On a site with quotas the sweep is placed as a whole (one script for all its tasks) on
    the GPUs it can hold at once: ``min(points, max_concurrent)`` tasks' GPUs. A sweep
    judged task by task was placed in-quota and then had tasks wait at the quota
    (``AssocGrpGRES``) beside idle GPUs.

    Raises:
        PlanError: The spec has no ``sweep``, the cluster has no arrays, or
            :func:`~hpclaunch.plan.build_plan` refuses the job.
    """
    sweep = spec.sweep
    if sweep is None:
        raise PlanError(
            "sweep: the spec has no sweep section",
            hint="add sweep: {method: grid, parameters: {lr: [0.1, 0.01]}}, or submit it "
            "with 'hpclaunch submit'",
        )
    if "tier" not in spec.model_fields_set:
        spec = spec.model_copy(update={"tier": "low"})
    python = job_python(site, home, python)
    points = tuple(expand(sweep))
    try:
        arrays = split_arrays(len(points), max_array_size, sweep.max_concurrent)
    except ValueError as exc:
        raise PlanError(
            f"sweep: {exc}", hint="ask the admins for MaxArraySize > 0 in slurm.conf"
        ) from exc
    per_task = spec.resources.nodes * spec.resources.gpus_per_node
    at_once = min(len(points), sweep.max_concurrent or len(points))
    plan = build_plan(
        spec,
        site,
        submission_id=submission_id,
        home=home,
        cwd=cwd,
        python=python,
        quota_used=quota_used,
        quota_mode=quota_mode,
        quota_gpus=at_once * per_task,
    )
    params_file = posixpath.join(plan.job_dir, PARAMS_NAME)
    task_step = (
        python,
        "-m",
        "hpclaunch.sweep.task",
        "--params",
        params_file,
        f"--keep={len(plan.launch_prefix)}",
        "--",
    )
    chained = sweep.max_concurrent is not None and len(arrays) > 1
    plan = replace(
        plan,
        launch_prefix=task_step + plan.launch_prefix,
        sweep_params=params_file,
        notes=plan.notes
        + tuple(_notes(spec, points, arrays, chained, max_array_size, plan))
        + _quota_notes(spec, site, plan, at_once, per_task, quota_used),
    )
    return SweepPlan(plan=plan, points=points, arrays=tuple(arrays), chained=chained)


def _notes(
    spec: JobSpec,
    points: Sequence[dict[str, SweepValue]],
    arrays: Sequence[ArrayChunk],
    chained: bool,
    max_array_size: int,
    plan: SubmissionPlan,
) -> list[str]:
    assert spec.sweep is not None
    names = sorted({name for point in points for name in point})
    notes = [
        f"sweep ({spec.sweep.method}): {len(points)} points over {', '.join(names) or '-'}; "
        f"each task gets {plan.job_dir}/tasks/<point>/ (control, ledger, checkpoints, logs)",
        f"{len(arrays)} array(s) of at most {max_array_size} tasks (indices stay below "
        f"MaxArraySize {max_array_size}): "
        + ", ".join(f"--array={a.array_spec} from point {a.offset}" for a in arrays),
    ]
    if chained:
        notes.append(
            f"max_concurrent {spec.sweep.max_concurrent}: each array starts after the one "
            "before ended (--dependency=afterany), so the cap holds over the whole sweep"
        )
    unknown = sorted(placeholders(plan.command) - set(names))
    if unknown:
        notes.append(
            "not sweep parameters, passed as written: " + ", ".join(f"{{{n}}}" for n in unknown)
        )
    return notes


def _quota_notes(
    spec: JobSpec,
    site: SiteConfig,
    plan: SubmissionPlan,
    at_once: int,
    per_task: int,
    quota_used: int | None,
) -> tuple[str, ...]:
    """How the sweep's quota placement was judged, and how to keep it in-quota."""
    if plan.quota == "none" or (plan.quota == "over-quota" and plan.quota_warning is None):
        return ()  # no quotas; or a preemptible tier, over-quota by design
    assert spec.sweep is not None
    limit = spec.sweep.max_concurrent
    cap = f"max_concurrent {limit}" if limit else "no max_concurrent"
    notes = [
        f"quota judged for the whole sweep: {at_once} tasks can run at once ({cap}) x "
        f"{per_task} GPUs = {at_once * per_task} GPUs, {plan.quota}"
    ]
    project = spec.project or site.default_account
    if plan.quota == "over-quota" and plan.quota_warning and project in site.quotas and per_task:
        free = site.quotas[project] - (quota_used or 0)
        fits = max(0, free) // per_task
        if fits:
            notes.append(
                f"max_concurrent: {fits} would keep the sweep in-quota (never preempted), "
                f"{fits} tasks at a time"
            )
    return tuple(notes)


def submit_sweep(
    backend: Backend,
    runner: Runner,
    sweep: SweepPlan,
    *,
    on_array: Callable[[int, JobRef], None] | None = None,
) -> list[JobRef]:
    """Write the params file, then submit each array (one sbatch each).

    The batch script is rendered once and written with the first array; the others run the
    same file (only their sbatch argv differs), so it is not written again: one file
    transfer per sweep, not per array, when Slurm is reached over SSH.

    ``on_array(index, ref)`` is called after each array is submitted (to record it at
    once: a later failure must not lose the ones already in Slurm).
    """
    job: RenderedJob = backend.dryrun(sweep.plan)
    runner.put_file(sweep.params_file, params_lines(sweep.points), 0o600)
    refs: list[JobRef] = []
    for index in range(len(sweep.arrays)):
        previous = refs[-1].job_id if refs else None
        tagged = replace(sweep.plan, submission_id=sweep.array_submission_id(index))
        ref = backend.submit(
            replace(job, sbatch_argv=sweep.sbatch_argv(index, previous), plan=tagged),
            script_written=index > 0,
        )
        refs.append(ref)
        if on_array is not None:
            on_array(index, ref)
    return refs
