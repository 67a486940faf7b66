"""Steps shared by the commands that turn a spec into a job."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hpclaunch.backends.abilities import queue_of
from hpclaunch.errors import BackendError, HistoryError, PlanError, SpecError, TransportError
from hpclaunch.jobspec.job import JobSpec, apply_overrides, read_spec_file, validate_spec
from hpclaunch.ops.context import Context, slurm_user
from hpclaunch.ops.notify import describe_notify
from hpclaunch.planning.paths import check_paths
from hpclaunch.planning.plan import SubmissionPlan, build_plan, needs_python, new_submission_id
from hpclaunch.planning.points import expand
from hpclaunch.planning.quota import USAGE_STATES, usage_of
from hpclaunch.slurm.queue import QueueQuery
from hpclaunch.store.history import SubmissionRecord, record_submission

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend, JobRef
    from hpclaunch.config.site import SiteConfig


#: A spec: a YAML file's path (text or ``pathlib.Path``), its mapping, or a validated spec.
SpecInput = str | os.PathLike[str] | Mapping[str, Any] | JobSpec


def as_spec_input(spec: SpecInput) -> str | Mapping[str, Any] | JobSpec:
    """``spec`` with a ``pathlib.Path`` (any ``os.PathLike``) turned into its text."""
    return os.fspath(spec) if isinstance(spec, os.PathLike) else spec


class NamedSpec(dict[str, Any]):
    """A spec mapping with its own name in messages (a rerun's: ``rerun of job 123``)."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        super().__init__(data)
        self.source = source


def spec_source(spec: SpecInput) -> str:
    """How ``spec`` is named in messages: its file's path, a :class:`NamedSpec`'s name, or
    ``<python>``."""
    spec = as_spec_input(spec)
    if isinstance(spec, NamedSpec):
        return spec.source
    return spec if isinstance(spec, str) else "<python>"


def read_once(spec: SpecInput) -> Mapping[str, Any] | JobSpec:
    """``spec`` with a file read now, once, as a :class:`NamedSpec` of its mapping (named by
    its path): what the history keeps, the hash and the plan are then of one reading.

    Raises:
        SpecError: The file is missing or not YAML, or it is a multi-job file.
    """
    spec = as_spec_input(spec)
    return NamedSpec(read_spec_file(spec), spec) if isinstance(spec, str) else spec


def load_spec_input(spec: SpecInput, overrides: Sequence[str] = ()) -> JobSpec:
    """``spec`` validated, with ``overrides`` applied, as a spec file is (errors name the
    fields and :func:`spec_source`)."""
    spec = read_once(spec)
    data = spec.model_dump(mode="json", exclude_unset=True) if isinstance(spec, JobSpec) else spec
    return validate_spec(data, spec_source(spec), overrides)


def plan_spec(
    session: Context,
    spec: SpecInput,
    submission_id: str | None = None,
    *,
    cwd: str | None = None,
    live_usage: bool = False,
    check_paths: bool = False,
    overrides: Sequence[str] = (),
) -> SubmissionPlan:
    """Load ``spec`` (:data:`SpecInput`) and plan it on the session's site.

    ``submission_id``: the caller's own (``submit --submission-id``); default: a new one.
    ``cwd``: where the job starts when the spec names no workdir, and where relative paths
    start (``submit --sync``: the snapshot). Default: the current directory on this machine;
    over SSH, the job directory (a local path means nothing on the cluster).
    ``live_usage``: on a site with quotas, read the project's in-quota GPUs from the
    cluster (one squeue) to decide in-quota/over-quota; otherwise the plan says it took 0.
    ``check_paths``: refuse the spec if a path it needs is missing (:func:`require_paths`).
    ``overrides``: ``KEY=VALUE`` changes to the spec (``submit --set``).
    """
    source = spec_source(spec)
    loaded = load_spec_input(spec, overrides)
    refuse_sweep(loaded, source)
    plan = plan_job(session, loaded, submission_id, cwd=cwd, live_usage=live_usage)
    if check_paths:
        require_paths(session, loaded, plan, source)
    return plan


def require_paths(session: Context, spec: JobSpec, plan: SubmissionPlan, source: str) -> None:
    """The paths ``spec`` needs exist where Slurm runs (:mod:`hpclaunch.planning.paths`): this
    machine, or the login node over SSH (one command)."""

    runner = session.runner if session.is_remote else None
    where = runner.where if runner is not None else "this machine"
    check_paths(
        spec, plan, session.site_config, session.home, source=source, runner=runner, where=where
    )


@contextlib.contextmanager
def naming(source: str) -> Iterator[None]:
    """Plan-time errors (:class:`~hpclaunch.errors.PlanError`: the site or the cluster
    cannot run the job) raised inside name ``source``, the spec file (and job)."""

    try:
        yield
    except PlanError as exc:
        if exc.message.startswith(source):
            raise
        raise PlanError(f"{source}: {exc.message}", hint=exc.hint) from exc


def refuse_sweep(spec: JobSpec, spec_path: str) -> None:
    """A spec with ``sweep:`` is many jobs: submitting it as one would run its command with
    the ``{param}`` placeholders unfilled."""
    if spec.sweep is None:
        return

    count = sum(1 for _ in expand(spec.sweep))
    names = ", ".join(sorted(spec.sweep.parameters)) or "-"
    raise SpecError(
        f"{spec_path}: sweep: this spec is a sweep ({count} points over {names}); "
        "'hpclaunch submit' runs one job, whose command would get the placeholders unfilled",
        hint=f"submit it with 'hpclaunch sweep {spec_path}' (one job array; add --dry-run to "
        "see it), or remove the sweep: section to run one job",
    )


def plan_job(
    session: Context,
    spec: JobSpec,
    submission_id: str | None = None,
    *,
    cwd: str | None = None,
    live_usage: bool = False,
) -> SubmissionPlan:
    """Plan a loaded ``spec`` on the app's site (see :func:`plan_spec`)."""
    require_python(session, spec)
    spec = with_user_notify(session, spec)
    if cwd is not None and spec.workdir is None:
        spec = spec.model_copy(update={"workdir": cwd})
    elif cwd is None and not session.is_remote:
        cwd = os.getcwd()
    return build_plan(
        spec,
        session.site_config,
        submission_id=submission_id or new_submission_id(),
        home=session.home,
        cwd=cwd,
        quota_used=quota_used(session, spec)
        if live_usage and session.backend.has_cluster
        else None,
        quota_mode=quota_mode(session),
        can_expedite=can_expedite(session),
    )


def can_expedite(session: Context) -> bool:
    """Whether the backend can ask the site's ``expedited_requeue`` (asked only of a site
    that wants it: choosing the backend may reach Slurm, which a plain render needs not)."""
    return not session.site_config.expedited_requeue or session.backend.can_expedite


def with_user_notify(session: Context, spec: JobSpec) -> JobSpec:
    """``spec``, told to notify as the user config's ``notify:`` says when it has no
    ``notify:`` of its own."""
    if spec.notify is not None or session.user_notify is None:
        return spec
    return spec.model_copy(update={"notify": session.user_notify})


def quota_mode(session: Context) -> str:
    """``allow`` or ``strict`` (settings: --quota, HPCLAUNCH_QUOTA, user and site config)."""
    return session.settings.quota.value or "allow"


def warn_over_quota(session: Context, plan: SubmissionPlan, source: str) -> None:
    """One warning when a non-preemptible job was placed over-quota."""
    if plan.quota_warning:
        session.warn(f"{source}: {plan.quota_warning}")


def require_python(session: Context, spec: JobSpec) -> None:
    """Over SSH, a job that runs hpclaunch inside needs the site's ``python``: this
    machine's interpreter path means nothing on the cluster."""

    if session.is_remote and session.site_config.python is None and needs_python(spec):
        what = "sweep" if spec.sweep is not None else f"launcher {spec.launcher}"
        raise PlanError(
            f"{what}: the job runs hpclaunch on the cluster, and site "
            f"{session.site_config.name} does not say which interpreter has it there "
            "(submitting over SSH, this machine's python means nothing on the compute nodes)",
            hint="set python: in the site config to an environment with hpclaunch on the "
            "cluster's shared filesystem, e.g. python: ~/venvs/hpclaunch/bin/python",
        )


def read_usage(backend: Backend, site: SiteConfig, project: str) -> int:
    """The GPUs ``project``'s in-quota jobs (all users') hold or wait for now: one look at
    the queue (one squeue call, or one job-list RPC).

    Raises:
        HpclaunchError: Slurm could not be asked (BackendUnavailable: this backend has no
            queue).
    """
    rows = queue_of(backend).queue(QueueQuery(account=project, states=USAGE_STATES))
    return usage_of(site, rows)


def quota_used(session: Context, spec: JobSpec) -> int | None:
    """The project's in-quota GPUs now, when the placement depends on them."""
    site = session.site_config
    project = spec.project or site.default_account
    policy = site.tiers.get(spec.tier)
    if project not in site.quotas or policy is None or policy.preemptible:
        return None

    try:
        return read_usage(session.backend, site, project)
    except (BackendError, TransportError) as exc:
        # The plan says "taken as 0"; Slurm's GrpTRES still holds the guarantee.
        first = exc.message.splitlines()[0]
        session.warn(f"project {project}'s GPU usage not read ({first})")
        return None


def hash_of(data: Mapping[str, Any]) -> str:
    """sha256 of ``data``'s canonical JSON (:func:`spec_hash`)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def spec_data(spec: SpecInput, overrides: Sequence[str] = ()) -> dict[str, Any] | None:
    """The spec as the mapping it was written as (a file's YAML; a JobSpec's set fields),
    with ``overrides`` applied, JSON-ready: what the history keeps for ``hpclaunch rerun``;
    ``None`` if it cannot be read."""
    import yaml  # noqa: PLC0415 (yaml)

    from hpclaunch._validation import load_yaml  # noqa: PLC0415 (yaml)

    spec = as_spec_input(spec)
    try:
        if isinstance(spec, str):
            with open(spec, encoding="utf-8") as fh:
                data = load_yaml(fh.read())
        elif isinstance(spec, JobSpec):
            data = spec.model_dump(mode="json", exclude_unset=True)
        else:
            data = dict(spec)
        if overrides and isinstance(data, dict):
            data = apply_overrides(data, overrides)
    except (OSError, yaml.YAMLError, SpecError):
        return None
    if not isinstance(data, dict):
        return None
    # One JSON round trip: what the history keeps is what was hashed (dates, tuples).
    loaded: dict[str, Any] = json.loads(json.dumps(data, ensure_ascii=False, default=str))
    return loaded


@dataclass(frozen=True)
class SpecKept:
    """What the history keeps of the spec a job was submitted from, for ``hpclaunch rerun``.

    Attributes:
        spec_hash: sha256 of ``spec``'s canonical JSON.
        spec: The spec as written, overrides applied (``None``: unreadable, not kept).
        submit_dir: Where its relative paths started (``None`` over SSH: the job directory).
        rerun_of: The job this submission reruns.
    """

    spec_hash: str | None
    spec: Mapping[str, Any] | None
    submit_dir: str | None
    rerun_of: str | None = None

    @classmethod
    def of(
        cls,
        session: Context,
        spec: SpecInput,
        overrides: Sequence[str] = (),
        *,
        cwd: str | None = None,
        rerun_of: str | None = None,
    ) -> SpecKept:
        """``spec`` with ``overrides``, submitted from ``cwd`` (default: here, unless over
        SSH)."""
        data = spec_data(spec, overrides)
        if cwd is None and not session.is_remote:
            cwd = os.getcwd()
        return cls(hash_of(data) if data is not None else None, data, cwd, rerun_of)


def remember_submission(
    session: Context,
    plan: SubmissionPlan,
    ref: JobRef,
    *,
    kept: SpecKept | None = None,
    submission_id: str | None = None,
    submitted_at: str | None = None,
) -> None:
    """Record a submitted job in the history (the one writer of its rows: jobs, pipeline
    steps, a sweep's arrays), with who, which project and account, and the
    ``--dependency`` it waits on. ``submission_id``/``submitted_at``: a sweep array's own
    (default: the plan's, now). ``kept``: the spec and what ``hpclaunch rerun`` needs with
    it. A failure to write only warns: the
    job is submitted, failing now would invite a resubmit."""

    record = SubmissionRecord(
        job_id=ref.job_id,
        cluster=ref.cluster,
        name=plan.job_name,
        submission_id=submission_id or plan.submission_id,
        job_dir=plan.job_dir,
        site=session.site_config.name,
        submitted_at=submitted_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        log_dir=plan.log_dir,
        tier=plan.tier,
        qos=plan.qos,
        quota=plan.quota,
        user=slurm_user(session),
        project=session.site_config.project_of(plan.account),
        account=plan.account,
        spec_hash=kept.spec_hash if kept else None,
        dependency=next((v for f, v in plan.sbatch_options if f == "--dependency"), None),
        rerun_of=kept.rerun_of if kept else None,
        submit_dir=kept.submit_dir if kept else None,
        notify=describe_notify(plan.notify),
    )
    try:
        record_submission(record, spec=kept.spec if kept else None)
    except HistoryError as exc:
        session.warn(f"could not record job {ref.job_id} in the history: {exc}")
