"""Submit one job spec: what ``hpclaunch submit SPEC`` and ``hpclaunch.submit`` both do.

Load (a file, a dict or a :class:`~hpclaunch.jobspec.job.JobSpec`), plan on the session's site
with the project's live quota use, refuse what the cluster would refuse (its cached
capabilities), then, unless a dry run: take the job that already carries the submission id
(history first, then Slurm), or submit and record it in the history.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.errors import BackendError, PlanError, SubmissionError, TransportError
from hpclaunch.ops.context import Context
from hpclaunch.ops.notify import notify_config, warn_unsendable, write_notify_config
from hpclaunch.ops.plan_job import (
    SpecInput,
    SpecKept,
    hash_of,
    naming,
    plan_spec,
    read_once,
    remember_submission,
    spec_data,
    spec_source,
    warn_over_quota,
)
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.ops.tracking import make_tracker_runs
from hpclaunch.planning.checks import check_plan, raise_for_problems
from hpclaunch.planning.plan import job_python
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.store.history import find_record

if TYPE_CHECKING:
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob

__all__ = [
    "PRIVATE_DIR_HINT",
    "Submitted",
    "check_before_submit",
    "existing_job",
    "spec_hash",
    "submit_spec",
    "untrusted",
    "warn_idle_unwatched",
    "warn_trackers_missing",
]


@dataclass(frozen=True)
class Submitted:
    """What a submission did.

    Attributes:
        plan: The plan (account, QOS, tier, quota placement, paths).
        job: The batch script and sbatch argv.
        ref: The job; ``None`` for a dry run.
        existing: The submission id already named this job: nothing was submitted.
        source: How the spec is named in messages (its path, or ``<python>``).
    """

    plan: SubmissionPlan
    job: RenderedJob
    ref: JobRef | None
    existing: bool
    source: str


def submit_spec(
    session: Context, spec: SpecInput, opts: SubmitOptions[SubmissionPlan]
) -> Submitted:
    """Plan ``spec`` and submit it once, as ``opts`` say (see the module docstring).

    Raises:
        SpecError, PlanError: The spec is wrong, or the site or cluster cannot run it.
        SubmissionError: Slurm refused it, or ``submission_id`` names a job of another spec.
    """
    spec = read_once(spec)
    source = spec_source(spec)
    submission_id, cwd = opts.submission_id, opts.cwd
    kept = SpecKept.of(session, spec, opts.overrides, cwd=cwd, rerun_of=opts.rerun_of)
    with naming(source):
        plan = plan_spec(
            session,
            spec,
            submission_id,
            cwd=cwd,
            live_usage=True,
            # A snapshot's paths are not on the cluster yet; a rerun's are where they were.
            check_paths=opts.check and (cwd is None or opts.rerun_of is not None),
            overrides=opts.overrides,
        )
        warn_over_quota(session, plan, source)
        warn_idle_unwatched(session, plan)
        warn_trackers_missing(session, plan)
        check_before_submit(session, plan, enabled=opts.check)
    job = session.backend.dryrun(plan)
    notices = notify_config(plan)  # a missing webhook is refused by a dry run too
    warn_unsendable(session, plan)
    if opts.dry_run:
        return Submitted(plan, job, None, False, source)
    if submission_id:
        _refuse_changed_spec(session, submission_id, kept.spec_hash, opts.force)
    why = untrusted(session, [plan.job_dir])
    if why is not None:  # a directory another user made, with a submission id known ahead
        raise SubmissionError(
            f"{why}: the job's script is not written there", hint=PRIVATE_DIR_HINT
        )
    if opts.before_submit is not None:
        opts.before_submit(plan)
    existing = existing_job(session, submission_id) if submission_id else None
    if existing is not None:
        return Submitted(plan, job, existing, True, source)
    if notices is not None:
        write_notify_config(session, plan, notices)
    make_tracker_runs(session, plan)
    ref = session.backend.submit(job)
    remember_submission(session, plan, ref, kept=kept)
    return Submitted(plan, job, ref, False, source)


#: What to do about a job directory that is not the user's own and private.
PRIVATE_DIR_HINT = (
    "a job directory must be yours and private (mode 0700): set job_root to a directory of "
    "your own (the default is ~/.hpclaunch/jobs), or give a new submission id"
)


def warn_idle_unwatched(session: Context, plan: SubmissionPlan) -> None:
    """Warn, once at submit (and in the dry run), when the job has an idle guard but its
    Python lacks pynvml: no GPU is sampled, so the guard never stops it. Known only when
    the job runs this interpreter (no venv, conda or container of its own)."""
    if "HPCLAUNCH_GPU_IDLE_SECONDS" not in dict(plan.runtime_env):
        return
    if not _runs_this_python(session, plan):
        return
    if importlib.util.find_spec("pynvml") is None:
        session.warn(
            f"idle guard: the job's Python ({sys.executable}) has no pynvml, so no GPU is "
            "sampled and the guard never stops the job; install it there with "
            "pip install 'hpclaunch[gpu]' (nvidia-ml-py)"
        )


#: The package each tracker logs with, inside the job (runtime/tracking.py).
_TRACKER_PACKAGES = {"wandb": "wandb", "mlflow": "mlflow", "tensorboard": "tensorboard"}


def warn_trackers_missing(session: Context, plan: SubmissionPlan) -> None:
    """Warn, at submit and in the dry run, when the spec's trackers are not installed in
    the job's Python (its first report_progress with metrics would fail); known only when
    the job runs this interpreter."""
    if plan.tracking is None or not _runs_this_python(session, plan):
        return
    missing = [
        name
        for name in plan.tracking.names
        if importlib.util.find_spec(_TRACKER_PACKAGES[name]) is None
    ]
    if missing:
        session.warn(
            f"tracking: the job's Python ({sys.executable}) lacks {', '.join(missing)}, which "
            "the trainer's first runtime.report_progress(step, metrics=...) needs; install "
            "them there with pip install 'hpclaunch[tracking]'"
        )


def _runs_this_python(session: Context, plan: SubmissionPlan) -> bool:
    """Whether the job runs this interpreter (no venv, conda or container of its own)."""
    if plan.venv or plan.conda or plan.container is not None:
        return False
    return job_python(session.site_config, session.home) == sys.executable


def untrusted(session: Context, paths: Sequence[str]) -> str | None:
    """Why one of ``paths`` (those that exist) cannot be trusted to hold only what this user
    wrote: another user's, or writable by others (a pickle or script there could run
    their code as this user); ``None`` when all are private."""
    return session.runner.first_foreign_or_open(paths)  # one command for all, over SSH


def check_before_submit(session: Context, plan: SubmissionPlan, *, enabled: bool) -> None:
    """Raise a :class:`~hpclaunch.errors.PlanError` if the cluster would refuse ``plan``.
    When the cluster cannot be read, warn and go on: sbatch has the last word."""
    _refuse_other_backends_jobs(session, plan)
    if not enabled or not session.backend.has_cluster:
        return

    try:
        caps = session.capabilities()
    except (BackendError, TransportError) as exc:
        session.warn(f"not checked against the cluster ({exc.message.splitlines()[0]})")
        return
    raise_for_problems(check_plan(plan, caps), caps)


def _refuse_other_backends_jobs(session: Context, plan: SubmissionPlan) -> None:
    """A dependency on a job of the other kind (a local job for Slurm, a Slurm job for the
    local backend) can never hold: refused here, with the backend that knows it.

    Raises:
        PlanError: Such a dependency.
    """
    value = next((v for f, v in plan.sbatch_options if f == "--dependency"), None) or ""
    ids = [part for part in re.split(r"[:,?]", value) if part and part[0].isdigit()]
    ids += re.findall(r"local-\d+(?:_\d+)?", value)
    local = session.backend.name == "local"
    wrong = [i for i in ids if i.startswith("local-") != local]
    if wrong:
        where = "the local backend" if local else "Slurm"
        raise PlanError(
            f"dependencies: job {wrong[0]} is not {where}'s: this job could never start",
            hint="a job may wait only for jobs of its own backend (local-<n> for "
            "Session(backend='local'), Slurm's ids otherwise)",
        )


def spec_hash(spec: SpecInput, overrides: Sequence[str] = ()) -> str | None:
    """sha256 of the spec's canonical JSON (keys sorted, no spaces), with ``overrides``
    applied: the same for the same job however the file is laid out or commented;
    ``None`` if it cannot be read."""
    data = spec_data(spec, overrides)
    return hash_of(data) if data is not None else None


def _refuse_changed_spec(
    session: Context, submission_id: str, now: str | None, force: bool
) -> None:
    """A submission id names one spec: a retry of a *changed* spec (hash ``now``) would
    silently keep the old job. Refuse it, unless ``force``."""
    record = find_record(submission_id=submission_id)
    if record is None or not record.spec_hash or now is None or record.spec_hash == now:
        return
    message = (
        f"submission id {submission_id} already names job {record.job_id}, submitted from a "
        f"different spec (sha256 {record.spec_hash[:12]}, now {now[:12]}): a retry keeps "
        "that job and would not run this spec"
    )
    if force:
        session.warn(f"{message}; --force: keeping job {record.job_id}")
        return
    raise SubmissionError(
        message,
        hint="give a new --submission-id to submit the changed spec, or --force to take "
        f"job {record.job_id} as the answer anyway",
    )


def existing_job(session: Context, submission_id: str) -> JobRef | None:
    """The job that already carries ``submission_id``: the history first (no Slurm call),
    then Slurm (the history misses a job whose first try died right after sbatch)."""
    record = find_record(submission_id=submission_id)
    if record is not None:
        return JobRef(record.job_id, record.cluster)
    return session.backend.find_submission(submission_id)
