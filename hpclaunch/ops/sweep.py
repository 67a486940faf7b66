"""Submit a spec's sweep as job arrays: what ``hpclaunch sweep SPEC`` and
``session.sweeps.submit`` both do.

Plan the points (tier ``low`` unless the spec names one; the arrays split at the cluster's
``MaxArraySize``; an over-quota part when the project's guarantee cannot hold them all),
check them as ``submit`` does, then submit array after array, recording each at once (the
sweep record and a history row per array: a later failure must not lose the ones already in
Slurm).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from hpclaunch.errors import (
    BackendError,
    ControllerUnreachable,
    HpclaunchError,
    PlanError,
    SubmissionError,
    TransportError,
)
from hpclaunch.ops.context import Context
from hpclaunch.ops.notify import notify_config, warn_unsendable, write_notify_config
from hpclaunch.ops.plan_job import (
    SpecInput,
    SpecKept,
    can_expedite,
    load_spec_input,
    naming,
    quota_mode,
    quota_used,
    read_once,
    remember_submission,
    require_paths,
    require_python,
    spec_source,
    warn_over_quota,
    with_user_notify,
)
from hpclaunch.ops.submit import (
    check_before_submit,
    warn_idle_unwatched,
    warn_trackers_missing,
)
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.ops.tracking import make_tracker_runs, task_runs
from hpclaunch.planning.plan import new_submission_id
from hpclaunch.planning.points import params_lines
from hpclaunch.planning.sweep import DEFAULT_MAX_ARRAY_SIZE, plan_sweep, unused_note
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.slurm.limits import parse_submit_limits, submit_limits_argv
from hpclaunch.store.history import find_record
from hpclaunch.store.sweeps import SweepArray, SweepRecord, list_sweeps, save_sweep
from hpclaunch.study.config import study_text

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.planning.sweep import SweepPlan
    from hpclaunch.transport.base import Runner

__all__ = [
    "SweepPreview",
    "Swept",
    "plan_sweep_spec",
    "preview_sweep",
    "submit_sweep",
    "submit_sweep_spec",
]


@dataclass(frozen=True)
class Swept:
    """A submitted sweep: its plan, its record, and the arrays in Slurm (none: dry run)."""

    sweep: SweepPlan
    record: SweepRecord | None
    refs: tuple[JobRef, ...]


@dataclass(frozen=True)
class SweepPreview:
    """What a sweep would submit (``hpclaunch sweep --dry-run``): its plan (the points, the
    arrays and each one's sbatch argv, ``sweep.plan.notes``) and the batch script; with a
    part placed over-quota, that part's script too."""

    sweep: SweepPlan
    job: RenderedJob
    overquota: RenderedJob | None


def preview_sweep(
    context: Context, spec: SpecInput, opts: SubmitOptions[SweepPlan]
) -> SweepPreview:
    """Plan, check and render the sweep of ``spec`` as :func:`submit_sweep_spec` would,
    submitting nothing.

    Raises:
        SpecError, PlanError: As :func:`submit_sweep_spec`.
    """
    sweep = submit_sweep_spec(context, spec, replace(opts, dry_run=True)).sweep
    over = sweep.overquota
    return SweepPreview(
        sweep,
        context.backend.dryrun(sweep.plan),
        context.backend.dryrun(over) if over is not None else None,
    )


def submit_sweep_spec(context: Context, spec: SpecInput, opts: SubmitOptions[SweepPlan]) -> Swept:
    """Plan the sweep of ``spec`` (a file's path, a mapping or a JobSpec) and submit its
    arrays, as ``opts`` say (see the module docstring). ``opts.before_submit`` is called
    before the first array is submitted (a map's call is written into the job directory
    then); ``opts.rerun_of`` is the sweep task this sweep of one point reruns.

    ``opts.submission_id`` is your own id for the sweep. A sweep that already has it is
    completed, not doubled: each array that a job already carries (its ``<id>-a<index>``
    tag, in the history or in Slurm) is taken, only the others are submitted: the retry of
    a sweep that an outage or a lost link interrupted.

    Raises:
        SpecError, PlanError: The spec is wrong, or this site or cluster cannot run it.
        SubmissionError: Slurm refused an array (the ones before it stay, recorded), or
            ``opts.submission_id`` names a sweep of other points.
    """
    spec = read_once(spec)
    spec_path = spec_source(spec)
    check, sweep_id, overrides, cwd = opts.check, opts.submission_id, opts.overrides, opts.cwd
    with naming(spec_path):
        sweep = plan_sweep_spec(
            context,
            spec,
            refresh=False,
            check_paths=check,
            sweep_id=sweep_id,
            overrides=overrides,
            cwd=cwd,
        )
        warn_over_quota(context, sweep.plan, spec_path)
        warn_idle_unwatched(context, sweep.plan)
        warn_trackers_missing(context, sweep.plan)
        if sweep.unused:  # the trainer may read them with sweep_params(): a warning
            context.warn(f"{spec_path}: {unused_note(sweep.unused)}")
        for plan in (sweep.plan, sweep.overquota):
            if plan is not None:
                check_before_submit(context, plan, enabled=check)
        tasks = sum(a.count for a in sweep.arrays)  # a packed sweep's: points / pack
        points = len(sweep.points)
        check_job_count(context, tasks, enabled=check, points=points)
        check_submit_limits(context, sweep.plan, tasks, enabled=check, points=points)
    notices = notify_config(sweep.plan)  # a missing webhook is refused by a dry run too
    warn_unsendable(context, sweep.plan)
    if opts.dry_run:
        return Swept(sweep, None, ())
    if opts.before_submit is not None:
        opts.before_submit(sweep)
    if notices is not None:
        write_notify_config(context, sweep.plan, notices)
    make_tracker_runs(context, sweep.plan, task_runs(sweep.plan.job_name, sweep.points))
    record = (_earlier_record(sweep) if sweep_id else None) or _record(context, sweep)
    done: list[JobRef] = []
    # Kept in the history: a task can be rerun alone.
    kept = SpecKept.of(context, spec, overrides, cwd=cwd, rerun_of=opts.rerun_of)

    def remember(index: int, ref: JobRef) -> None:
        nonlocal record
        done.append(ref)
        offset = sweep.arrays[index].offset
        if not any(a.offset == offset and a.job_id == ref.job_id for a in record.arrays):
            record = _add_array(context, record, sweep, index, ref, kept)

    def taken(index: int) -> JobRef | None:
        return _taken_array(context, record, sweep, index) if sweep_id else None

    try:
        try:
            submit_sweep(context.backend, context.runner, sweep, on_array=remember, taken=taken)
        except SubmissionError as exc:
            if done or "array" not in str(exc.result.stderr if exc.result else "").lower():
                raise
            # The cached MaxArraySize may be stale (the cluster was reconfigured): ask again.
            sweep = plan_sweep_spec(
                context,
                spec,
                refresh=True,
                sweep_id=sweep.sweep_id,
                overrides=overrides,
                cwd=cwd,
            )
            record = _record(context, sweep)
            submit_sweep(context.backend, context.runner, sweep, on_array=remember)
    except HpclaunchError as exc:
        if not done and not isinstance(exc, (ControllerUnreachable, TransportError)):
            raise  # nothing in Slurm, and not an outage: a retry would fail the same way
        retry = (
            f"finish the sweep with 'hpclaunch sweep submit {spec_path} --sweep-id "
            f"{sweep.sweep_id}': the {len(done)} of {len(sweep.arrays)} arrays in Slurm "
            "are taken, not submitted twice"
        )
        exc.hint = f"{exc.hint}; {retry}" if exc.hint else retry
        raise
    return Swept(sweep, record, tuple(done))


def check_job_count(
    context: Context, tasks: int, *, enabled: bool, points: int | None = None
) -> None:
    """Refuse a sweep of more tasks than slurmctld holds at once (MaxJobCount, all users'
    jobs together, each array task one job): it would fail part-way; warn past half of it.

    Raises:
        PlanError: More tasks than MaxJobCount.
    """
    if not enabled or not context.backend.has_cluster:
        return
    try:
        limit = context.capabilities().max_job_count
    except (BackendError, TransportError):
        return  # check_before_submit has warned
    if not limit or tasks <= limit // 2:
        return
    said = (
        f"{points or tasks} points are {tasks} jobs to Slurm (each array task counts) against the "
        f"cluster's MaxJobCount of {limit}, all users' jobs together"
    )
    if tasks > limit:
        raise PlanError(
            f"{said}: the sweep would fail part-way",
            hint=f"split it into sweeps of at most {limit // 2} points (a parameter's values "
            "in parts, each its own sweep), pack more points into each task (sweep.pack), or "
            "ask the cluster's admins",
        )
    context.warn(f"{said}: its last arrays may be refused when the queue is full")


def check_submit_limits(
    context: Context,
    plan: SubmissionPlan,
    tasks: int,
    *,
    enabled: bool,
    points: int | None = None,
) -> None:
    """Refuse a sweep of more tasks than its association or QOS takes now (MaxSubmitJobs,
    GrpSubmitJobs up the account tree, the QOS's per-user and per-account limits; each
    array task one job): its later arrays would be refused part-way. One scontrol call;
    where it cannot be read (PrivateData, an old slurmctld), sbatch has the last word.

    Raises:
        PlanError: More tasks than one of those limits has room for.
    """
    if not enabled or not context.backend.has_cluster:
        return
    user = context.runner.user()
    try:
        shown = context.runner.run(submit_limits_argv(user, plan.qos), timeout=60)
    except TransportError:
        return
    if not shown.ok:
        return
    limits = parse_submit_limits(shown.stdout, user, plan.account, plan.qos)
    tight = min(limits, key=lambda limit: limit.room, default=None)
    if tight is None or tasks <= tight.room:
        return
    said = f"{points or tasks} points are {tasks} jobs to Slurm (each array task counts), and the "
    if tight.room == 0:
        raise PlanError(
            f"{said}{tight.what} is full ({tight.used} jobs held, limit {tight.limit})",
            hint="wait for jobs held against it to end ('hpclaunch status' lists yours), "
            "or ask the cluster's admins",
        )
    raise PlanError(
        f"{said}{tight.what} takes {tight.room} more now ({tight.used} of {tight.limit} held): "
        "the sweep would fail part-way",
        hint=f"split it into sweeps of at most {tight.room} points, pack more points into "
        "each task (sweep.pack), wait for your jobs to end, or ask the cluster's admins",
    )


def _earlier_record(sweep: SweepPlan) -> SweepRecord | None:
    """The record of an earlier try of the sweep ``sweep.sweep_id``, if it has one.

    Raises:
        SubmissionError: That sweep has other points (another spec, or the spec changed).
    """
    found = [r for r in list_sweeps() if r.sweep_id == sweep.sweep_id]
    if not found:
        return None
    record = found[0]
    if record.points != len(sweep.points) or record.name != sweep.plan.job_name:
        raise SubmissionError(
            f"sweep id {sweep.sweep_id} already names sweep {record.name!r} of "
            f"{record.points} points, not {sweep.plan.job_name!r} of {len(sweep.points)}",
            hint="give a new --sweep-id to submit this spec as a sweep of its own",
        )
    return record


def _taken_array(
    context: Context, record: SweepRecord, sweep: SweepPlan, index: int
) -> JobRef | None:
    """The array ``index`` of the sweep if Slurm has it: the job found by its tag, or the
    one the record or history names, when slurmctld knows it (squeue), or accounting
    knows it by the sweep's name as ended.

    slurmctld keeps its state on disk at most every 5 s (``SAVE_MAX_WAIT``,
    src/slurmctld/state_save.c): killed right after an sbatch, it forgets the job, gives
    its id to the next one, and slurmdbd keeps the lost job PENDING for ever (measured on
    25.11). Such an array is submitted again.
    """
    tag = sweep.array_submission_id(index)
    found = context.backend.find_submission(tag)
    offset = sweep.arrays[index].offset
    history = find_record(submission_id=tag)
    candidates = [
        *([found.job_id.split("_", 1)[0]] if found is not None else []),  # 514_[0-100]
        *(a.job_id for a in record.arrays if a.offset == offset and a.tasks is None),
        *([history.job_id] if history is not None else []),
    ]
    refs = [JobRef(job_id, record.cluster) for job_id in dict.fromkeys(candidates)]
    infos = context.backend.status(refs) if refs else {}  # one squeue (+ sacct) for all
    for ref in refs:
        info = infos.get(ref)
        if info is None or info.name != sweep.plan.job_name:
            continue
        if info.source == "squeue" or (info.source == "sacct" and info.state.is_finished):
            return ref
    if candidates:
        context.warn(
            f"array {index} of sweep {sweep.sweep_id} (job {candidates[0]}) is not known to "
            "slurmctld: it lost the job (restarted without its last saved state); "
            "submitting the array again"
        )
    return None


def plan_sweep_spec(
    context: Context,
    spec_input: SpecInput,
    *,
    refresh: bool,
    sweep_id: str | None = None,
    check_paths: bool = False,
    overrides: Sequence[str] = (),
    cwd: str | None = None,
) -> SweepPlan:
    """The sweep's plan on the context's site (``refresh``: read MaxArraySize anew;
    ``cwd``: where relative paths start, default here, or over SSH the job directory)."""
    spec = with_user_notify(context, load_spec_input(spec_input, overrides))
    require_python(context, spec)
    if spec.sweep is not None and "tier" not in spec.model_fields_set:
        spec = spec.model_copy(update={"tier": "low"})  # as plan_sweep does: for the quota
    sweep = plan_sweep(
        spec,
        context.site_config,
        submission_id=sweep_id or new_submission_id(),
        home=context.home,
        cwd=cwd if cwd is not None else None if context.is_remote else os.getcwd(),
        max_array_size=_max_array_size(context, refresh),
        quota_used=quota_used(context, spec),
        quota_mode=quota_mode(context),
        can_expedite=can_expedite(context),
    )
    if check_paths:
        require_paths(context, spec, sweep.plan, spec_source(spec_input))
    return sweep


def _max_array_size(context: Context, refresh: bool) -> int:
    if not context.backend.has_cluster:
        return DEFAULT_MAX_ARRAY_SIZE
    try:
        found = context.capabilities(refresh=refresh).max_array_size
    except (BackendError, TransportError) as exc:
        context.warn(
            f"MaxArraySize not read ({exc.message.splitlines()[0]}); assuming "
            f"Slurm's default {DEFAULT_MAX_ARRAY_SIZE}"
        )
        return DEFAULT_MAX_ARRAY_SIZE
    return DEFAULT_MAX_ARRAY_SIZE if found is None else found


def _record(context: Context, sweep: SweepPlan) -> SweepRecord:
    plan = sweep.plan
    return SweepRecord(
        sweep_id=sweep.sweep_id,
        name=plan.job_name,
        site=context.site_config.name,
        job_dir=plan.job_dir,
        log_dir=plan.log_dir,
        params_file=sweep.params_file,
        points=len(sweep.points),
        submitted_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        tier=plan.tier,
        qos=plan.qos,
        max_concurrent=None if not sweep.arrays else sweep.arrays[0].limit,
        pack=plan.sweep_pack,
    )


def _add_array(
    context: Context,
    record: SweepRecord,
    sweep: SweepPlan,
    index: int,
    ref: JobRef,
    kept: SpecKept | None = None,
) -> SweepRecord:
    """Record one more submitted array, in the sweep record and the submission history
    (with the sweep's spec, ``kept``, for ``hpclaunch rerun`` of a task)."""
    chunk = sweep.arrays[index]
    plan = sweep.plan_of(index)  # a split sweep: the array's own part's QOS and quota
    # A lost array goes (submitted again); reruns of points stay, after the arrays.
    others = tuple(a for a in record.arrays if a.offset != chunk.offset or a.tasks is not None)
    added = SweepArray(ref.job_id, chunk.offset, chunk.count, script=plan.script_path)
    record = replace(
        record,
        cluster=ref.cluster,
        arrays=tuple(sorted((*others, added), key=lambda a: (a.tasks is not None, a.offset))),
    )
    try:
        save_sweep(record)
    except OSError as exc:  # submitted: failing now would invite a second submission
        context.warn(f"could not record array {ref.job_id}: {exc}")
    remember_submission(
        context,
        plan,
        ref,
        submission_id=sweep.array_submission_id(index),
        submitted_at=record.submitted_at,
        kept=kept,
    )
    return record


def submit_sweep(
    backend: Backend,
    runner: Runner,
    sweep: SweepPlan,
    *,
    on_array: Callable[[int, JobRef], None] | None = None,
    taken: Callable[[int], JobRef | None] | None = None,
) -> list[JobRef]:
    """Write the params file, then submit each array (one sbatch each).

    The batch script is rendered once and written with the first array submitted; the
    others run the same file (only their sbatch argv differs), so it is not written again:
    one file transfer per sweep, not per array, when Slurm is reached over SSH.

    ``on_array(index, ref)`` is called after each array is submitted or taken (to record
    it at once: a later failure must not lose the ones already in Slurm). ``taken(index)``
    returns the job that already is array ``index`` (an earlier try's), which is then not
    submitted again.
    """
    jobs: dict[int, RenderedJob] = {0: backend.dryrun(sweep.plan)}
    if sweep.overquota is not None:
        jobs[1] = backend.dryrun(sweep.overquota)
    runner.put_file(sweep.params_file, params_lines(sweep.points), 0o600)
    if sweep.study is not None:
        runner.put_file(sweep.study_file, study_text(sweep.study), 0o600)
    refs: list[JobRef] = []
    last: dict[int, str] = {}  # each part's latest array: the next one of the part waits
    written: set[int] = set()  # the parts whose script this call wrote
    for index in range(len(sweep.arrays)):
        part = sweep.part_of(index)
        earlier = taken(index) if taken is not None else None
        if earlier is not None:
            ref = earlier
        else:
            tagged = replace(sweep.plan_of(index), submission_id=sweep.array_submission_id(index))
            argv = sweep.sbatch_argv(index, last.get(part))
            ref = backend.submit(
                replace(jobs[part], sbatch_argv=argv, plan=tagged), script_written=part in written
            )
            written.add(part)
        last[part] = ref.job_id
        refs.append(ref)
        if on_array is not None:
            on_array(index, ref)
    return refs
