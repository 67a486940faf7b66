"""Plan a sweep and submit it as one or more job arrays.

A sweep's way through hpclaunch: ``hpclaunch sweep SPEC`` expands the spec's ``sweep:``
section into points (:mod:`hpclaunch.planning.points`: grid, seeded random draw, or an
explicit list), writes them to ``<job dir>/sweep-params.jsonl`` (line *i* = point *i*) and
submits one batch script as one or more arrays (this module); the sweep is remembered in
:mod:`hpclaunch.store.sweeps`. Inside the job, :mod:`hpclaunch.supervise.sweep_task` finds
the task's point (offset + ``SLURM_ARRAY_TASK_ID``), gives it its own directory
``<job dir>/tasks/<point>/`` and execs the command with ``{name}`` replaced by the point's
values. ``hpclaunch sweep status ID`` (:mod:`hpclaunch.ops.sweep_status`) counts the tasks
by state and shows the final metrics reported with :func:`hpclaunch.runtime.report_metrics`.

:func:`plan_sweep` is pure (like :func:`hpclaunch.planning.plan.build_plan`): it expands the points,
plans the batch script once (tier ``low`` unless the spec sets ``tier``), puts the task step
(:mod:`hpclaunch.supervise.sweep_task`) in front of the launch, and splits the points into arrays
whose indices stay below ``MaxArraySize``. :func:`hpclaunch.ops.sweep.submit_sweep` writes the
params file and runs one ``sbatch`` per array.

``max_concurrent`` (``%N``) holds over the whole sweep: with one array it is that array's
``%N``; with several, each array gets ``%N`` and starts only after the one before it ended
(``--dependency=afterany:<previous array>``), so at most N tasks ever run at once. Without
``max_concurrent`` the arrays are independent and may all run at once.

Quotas: a sweep of a non-preemptible tier is placed on the GPUs it can hold at once. When
its project's free guarantee holds some but not all of its concurrent tasks, it is split
(Run:AI's in-quota / over-quota): one part in-quota with ``%fits`` (never preempted), the
other over-quota with the rest of the concurrency (its own script ``job-overquota.sbatch``:
account ``P-oq``, the over-quota QOS, requeued at preemption), the points shared in the same
ratio. The parts run side by side; ``max_concurrent`` still holds over the whole sweep.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from hpclaunch import jobdir
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import PlanError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.jobspec.sweep import SweepValue
from hpclaunch.planning.plan import SubmissionPlan, build_plan, job_python
from hpclaunch.planning.points import ArrayChunk, expand, split_arrays
from hpclaunch.planning.study import study_config, study_note
from hpclaunch.slurm.times import format_time
from hpclaunch.study.config import STUDY_FILE, StudyConfig
from hpclaunch.supervise.sweep_task import placeholders

__all__ = ["SweepPlan", "plan_sweep"]

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
        chained: Each array waits for the one before of the same part (``max_concurrent``
            over several).
        overquota: A sweep split at its project's quota (:func:`plan_sweep`): the plan of
            the part that runs over-quota (its own script, account, QOS); ``None``: one part.
        parts: Per array, ``0`` (``plan``) or ``1`` (``overquota``); empty: all ``0``.
        unused: Parameters no ``{name}`` in the command uses (:func:`unused_parameters`).
        study: An adaptive sweep's study (written to ``<job dir>/study.json``); its points
            are empty: each task asks the study.
    """

    plan: SubmissionPlan
    points: tuple[dict[str, SweepValue], ...]
    arrays: tuple[ArrayChunk, ...]
    chained: bool
    overquota: SubmissionPlan | None = None
    parts: tuple[int, ...] = ()
    unused: tuple[str, ...] = ()
    study: StudyConfig | None = None

    def part_of(self, index: int) -> int:
        """``0`` or ``1``: which plan array ``index`` runs."""
        return self.parts[index] if self.parts else 0

    def plan_of(self, index: int) -> SubmissionPlan:
        """The plan (script, account, QOS) of array ``index``."""
        if self.part_of(index) == 1 and self.overquota is not None:
            return self.overquota
        return self.plan

    @property
    def sweep_id(self) -> str:
        """The sweep's id (the plan's submission id; names the job directory)."""
        return self.plan.submission_id

    @property
    def study_file(self) -> str:
        """Where an adaptive sweep's study is described (``<job dir>/study.json``)."""
        return posixpath.join(self.plan.job_dir, STUDY_FILE)

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
        plan = self.plan_of(index)
        if self.chained and previous is not None:
            try:  # on the command line, --dependency replaces the script's: keep both
                own = plan.option("--dependency")
            except KeyError:
                own = None
            argv.append(f"--dependency={own + ',' if own else ''}afterany:{previous}")
        return (*argv, plan.script_path, str(chunk.offset))

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
    can_expedite: bool = True,
) -> SweepPlan:
    """Plan ``spec``'s sweep on ``site`` (pure; see the module docstring).

    On a site with quotas the sweep is placed as a whole (one script for all its tasks) on
    the GPUs it can hold at once: ``min(points, max_concurrent)`` tasks' GPUs. A sweep
    judged task by task was placed in-quota and then had tasks wait at the quota
    (``AssocGrpGRES``) beside idle GPUs.

    Raises:
        PlanError: The spec has no ``sweep``, the cluster has no arrays, or
            :func:`~hpclaunch.planning.plan.build_plan` refuses the job.
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
    names = set(sweep.parameters) if sweep.is_study else _parameter_names(points)
    check_placeholders(spec, names)
    unused = tuple(unused_parameters(spec, names))
    pack = min(sweep.pack, len(points))
    tasks = -(-len(points) // pack)  # each array task runs `pack` points (the last: the rest)
    point_time = spec.resources.time
    spec = _time_per_task(spec, pack)
    try:
        arrays = split_arrays(tasks, max_array_size, sweep.max_concurrent)
    except ValueError as exc:
        raise PlanError(
            f"sweep: {exc}", hint="ask the admins for MaxArraySize > 0 in slurm.conf"
        ) from exc
    per_task = spec.resources.nodes * spec.resources.gpus_per_node
    at_once = min(tasks, sweep.max_concurrent or tasks)

    def plan_for(used: int | None, gpus: int) -> SubmissionPlan:  # the spec on this site
        return build_plan(
            spec,
            site,
            submission_id=submission_id,
            home=home,
            cwd=cwd,
            python=python,
            quota_used=used,
            quota_mode=quota_mode,
            quota_gpus=gpus,
            can_expedite=can_expedite,
        )

    try:
        whole = plan_for(quota_used, at_once * per_task)
    except PlanError as exc:
        if pack == 1 or not exc.message.startswith("resources.time"):
            raise
        raise PlanError(
            f"sweep.pack {pack}: each task runs {pack} points one after another, so it asks "
            f"{pack} x resources.time ({point_time}): {exc.message}",
            hint="lower sweep.pack, or resources.time (a point's)",
        ) from exc
    fits = _tasks_in_quota(spec, site, whole, quota_used, per_task, at_once)
    if fits:
        parts = _split(plan_for, tasks, fits, at_once, per_task, quota_used or 0, max_array_size)
    else:
        parts = [_Part(whole, arrays, None, 0)]
    chained = any(len(p.arrays) > 1 and p.arrays[0].limit for p in parts)
    params_file = posixpath.join(whole.job_dir, jobdir.SWEEP_PARAMS)
    study = study_config(sweep, submission_id, whole.job_dir) if sweep.is_study else None
    asks = ("--study", posixpath.join(whole.job_dir, STUDY_FILE)) if study else ()
    packed = ("--pack", str(pack), "--points", str(len(points))) if pack > 1 else ()
    task_step = (
        python,
        "-m",
        "hpclaunch.supervise.sweep_pack" if pack > 1 else "hpclaunch.supervise.sweep_task",
        "--params",
        params_file,
        *asks,
        *packed,
        f"--keep={len(whole.launch_prefix)}",
        "--",
    )
    split = _split_note(spec, site, parts, at_once, per_task, len(points)) if fits else None
    plans = []
    for part in parts:
        plan = part.plan
        notes = plan.notes + tuple(
            _notes(
                spec, names, len(points), part.arrays, chained, max_array_size, plan, unused, pack
            )
        )
        if pack > 1:
            notes += (_pack_note(spec, pack, len(points), tasks),)
        if study is not None:
            notes += (study_note(study),)
        if split:
            notes += (split,)
            plan = replace(plan, quota_warning=_split_warning(spec, site, fits, at_once, per_task))
        else:
            notes += _quota_notes(spec, site, plan, at_once, per_task, quota_used)
        script = posixpath.join(plan.job_dir, part.script) if part.script else plan.script_path
        prefix = task_step + plan.launch_prefix
        plans.append(
            replace(
                plan,
                launch_prefix=prefix,
                sweep_params=params_file,
                sweep_pack=pack,
                script_path=script,
                notes=notes,
            )
        )
    return SweepPlan(
        plan=plans[0],
        points=points,
        arrays=tuple(a for part in parts for a in part.arrays),
        chained=chained,
        overquota=plans[1] if len(plans) > 1 else None,
        parts=tuple(i for i, part in enumerate(parts) for _ in part.arrays) if fits else (),
        unused=unused,
        study=study,
    )


@dataclass(frozen=True)
class _Part:
    """One part of a sweep: its plan, arrays (offsets from ``first``) and script name."""

    plan: SubmissionPlan
    arrays: list[ArrayChunk]
    script: str | None
    first: int


def _arrays(count: int, max_array_size: int, cap: int, first: int) -> list[ArrayChunk]:
    return [replace(a, offset=a.offset + first) for a in split_arrays(count, max_array_size, cap)]


def _split(
    plan_for: Callable[[int, int], SubmissionPlan],
    count: int,
    fits: int,
    at_once: int,
    per_task: int,
    used: int,
    max_array_size: int,
) -> list[_Part]:
    """Run:AI's split of a sweep at its project's quota: ``fits`` tasks at a time in-quota
    (never preempted), the other ``at_once - fits`` over-quota on idle GPUs (preemptible).
    The points are shared in the same ratio, so that both parts end about together; the
    points keep their indices (the over-quota part's arrays start at its first point)."""
    inside = min(count - 1, max(fits, round(count * fits / at_once)))
    in_plan = plan_for(used, fits * per_task)
    over_plan = plan_for(used + fits * per_task, (at_once - fits) * per_task)
    assert (in_plan.quota, over_plan.quota) == ("in-quota", "over-quota")
    over_arrays = _arrays(count - inside, max_array_size, at_once - fits, inside)
    return [
        _Part(in_plan, _arrays(inside, max_array_size, fits, 0), None, 0),
        _Part(over_plan, over_arrays, jobdir.OVERQUOTA_SCRIPT, inside),
    ]


def _split_note(
    spec: JobSpec, site: SiteConfig, parts: list[_Part], at_once: int, per_task: int, count: int
) -> str:
    inside, over = parts
    project = spec.project or site.default_account
    cap_in, cap_over = inside.arrays[0].limit, over.arrays[0].limit
    return (
        f"quota judged for the whole sweep: {at_once} tasks can run at once x {per_task} "
        f"GPUs; project {project} has {(cap_in or 0) * per_task} guaranteed GPUs free: split "
        f"in two, points 0-{over.first - 1} in-quota ({cap_in} at a time, never preempted), "
        f"points {over.first}-{count - 1} over-quota ({cap_over} at a time, on idle GPUs, "
        f"preemptible; script {jobdir.OVERQUOTA_SCRIPT})"
    )


def _split_warning(spec: JobSpec, site: SiteConfig, fits: int, at_once: int, per_task: int) -> str:
    project = spec.project or site.default_account
    return (
        f"project {project} has {fits * per_task} of its guaranteed GPUs free; this sweep runs "
        f"{at_once} tasks at once: {fits} in-quota, {at_once - fits} over-quota on idle GPUs, "
        "which may be preempted (--quota=strict waits in-quota instead)"
    )


def _tasks_in_quota(
    spec: JobSpec,
    site: SiteConfig,
    plan: SubmissionPlan,
    quota_used: int | None,
    per_task: int,
    at_once: int,
) -> int:
    """How many of the sweep's concurrent tasks fit in its project's free guarantee, when
    that is some but not all of them (then the sweep is split); else 0."""
    if plan.quota != "over-quota" or plan.quota_warning is None or per_task == 0:
        return 0  # in-quota as a whole, no quotas, a preemptible tier, or --quota=strict
    project = spec.project or site.default_account
    if project not in site.quotas:
        return 0
    fits = max(0, site.quotas[project] - (quota_used or 0)) // per_task
    return fits if 0 < fits < at_once else 0


def _notes(
    spec: JobSpec,
    names: set[str],
    count: int,
    arrays: Sequence[ArrayChunk],
    chained: bool,
    max_array_size: int,
    plan: SubmissionPlan,
    unused: Sequence[str],
    pack: int = 1,
) -> list[str]:
    assert spec.sweep is not None
    first = "point" if pack == 1 else "task"  # a packed task's first point: task x pack
    notes = [
        f"sweep ({spec.sweep.method}): {count} points over {', '.join(sorted(names)) or '-'}; "
        f"each task gets {plan.job_dir}/tasks/<point>/ (control, ledger, checkpoints, logs)",
        f"{len(arrays)} array{'' if len(arrays) == 1 else 's'} of at most {max_array_size} "
        f"tasks (indices stay below MaxArraySize {max_array_size}): "
        + _first_and_last([f"--array={a.array_spec} from {first} {a.offset}" for a in arrays]),
    ]
    if chained:
        notes.append(
            f"max_concurrent {spec.sweep.max_concurrent}: each array starts after the one "
            "before ended (--dependency=afterany), so the cap holds over the whole sweep"
        )
    if unused:
        notes.append(unused_note(unused))
    return notes


def _time_per_task(spec: JobSpec, pack: int) -> JobSpec:
    """The spec with ``resources.time`` for a whole task: ``pack`` points, one after another
    (``resources.time`` is a point's)."""
    seconds = spec.resources.time_seconds
    if pack == 1 or seconds is None:
        return spec
    resources = spec.resources.model_copy(update={"time": format_time(seconds * pack)})
    return spec.model_copy(update={"resources": resources})


def _pack_note(spec: JobSpec, pack: int, points: int, tasks: int) -> str:
    each = (
        "each point in the task's batch step with its own log and ledger (launcher none: no "
        "sidecar, so no job step or retry of its own)"
        if spec.launcher == "none"
        else "each point its own job step under its own sidecar, with its own log, ledger, "
        "result and retry"
    )
    time = spec.resources.time
    limit = (
        f"; resources.time is a point's, so each task asks {pack} x that: {time}"
        if time is not None
        else "; no resources.time: the partition's default limit is each task's, for all its points"
    )
    return (
        f"sweep.pack {pack}: {points} points in {tasks} array tasks (Slurm sees {tasks} jobs, "
        f"not {points}); each task runs its points one after another in its allocation, "
        f"{each}, and a task started again (a requeue, a preemption) skips the points that "
        f"completed{limit}"
    )


def _words(spec: JobSpec) -> tuple[str, ...]:
    """The words a task's placeholders may be in: ``command``, or ``script`` and ``args``."""
    return tuple(spec.command) if spec.command is not None else (spec.script or "", *spec.args)


def _parameter_names(points: Sequence[Mapping[str, object]]) -> set[str]:
    return {name for point in points for name in point}


def check_placeholders(spec: JobSpec, names: set[str]) -> None:
    """Refuse a ``{name}`` that names no sweep parameter: every task would get it as
    written (a typo, ``{hiden}`` for ``hidden``, made every task fail).

    Raises:
        PlanError: Naming the placeholder, the closest parameter and the escape.
    """

    field = "command" if spec.command is not None else "args"
    # ${HOME} in a `bash -c` line is the shell's: not ours to refuse.
    words = [re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", "", word) for word in _words(spec)]
    for unknown in sorted(placeholders(words) - names):
        close = difflib.get_close_matches(unknown, sorted(names), n=1, cutoff=0.6)
        guess = f"did you mean {{{close[0]}}}? " if close else ""
        raise PlanError(
            f"{field}: {{{unknown}}} is not a sweep parameter (parameters: "
            f"{', '.join(sorted(names)) or 'none'}): every task would get it as written",
            hint=f"{guess}write {{{{{unknown}}}}} for a literal {{{unknown}}}",
        )


def unused_parameters(spec: JobSpec, names: set[str]) -> list[str]:
    """Sweep parameters (``names``) no ``{name}`` in the command uses: only
    :func:`hpclaunch.runtime.sweep_params` gives them to the task."""
    return sorted(names - placeholders(_words(spec)))


def unused_note(unused: Sequence[str]) -> str:
    """The dry run's and the submit warning's words for :func:`unused_parameters`."""
    return (
        f"sweep parameter{'s' if len(unused) > 1 else ''} {', '.join(unused)} not in "
        "command or args (no {name} placeholder): the tasks differ only if the trainer reads "
        "runtime.sweep_params()"
    )


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


def _first_and_last(items: Sequence[str], shown: int = 3) -> str:
    """``a, b, c, ... (N more), z``: a plan of 600 arrays stays one readable line."""
    if len(items) <= 2 * shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])}, ... ({len(items) - shown - 1} more), {items[-1]}"
