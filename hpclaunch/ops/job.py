"""A submitted job, from Python: its state, its end, its logs, cancelling it.

job = hpclaunch.submit("train.yaml")
final = job.wait()          # JobInfo: state, exit code, nodes, restarts
print(job.logs())           # every attempt's log, oldest first

job = session.submit(train, lr=0.1, resources={"gpus_per_node": 1})
loss = job.result()         # what train returned, or what it raised, raised here
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from hpclaunch import jobdir
from hpclaunch.backends.route import backend_of
from hpclaunch.errors import CallError, HpclaunchError, JobNotFound, WatchTimeout
from hpclaunch.jobdir import JobDir
from hpclaunch.ops.call import read_outcome, without_result
from hpclaunch.ops.events import gpu_samples, job_events
from hpclaunch.ops.logs import LogFollower, attempts_written, read_logs, slurm_lines
from hpclaunch.ops.queue_why import why_waiting
from hpclaunch.ops.reach import open_forward, shell_argv
from hpclaunch.ops.records import find_job_record
from hpclaunch.ops.report import job_report
from hpclaunch.ops.rerun import rerun_job, rerun_spec
from hpclaunch.ops.resize import resize_job
from hpclaunch.ops.status import job_statuses
from hpclaunch.ops.sweep_rerun import rerun_sweep
from hpclaunch.ops.sweep_status import sort_tasks, sweep_status
from hpclaunch.ops.sync import sync_offline_runs
from hpclaunch.ops.tier import apply_tier_move, plan_tier_move
from hpclaunch.ops.watch import watch_of
from hpclaunch.report.sweep import SweepReport
from hpclaunch.slurm.job_ids import JOB_ID_FORMS, is_job_id, is_local_job_id
from hpclaunch.slurm.jobs import JobInfo, JobRef, JobState, wait_for
from hpclaunch.store.sweeps import find_sweep
from hpclaunch.study.config import STUDY_FILE, StudyConfig, read_study
from hpclaunch.study.summary import not_started, study_summary
from hpclaunch.supervise.ledger import parse_ledger
from hpclaunch.supervise.sweep_task import task_dir

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.ops.events import GpuSamples, JobEvents
    from hpclaunch.ops.queue_why import WaitExplanation
    from hpclaunch.ops.reach import Forward
    from hpclaunch.ops.resize import ResizeResult
    from hpclaunch.ops.sweep_rerun import Rerun
    from hpclaunch.ops.sweep_status import SweepStatus, TaskStatus
    from hpclaunch.ops.tier import TierMove
    from hpclaunch.ops.watch import JobWatch
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.report.job import JobReport
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["JOB_ID_FORMS", "Job", "MapRun", "SweepRun", "is_job_id"]


class Job(Future[Any]):
    """One job of a :class:`~hpclaunch.ops.session.Session`, and a
    :class:`concurrent.futures.Future` of its end: ``result()``, ``exception()``,
    ``done()``, ``add_done_callback()``, ``concurrent.futures.wait``/``as_completed``. All
    of a session's jobs are watched together, one status call per round
    (:mod:`hpclaunch.ops.watch`). The result is what a function returned (``session.submit(fn,
    ...)``) or, for a spec, the final :class:`JobInfo` of a COMPLETED job; anything else
    raises (:meth:`result`).

    Attributes:
        ref: Slurm's job id (``.job_id``) and cluster.
        submission_id: hpclaunch's id of the submission (``--comment=hpclaunch:<id>``).
        log_dir: Where the job writes ``attempt-N.log`` (``None``: not known here).
        job_dir: The job's directory (a function's result is there; ``None``: not known).
        existing: The submission id already named this job: nothing was submitted.
        rendered: The batch script and sbatch argv, when this session submitted it.
        call: Whether the job runs a function (``None``: found in ``job_dir``; a map's
            item says so, its call being the map's).
    """

    def __init__(
        self,
        session: Context,
        ref: JobRef,
        submission_id: str | None = None,
        log_dir: str | None = None,
        job_dir: str | None = None,
        existing: bool = False,
        rendered: RenderedJob | None = None,
        call: bool | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.ref = ref
        self.submission_id = submission_id
        self.log_dir = log_dir
        self.job_dir = job_dir
        self.existing = existing
        self.rendered = rendered
        self.call = call
        #: Found neither in the history nor yet in Slurm (``session.job(id)``).
        self.unverified = False
        if ref.job_id:
            self._waiters = _FollowedWhenWaited(self)

    def __repr__(self) -> str:
        return f"<Job {self.id or '(dry run)'} {self._state.lower()}>"

    # -- the future ---------------------------------------------------------------------

    def result(self, timeout: float | None = None) -> Any:
        """What the job gave, once it ended: a function's return value
        (``session.submit(fn, ...)``), or a spec job's final :class:`JobInfo`; works from
        any process on this machine (``session.job(id).result()``).

        Raises:
            Exception: What the function raised, as itself, with the job's traceback
                added as a note.
            RemoteError: It raised an exception that cannot be brought back here.
            EnvironmentMismatch: The job's Python or packages were not the submitter's.
            JobFailed: The job ended without a result (a function's), or not COMPLETED (a
                spec's): Slurm's state, exit code and the end of its log.
            WatchTimeout: ``timeout`` seconds passed first (a ``TimeoutError``).
            concurrent.futures.CancelledError: :meth:`cancel` was called.
            CallError: A dry run.
        """
        self._follow()
        try:
            return super().result(timeout)
        except FutureTimeout:
            raise self._timed_out(timeout) from None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """What :meth:`result` would raise, or ``None`` when it has a result.

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        self._follow()
        try:
            return super().exception(timeout)
        except FutureTimeout:
            raise self._timed_out(timeout) from None

    def done(self) -> bool:
        """Whether the job has ended (in any way) or was cancelled; asks Slurm at most once
        per poll interval for all of the session's jobs, however often it is called."""
        if not super().done() and self.id:
            self._verify()
            self._watch().follow(self, thread=False)
            self._watch().poll()
        return super().done()

    def add_done_callback(self, fn: Callable[[Future[Any]], object]) -> None:
        """Call ``fn(job)`` once the job has ended (from the session's watcher thread)."""
        self._follow()
        super().add_done_callback(fn)

    def cancel(self) -> bool:
        """Cancel the job in Slurm (a job already ended is not an error) and this future
        (:meth:`result` then raises ``CancelledError``); ``False`` once it had ended."""
        if self.id:
            self.session.backend.cancel(self.ref)
        return super().cancel()

    def resolve(self, info: JobInfo) -> None:
        """Settle the future with the job's end ``info`` (the watcher calls this)."""
        try:
            self.set_result(self._outcome(info))
        except InvalidStateError:
            return  # cancelled meanwhile
        except BaseException as exc:
            try:
                self.set_exception(exc)
            except InvalidStateError:
                return

    def _outcome(self, info: JobInfo) -> Any:
        outcome = read_outcome(self.session, self.job_dir) if self.job_dir else None
        if outcome is not None:
            return outcome.get(self.id)
        if not self._is_call() and (info.state.value == "COMPLETED" or self._ended_success()):
            return info
        raise without_result(self.session, info, self.log_dir)

    def _ended_success(self) -> bool:
        """Whether the sidecar's ledger says the last attempt ended ``success``: Slurm
        records a job PREEMPTED when its preemption came as it finished and the sidecar
        forbade the requeue (the work was done; see :mod:`hpclaunch.supervise.requeue`)."""
        if self.job_dir is None:
            return False
        try:
            events = parse_ledger(self.session.runner.read_file(JobDir(self.job_dir).ledger))
        except (OSError, HpclaunchError):
            return False
        ends = [e for e in events if e.get("event") == "attempt_end"]
        return bool(ends) and ends[-1].get("reason") == "success"

    def _is_call(self) -> bool:
        if self.call is not None:
            return self.call
        return self.job_dir is not None and _holds_call(self.session, self.job_dir)

    def _follow(self) -> None:
        if not self.id:
            raise CallError("a dry run submitted nothing: it has no result")
        self._verify()
        self._watch().follow(self, thread=True)

    def _verify(self) -> None:
        """Raise :class:`JobNotFound` for a job that the history lacks and Slurm does not
        know (one status call, once): nothing would ever end it."""
        if not self.unverified:
            return
        info = self.status()
        if info.state is JobState.UNKNOWN:
            where = (
                "the local backend" if is_local_job_id(self.id) else "Slurm's queue and accounting"
            )
            said = f" ({info.reason})" if info.reason and "unknown to" not in info.reason else ""
            raise JobNotFound(
                f"job {self.id} is unknown to the history and to {where}{said}",
                hint="check the id (and the cluster: --site/HPCLAUNCH_SITE); Slurm forgets "
                "ended jobs that accounting does not keep",
            )
        self.unverified = False

    def _watch(self) -> JobWatch:
        return watch_of(self.session)

    def settled(self) -> bool:
        """The future itself is done (its result, its exception, or cancelled); unlike
        :meth:`done`, never asks Slurm."""
        return super().done()

    def _timed_out(self, timeout: float | None) -> WatchTimeout:
        return WatchTimeout(f"job {self.id} had not ended after {timeout} s")

    # -- the job ------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """Slurm's job id (``123``; ``123_4`` for an array task)."""
        return self.ref.job_id

    def status(self) -> JobInfo:
        """The job now, as ``hpclaunch status`` shows it: one look at Slurm's queue and,
        once it ended, its accounting; its tier, quota and why it waits for the jobs it
        depends on from the history (which learns its final state)."""
        return job_statuses(self.session, [self.id])[0]

    @property
    def state(self) -> JobState:
        """The job's state now (:meth:`status`'s)."""
        return self.status().state

    def wait(self, timeout: float | None = None) -> JobInfo:
        """Block until the job ends (polling at the site's pace) and return its end, as
        :meth:`status` has it (tier, quota, ...).

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        self._verify()
        wait_for(backend_of(self.session.backend, self.ref), [self.ref], timeout=timeout)
        info = self.status()
        if not super().done():
            self.resolve(info)
        return info

    def sync_trackers(self, *, dry_run: bool = False) -> list[str]:
        """Upload this job's offline W&B runs, every attempt's into its one run
        (``hpclaunch sync JOB``, :mod:`hpclaunch.ops.sync`); the run directories synced
        (``dry_run``: to sync).

        Raises:
            HpclaunchError: The job's directory is not known here, or ``wandb sync`` failed.
        """
        if self.job_dir is None:
            raise HpclaunchError(
                f"job {self.id}: its job directory is not known here",
                hint="sync from where it was submitted (its history has the directory)",
            )
        return sync_offline_runs(self.session, [self.job_dir], dry_run=dry_run)

    def follow(
        self,
        *,
        attempt: int | None = None,
        timeout: float | None = None,
        on_change: Callable[[JobInfo], None] | None = None,
        logs: bool = True,
    ) -> LogFollower:
        """Follow the job to its end (``logs -f``, ``submit --follow``/``--wait``): iterate
        for its log lines as ``(attempt, line)`` as it writes them, across requeues
        (``attempt``: that attempt's only; ``logs=False``: the state only, no line);
        ``on_change`` is called with its info when its state or reason changes; ``.final``
        is its end, stored in the history. ``timeout`` seconds at most (then
        :class:`WatchTimeout`)."""
        log_dir = self.log_dir if logs else None
        return LogFollower(
            self.session, self.ref, log_dir, attempt=attempt, timeout=timeout, on_change=on_change
        )

    def log_lines(self, attempt: int | None = None) -> list[tuple[int, str]]:
        """Every line written so far as ``(attempt, line)``, oldest attempt first
        (``attempt``: that attempt's only); none without a log directory."""
        return [] if self.log_dir is None else read_logs(self.session, self.log_dir, attempt)

    def attempts_logged(self) -> list[int]:
        """The attempts that have a log file (0 is the first)."""
        return [] if self.log_dir is None else attempts_written(self.session, self.log_dir)

    def slurm_messages(self) -> list[str]:
        """What Slurm itself wrote for the job (``slurm-<id>.out`` in its job directory: a
        chdir that failed, the time limit, an OOM kill); none if nothing."""
        return [] if self.job_dir is None else slurm_lines(self.session, self.job_dir, self.id)

    @overload
    def logs(
        self,
        follow: Literal[False] = False,
        attempt: int | None = None,
        timeout: float | None = None,
    ) -> str: ...

    @overload
    def logs(
        self, follow: Literal[True], attempt: int | None = None, timeout: float | None = None
    ) -> Iterator[str]: ...

    def logs(
        self, follow: bool = False, attempt: int | None = None, timeout: float | None = None
    ) -> str | Iterator[str]:
        """The job's output: every attempt's log in order, or attempt ``attempt`` (0 is the
        first) only; ``""`` before the job has written any.

        ``follow=True``: an iterator over the lines (without their newline) as the job
        writes them, across requeues, that ends when the job ends (as ``hpclaunch logs
        -f``); ``timeout`` seconds at most (then :class:`WatchTimeout`).
        """
        if follow:
            follower = self.follow(attempt=attempt, timeout=timeout)
            return (line for _, line in follower)
        return "".join(f"{line}\n" for _, line in self.log_lines(attempt))

    def events(self) -> JobEvents:
        """What is known about the job's life (``hpclaunch events``): its submission,
        Slurm's accounting of each attempt, and the sidecar's ledger (signals, checkpoints,
        requeues, why each attempt ended)."""
        return job_events(self.session, self.id)

    def report(self) -> JobReport:
        """The job's life summed up (``hpclaunch report``): each attempt (how long it waited
        and ran, how it ended, the steps reached, committed and lost), each GPU's
        utilisation, memory, power and energy from the samples, and advice
        (``.lines()``: as text; ``.to_dict()``: as ``--json``).

        Raises:
            JobNotFound: Neither the history nor Slurm's accounting knows it.
        """
        return job_report(self.session, self.id)

    def gpus(self) -> GpuSamples:
        """The newest GPU sample of each of the job's GPUs, per node (``hpclaunch top``),
        or why there is none.

        Raises:
            JobNotFound: The job is not in the history.
        """
        return gpu_samples(self.session, self.id)

    def plan_tier(self, new_tier: str) -> TierMove:
        """What moving the pending job to ``new_tier`` changes (QOS, and on a site with
        quotas its account and nice, decided again from the project's usage) and the
        scontrol argv, changing nothing (``hpclaunch tier --dry-run``).

        Raises:
            PlanError: No such tier here, or the cluster does not allow it.
            BackendError: The job has started or ended.
        """
        return plan_tier_move(self.session, self.id, new_tier)

    def tier(self, new_tier: str, *, plan: TierMove | None = None) -> None:
        """Move the pending job to ``new_tier`` (``hpclaunch tier``): its QOS and, on a site
        with quotas, its account and nice, decided again from the project's usage (or as
        ``plan``, from :meth:`plan_tier`, says).

        Raises:
            PlanError: No such tier here, or the cluster does not allow it.
            BackendError: The job has started or ended, or Slurm refused.
        """
        apply_tier_move(self.session, plan or self.plan_tier(new_tier))

    def rerun(self, *overrides: str, tier: str | None = None, **fields: Any) -> Job:
        """Submit this job's spec again, changed (``hpclaunch rerun``): ``overrides`` as
        ``submit --set`` (``"resources.nodes=2"``), ``fields`` as the spec's own (``args=[...]``;
        a mapping changes only the keys it names: ``resources={"nodes": 2}``).

        Raises:
            As :meth:`~hpclaunch.ops.session.Session.rerun`.
        """
        changes = [*overrides, *_as_overrides(fields)]
        return job_of(
            self.session, rerun_job(self.session, self.id, overrides=changes, tier=tier).job_id
        )

    def rerun_dryrun(
        self, *overrides: str, tier: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """The spec :meth:`rerun` would submit, submitting nothing (``hpclaunch rerun
        --dry-run``).

        Raises:
            As :meth:`rerun`, but for Slurm's refusal.
        """
        changes = [*overrides, *_as_overrides(fields)]
        return rerun_spec(self.session, self.id, changes, tier)[1]

    def why_waiting(self) -> WaitExplanation:
        """Why this pending job is behind the jobs ranked before it (``hpclaunch queue
        --why``): their priority factors against its own (sprio) and the projects'
        fair-share standing (sshare).

        Raises:
            JobNotFound: The job is not in the queue.
            CommandFailed: sprio or sshare failed.
        """
        return why_waiting(self.session, self.id)

    def shell_argv(self, *, node: str | None = None, command: Sequence[str] = ()) -> list[str]:
        """The argv that opens a login shell (or runs ``command``) on a node of this running
        job, as a step sharing its resources (``hpclaunch shell``): ``srun --overlap
        --jobid ...`` here, through ``ssh -t`` to the login node when remote.

        Raises:
            BackendError: The job is not running, or ``node`` is not one of its nodes.
        """
        return shell_argv(self.session, self.id, node, command)

    def forward(self, port: int, *, local_port: int = 0, node: str | None = None) -> Forward:
        """Forward ``127.0.0.1:local_port`` here (0: a free port) to ``port`` on a node of
        this running job (``hpclaunch forward``), through the login node when remote; call
        ``.close()`` to stop, and ``.follow()`` now and then to keep to the job's node
        across a requeue (``waiting`` until its next attempt runs, ``ended`` once it has
        ended).

        Raises:
            BackendError: The job is not running, or ``node`` is not one of its nodes.
            ConnectError: The local port is taken.
        """
        return open_forward(self.session, self.id, port, local_port=local_port, node=node)

    def resize(
        self,
        nodes: int,
        *,
        why: str = "asked by the user",
        force: bool = False,
        wait: float | None = 0,
    ) -> ResizeResult:
        """Resize the elastic job to ``nodes`` nodes (``hpclaunch resize``): at once while it
        waits; while it runs, the sidecar checkpoints, requeues it held, updates its size
        and releases it. ``wait``: seconds to follow it to the restart, or a pending one
        to its start (0: return once asked; ``None``: 300 s for a running job, none for a
        pending one).

        Raises:
            ResizeRefused: Not elastic, not one of its sizes, ended, or the resize failed.
        """
        return resize_job(self.session, self.id, nodes, why=why, force=force, wait=wait)


def job_of(session: Context, job_id: str) -> Job:
    """The job ``job_id`` (a sweep task's ``<array>_<task>`` too), with its directories from
    the history when it is there; a job the history lacks is looked up in Slurm once.

    Raises:
        JobNotFound: ``job_id`` is not a job id, or names a sweep's (or map's) array rather
            than one job. A job that neither the history nor Slurm knows raises it from the
            first call that would wait for its end (``result``, ``wait``, ...).
    """
    if not is_job_id(job_id):
        raise JobNotFound(
            f"{job_id!r} is not a job id ({JOB_ID_FORMS})",
            hint="sbatch and hpclaunch submit print the id; session.jobs() lists the jobs "
            "submitted from here",
        )
    _refuse_sweep_array(job_id)
    record = find_job_record(job_id)
    if record is not None:
        return job_of_record(session, record)
    job = Job(session, JobRef(job_id))
    job.unverified = True  # asked of Slurm before anything waits on it
    return job


def _refuse_sweep_array(job_id: str) -> None:
    """Raise if ``job_id`` is the array job of a sweep or map recorded here."""
    if not job_id.isdigit():
        return
    try:
        record = find_sweep(job_id)
    except JobNotFound:
        return
    if not any(array.job_id == job_id for array in record.arrays):
        return  # a sweep id's prefix of digits, not an array
    raise JobNotFound(
        f"job {job_id} is the array of sweep {record.sweep_id} ({record.name}, "
        f"{record.points} points), not one job",
        hint=f"session.sweeps.find({record.sweep_id!r}) has its tasks, status and (a map's) "
        f"results; session.job('{job_id}_0') is its first task; on the command line: "
        f"hpclaunch sweep status {record.sweep_id}",
    )


def job_of_record(session: Context, record: SubmissionRecord) -> Job:
    """The job of a history record, with its directories."""
    return Job(
        session,
        JobRef(record.job_id, record.cluster),
        submission_id=record.submission_id,
        log_dir=record.logs,
        job_dir=record.job_dir,
    )


def _as_overrides(fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``{"resources": {"nodes": 2}, "args": [...]}`` as ``resources.nodes=2``, ``args=[...]``
    (values in JSON, which is YAML)."""
    out: list[str] = []
    for key, value in fields.items():
        if isinstance(value, Mapping) and value:
            out += _as_overrides(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={json.dumps(value, default=str)}")
    return out


class _FollowedWhenWaited(list[Any]):
    """A job future's waiter list (``Future._waiters``, CPython's concurrent.futures since
    3.2): ``concurrent.futures.wait`` and ``as_completed`` append their waiter to it without
    calling any method of ours, so the append is what starts the session's watcher."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self._job = job

    def append(self, waiter: Any) -> None:
        super().append(waiter)
        self._job._watch().follow(self._job, thread=True)


@dataclass
class SweepRun:
    """A submitted sweep of a :class:`~hpclaunch.ops.session.Session`: its arrays' jobs.

    Attributes:
        sweep_id: The id ``hpclaunch sweep`` prints (``hpclaunch sweep status ID``).
        arrays: The arrays' jobs, in point order.
        points: How many points (tasks) the sweep has.
        array_specs: Each array's ``--array=`` (its task ids), when submitted here.
    """

    session: Context = field(repr=False)
    sweep_id: str
    arrays: tuple[JobRef, ...]
    points: int
    array_specs: tuple[str, ...] = ()

    @classmethod
    def find(cls, session: Context, sweep_id: str) -> SweepRun:
        """The sweep recorded on this machine under ``sweep_id`` (a unique prefix, or one of
        its arrays' job ids), its reruns' arrays included.

        Raises:
            JobNotFound: No such sweep in this machine's records.
        """
        record = find_sweep(sweep_id)
        arrays = tuple(JobRef(a.job_id, record.cluster) for a in record.arrays)
        if _holds_call(session, record.job_dir):  # a map's results can be read from here too
            return MapRun(
                session,
                record.sweep_id,
                arrays,
                record.points,
                job_dir=record.job_dir,
                log_dir=record.log_dir,
            )
        return cls(session, record.sweep_id, arrays, record.points)

    def study(self) -> Any:
        """An adaptive sweep's study, as an ``optuna.Study`` (its trials, ``best_trial``,
        ``trials_dataframe()``, ``optuna.visualization``), opened from the job directory
        on this machine.

        Raises:
            HpclaunchError: The sweep has no ``metric:`` (it is no study), or its job
                directory is not on this machine.
        """
        from hpclaunch.study import engine  # noqa: PLC0415 (optuna: only for a study)

        config = self._study_config()
        if config is None:
            raise HpclaunchError(
                f"sweep {self.sweep_id}: no {STUDY_FILE} in its job directory: it is no "
                "adaptive sweep (its spec's sweep: has no metric:), or its job directory is on "
                "the cluster's side only",
                hint="over SSH, open the study where the job directory is",
            )
        return engine.find_study(config) or engine.create_study(config)

    def _study_config(self) -> StudyConfig | None:
        """The study's description in the job directory here (``None``: no study there)."""
        path = Path(find_sweep(self.sweep_id).job_dir) / STUDY_FILE
        return read_study(path) if path.exists() else None

    def study_summary(self) -> dict[str, Any] | None:
        """An adaptive sweep's trials by state, its best trial so far, every trial
        (:func:`hpclaunch.study.summary.study_summary`) and the parameters' importances;
        ``None`` for a sweep that is no study, or whose job directory is not on this
        machine."""
        config = self._study_config()
        if config is None:
            return None  # no study: Optuna is not loaded
        from hpclaunch.study import engine  # noqa: PLC0415 (optuna: only for a study)

        study = engine.find_study(config)
        if study is None:  # no task started yet: the first one makes the study
            return {**not_started(config.metric, config.direction), "importances": None}
        return {
            **study_summary(study, config.metric),
            "importances": engine.importances(study),
        }

    def status(self, *, metrics: bool = True, sort_by: str | None = None) -> SweepStatus:
        """Every task's state (and, ``metrics``, the final metrics of those that completed),
        in point order, or ``sort_by`` a final metric or parameter, smallest first
        (``-name``: largest first); tasks without it go last.

        Raises:
            KeyError: No task has a metric or parameter ``sort_by`` (the known names).
        """
        found = sweep_status(self.session.backend, find_sweep(self.sweep_id), metrics=metrics)
        if not sort_by:
            return found
        name = sort_by.lstrip("-")
        tasks = sort_tasks(found.tasks, name, descending=sort_by.startswith("-"))
        return dataclasses.replace(found, tasks=tuple(tasks))

    def report(self, *, metric: str | None = None) -> SweepReport:
        """The sweep now (``hpclaunch report SWEEP``): tasks by state, parameters against
        final metrics, and ``metric`` (default: the first reported) against each parameter
        (``.lines()``, ``.html()``, ``.to_dict()``)."""
        return SweepReport(self.status(), metric, study=self.study_summary())

    def wait(self, timeout: float | None = None) -> SweepStatus:
        """Block until every task has ended; then :meth:`status`.

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        wait_for(self.session.backend, list(self.arrays), timeout=timeout)
        return self.status()

    def rerun(self) -> Rerun:
        """Submit again the points that never ran (Slurm ended their tasks before the
        batch script started), as ``hpclaunch sweep rerun``; their new arrays join
        :attr:`arrays` (so :meth:`wait` waits for them). Returns those points and their
        arrays; safe to repeat.

        Raises:
            SubmissionError: Slurm refused a rerun (the ones before it stay, recorded).
        """
        rerun = rerun_sweep(self.session, self.sweep_id)
        cluster = rerun.record.cluster
        self.arrays = (*self.arrays, *(JobRef(a.job_id, cluster) for a in rerun.arrays))
        return rerun

    def sync_trackers(self, *, dry_run: bool = False) -> list[str]:
        """Upload every task's offline W&B runs (``hpclaunch sync SWEEP``); the run
        directories synced (``dry_run``: to sync)."""
        job_dir = find_sweep(self.sweep_id).job_dir
        return sync_offline_runs(self.session, [job_dir], dry_run=dry_run)

    def cancel(self) -> None:
        """Cancel every task (finished ones keep their results)."""
        for ref in self.arrays:
            self.session.backend.cancel(ref)


@dataclass
class MapRun(SweepRun):
    """The jobs of ``session.map(fn, items)``: a sweep whose point ``i`` calls
    ``fn(items[i])``; :meth:`results` in the items' order.

    Attributes:
        job_dir: The sweep's job directory (each task's result in ``tasks/<i>/call/``).
        log_dir: Where the tasks' logs are (``tasks/<i>/attempt-N.log``).
    """

    job_dir: str = ""
    log_dir: str = ""

    @overload
    def results(
        self, timeout: float | None = None, *, return_exceptions: Literal[False] = False
    ) -> list[Any]: ...

    @overload
    def results(
        self, timeout: float | None = None, *, return_exceptions: bool
    ) -> list[Any | BaseException]: ...

    def results(
        self, timeout: float | None = None, *, return_exceptions: bool = False
    ) -> list[Any]:
        """What the function returned for each item, in the items' order, once every task
        has ended (one status call a round for all arrays; the files read after).
        ``return_exceptions``: a failed item's exception takes its place in the list (as
        ``asyncio.gather``), so one failure hides none of the other values.

        Raises:
            Exception: Unless ``return_exceptions``: the first failed item's own exception
                (its index, how many others failed and the job's traceback as notes), or
                :class:`RemoteError`, or :class:`JobFailed` for a task that ended without
                a result.
            WatchTimeout: ``timeout`` seconds passed first.
        """
        self.wait(timeout)
        values: list[Any] = []
        failed: list[int] = []
        states: dict[int, TaskStatus] = {}
        for index in range(self.points):
            try:
                values.append(self._item(index, states))
            except Exception as exc:
                failed.append(index)
                values.append(exc)
        if failed and not return_exceptions:
            first = values[failed[0]]
            if len(failed) > 1:
                _note(first, f"{len(failed) - 1} more items failed: {failed[1:11]}")
            raise first
        return values

    def jobs(self) -> list[Job]:
        """A future per item, in the items' order, each waiting for its own task alone:
        ``concurrent.futures.as_completed(run.jobs())`` gives each value (or raises its
        exception) as its task ends; ``run.jobs()[3].result()`` waits for item 3 only. All
        of them are watched together (one status call a round). A dry run has none.

        Raises:
            JobNotFound: The map is not recorded on this machine.
        """
        if not self.arrays:
            return []
        record = find_sweep(self.sweep_id)
        jobs: list[Job] = []
        for index in range(self.points):
            task = record.task_job_id(index)
            if task is None:  # not in any array: a record written by hand, or damaged
                raise JobNotFound(
                    f"map {self.sweep_id}: no array runs item {index}",
                    hint="see 'hpclaunch sweep status ID'",
                )
            jobs.append(
                Job(
                    self.session,
                    JobRef(task, record.cluster),
                    log_dir=task_dir(self.log_dir, index),
                    job_dir=task_dir(self.job_dir, index),
                    call=True,
                )
            )
        return jobs

    def _item(self, index: int, states: dict[int, TaskStatus]) -> Any:
        """Item ``index``'s value, or raise its exception (noted with the item)."""
        outcome = read_outcome(self.session, task_dir(self.job_dir, index))
        try:
            if outcome is None:
                if not states:
                    states.update({t.point: t for t in self.status(metrics=False).tasks})
                raise self._without_result(index, states.get(index))
            return outcome.get(f"{self.sweep_id} item {index}")
        except Exception as exc:
            _note(exc, f"map item {index} of {self.points} (sweep {self.sweep_id})")
            raise

    def _without_result(self, index: int, task: TaskStatus | None) -> Exception:
        job_id = task.job_id if task is not None else f"{self.sweep_id}[{index}]"
        try:
            state = JobState(task.state) if task is not None else JobState.UNKNOWN
        except ValueError:
            state = JobState.UNKNOWN
        info = JobInfo(JobRef(job_id), state)
        return without_result(self.session, info, task_dir(self.log_dir, index))


def _note(exc: BaseException, text: str) -> None:
    """``exc.add_note(text)`` where Python has it (3.11+)."""
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(text)


def _holds_call(session: Context, job_dir: str) -> bool:
    """Whether ``job_dir`` holds a function's call: the job is ``session.submit(fn)``'s, or
    the sweep a ``session.map``."""
    try:
        return jobdir.CALL in session.runner.listdir(JobDir(job_dir).call_dir)
    except (OSError, HpclaunchError):
        return False
