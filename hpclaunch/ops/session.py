"""``hpclaunch.Session`` and ``hpclaunch.submit``: the library's entry points.

A session is a :class:`~hpclaunch.ops.context.Context` (settings, site, runner, backend)
with the use cases as methods; the CLI's commands call the same use cases.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.calls.payload import star_call
from hpclaunch.ops.context import Context
from hpclaunch.ops.simulate import simulate as simulate_policies
from hpclaunch.ops.simulate import write_workload

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.cancel import Cancelled
    from hpclaunch.ops.clean import Cleaned
    from hpclaunch.ops.cost import CostReport
    from hpclaunch.ops.estimate import Estimate
    from hpclaunch.ops.job import Job, MapRun, SweepRun
    from hpclaunch.ops.pipeline import PipelineEnd, PlannedPipeline
    from hpclaunch.ops.plan_job import SpecInput
    from hpclaunch.ops.queue import QueueEntry
    from hpclaunch.ops.queue_why import WaitExplanation
    from hpclaunch.ops.reach import Forward
    from hpclaunch.ops.retries import RetryWait
    from hpclaunch.ops.site import SiteCheck, SitePlan
    from hpclaunch.ops.snapshot import Snapshot
    from hpclaunch.ops.submit import Submitted
    from hpclaunch.ops.sweep import SweepPreview
    from hpclaunch.planning.pipeline import Step
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.planning.siteplan import Change
    from hpclaunch.report.eta import Eta
    from hpclaunch.scheduling.arbiter.daemon import Arbiter, ArbiterOptions
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord
    from hpclaunch.store.sweeps import SweepRecord

__all__ = ["Session", "submit"]


class Session(Context):
    """Settings, a site, one way to Slurm and the history, for any number of calls; see
    :class:`~hpclaunch.ops.context.Context` for the arguments."""

    def submit(
        self,
        spec: SpecInput | Callable[..., Any],
        /,
        *args: Any,
        overrides: Sequence[str] = (),
        submission_id: str | None = None,
        check: bool = True,
        sync: bool = False,
        send: Callable[[Snapshot], object] | None = None,
        force: bool = False,
        **kwargs: Any,
    ) -> Job:
        """Submit ``spec`` (a YAML file's path, as text or a ``pathlib.Path``; a mapping;
        or a :class:`JobSpec`) as ``hpclaunch submit`` does: the job starts in the current
        directory, the project's quota use is read live, the plan is checked against the
        cluster, a known ``submission_id`` is not submitted twice, and the job enters the
        history (``hpclaunch status``/``logs`` know it). An over-quota placement warns.

        Or submit a function: ``session.submit(fn, *args, resources={...}, tier="low",
        **kwargs)`` runs ``fn(*args, **kwargs)`` in a job; :meth:`Job.result` gives back what
        it returned, or raises what it raised. Keywords named like a spec's fields
        (``resources``, ``tier``, ``project``, ``name``, ``checkpoint``, ``venv``, ``env``,
        ...) are the job's; every other keyword is the function's. With ``job={...}`` the
        job's options are that mapping and every other keyword is the function's. The call
        is checked against the function's signature here: a keyword both could take (a
        function's own ``name``, ``check``, ...) is refused, and an unknown one close to a
        spec field says so ("did you mean resources?"). The function runs under the
        sidecar, with the interpreter running here (or the ``venv`` given), which the nodes
        must see.

        :meth:`dryrun` plans and renders the same without submitting.

        ``sync`` (``submit --sync``): send the code tree around the current directory to
        the cluster (what it lacks) just before submitting, and start the job in that
        snapshot, which later edits here do not change; ``send(snapshot)`` sends it, to
        show progress (default: ``snapshot.send()``).

        ``force`` (``submit --force``): with a ``submission_id`` that a job of another spec
        already carries, take that job (with a warning) instead of refusing.

        Raises:
            SpecError, PlanError: The spec is wrong, or this site or cluster cannot run it.
            SubmissionError: Slurm refused it.
            CallError: The function or its arguments cannot be pickled, or too large.
            TypeError: Arguments given with a spec (they are a function's).
        """
        from hpclaunch.backends.base import JobRef
        from hpclaunch.ops.job import Job

        done = self._submitted(
            spec,
            args,
            kwargs,
            overrides,
            submission_id,
            check=check,
            sync=sync,
            dry_run=False,
            force=force,
            send=send,
        )
        return Job(
            self,
            done.ref or JobRef(""),
            submission_id=done.plan.submission_id,
            log_dir=done.plan.log_dir,
            job_dir=done.plan.job_dir,
            existing=done.existing,
            rendered=done.job,
        )

    def dryrun(
        self,
        spec: SpecInput | Callable[..., Any],
        /,
        *args: Any,
        overrides: Sequence[str] = (),
        check: bool = True,
        sync: bool = False,
        submission_id: str | None = None,
        **kwargs: Any,
    ) -> RenderedJob:
        """What :meth:`submit` would submit, without submitting it (``submit --dry-run``):
        ``.script``, ``.sbatch_argv`` and ``.plan`` (account, QOS, tier, quota placement,
        paths, and ``.plan.notes``: why each was chosen); ``submission_id`` is checked and
        used as :meth:`submit` would.

        Raises:
            As :meth:`submit`, but for Slurm's own refusal.
        """
        return self._submitted(
            spec, args, kwargs, overrides, submission_id, check=check, sync=sync, dry_run=True
        ).job

    def estimate(
        self,
        spec: SpecInput,
        /,
        *,
        overrides: Sequence[str] = (),
        rendered: RenderedJob | None = None,
    ) -> Estimate:
        """When ``spec`` would start if submitted now (Slurm's ``sbatch --test-only``, for
        the job as :meth:`dryrun` plans it, or as ``rendered`` already is) and how long the
        completed runs of the same spec in the history took, with a suggested time limit
        (``hpclaunch estimate``, ``submit --dry-run``).

        Raises:
            As :meth:`dryrun`; SubmissionError: Slurm would refuse the job as it stands.
        """
        from hpclaunch.ops.estimate import estimate_job
        from hpclaunch.ops.submit import spec_hash

        job = rendered if rendered is not None else self.dryrun(spec, overrides=overrides)
        return estimate_job(self, job, spec_hash(spec, overrides))

    def render(self, spec: SpecInput) -> RenderedJob:
        """The batch script and sbatch argv ``spec`` becomes on this site, planned offline
        (``hpclaunch render``): no call to the cluster, the project's quota use taken as
        0 (:meth:`dryrun` reads it live and checks the plan against the cluster).

        Raises:
            SpecError, PlanError: The spec is wrong, or this site cannot run it.
        """
        from hpclaunch.ops.plan_job import naming, plan_spec, spec_source
        from hpclaunch.planning.render import render

        with naming(spec_source(spec)):
            plan = plan_spec(self, spec)
        return render(plan)

    def _submitted(
        self,
        spec: SpecInput | Callable[..., Any],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        overrides: Sequence[str],
        submission_id: str | None,
        *,
        check: bool,
        sync: bool,
        dry_run: bool,
        force: bool = False,
        send: Callable[[Snapshot], object] | None = None,
    ) -> Submitted:
        from hpclaunch.jobspec.job import JobSpec  # pydantic: when a job is submitted
        from hpclaunch.ops.snapshot import Snapshot
        from hpclaunch.ops.submit import submit_spec

        if not callable(spec) and not isinstance(spec, (str, os.PathLike, Mapping, JobSpec)):
            raise TypeError(
                "submit takes a spec (a YAML file's path, a mapping or a JobSpec) or a "
                f"function, not {type(spec).__name__} {spec!r:.60}"
            )
        tree = Snapshot.of_cwd(self) if sync else None
        cwd = tree.cwd if tree is not None else None
        sender = send or Snapshot.send
        upload = (lambda _plan: sender(tree)) if tree is not None else None
        if callable(spec):
            from hpclaunch.ops.call import bind_call, job_options, submit_call

            if overrides:
                raise TypeError(
                    "overrides are for a spec: give a function's job options as keywords"
                )
            options, fn_kwargs = job_options(kwargs)
            given = {"submission_id": submission_id, "check": check, "sync": sync, "force": force}
            bind_call(spec, args, fn_kwargs, options, given, explicit="job" in kwargs)
            done = submit_call(
                self,
                spec,
                args,
                fn_kwargs,
                options,
                submission_id=submission_id,
                check=check,
                dry_run=dry_run,
                force=force,
                cwd=cwd,
                before_submit=upload,
            )
        else:
            if args or kwargs:
                raise TypeError(
                    "arguments are for a function (session.submit(fn, *args, **kwargs)); a spec "
                    f"takes none: got {len(args)} positional and {sorted(kwargs)}"
                )
            done = submit_spec(
                self,
                spec,
                overrides=overrides,
                submission_id=submission_id,
                check=check,
                dry_run=dry_run,
                force=force,
                cwd=cwd,
                before_submit=upload,
            )
        return done

    def sweep(
        self,
        spec: str | os.PathLike[str],
        *,
        overrides: Sequence[str] = (),
        check: bool = True,
        sweep_id: str | None = None,
    ) -> SweepRun:
        """Submit the sweep of the spec file ``spec`` as job arrays, as ``hpclaunch sweep``
        does (its record and history rows too: ``hpclaunch sweep status`` knows it).
        ``overrides``: ``KEY=VALUE`` changes (``sweep --set``). ``sweep_id``: your own id;
        with the id of an interrupted sweep, only its arrays not yet in Slurm are submitted.
        :meth:`sweep_dryrun` shows what it would submit.

        Raises:
            SpecError, PlanError: The spec is wrong, or this site or cluster cannot run it.
            SubmissionError: Slurm refused an array (the ones before it stay, recorded), or
                ``sweep_id`` names a sweep of other points.
        """
        from hpclaunch.ops.job import SweepRun
        from hpclaunch.ops.sweep import submit_sweep_spec

        swept = submit_sweep_spec(
            self, os.fspath(spec), check=check, sweep_id=sweep_id, overrides=overrides
        )
        specs = tuple(array.array_spec for array in swept.sweep.arrays)
        return SweepRun(self, swept.sweep.sweep_id, swept.refs, len(swept.sweep.points), specs)

    def sweep_dryrun(
        self,
        spec: str | os.PathLike[str],
        *,
        overrides: Sequence[str] = (),
        check: bool = True,
        sweep_id: str | None = None,
    ) -> SweepPreview:
        """What :meth:`sweep` would submit, submitting nothing (``sweep --dry-run``): the
        points, arrays and argv (``.sweep``), the script (``.job``), and the over-quota
        part's script (``.overquota``) when part of it is placed over-quota.

        Raises:
            SpecError, PlanError: As :meth:`sweep`.
        """
        from hpclaunch.ops.sweep import preview_sweep

        return preview_sweep(
            self, os.fspath(spec), check=check, sweep_id=sweep_id, overrides=overrides
        )

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        max_concurrent: int | None = None,
        sweep_id: str | None = None,
        check: bool = True,
        dry_run: bool = False,
        **options: Any,
    ) -> MapRun:
        """Run ``fn(item)`` for each of ``items``, as one sweep of job arrays (split at the
        cluster's MaxArraySize, each point run once, tier ``low`` unless given); ``options``
        are the job's (a spec's fields, as for :meth:`submit`). ``max_concurrent``: at most
        that many tasks at once. ``results()`` gives the values in the items' order.
        With several iterables, as ``Executor.map``: ``fn(a, b)`` for each pair of
        ``zip(as_, bs)``.

        Raises:
            CallError: No items, ``fn`` or the items cannot be pickled, or too large.
            SpecError, PlanError, SubmissionError: As for :meth:`sweep`.
        """
        from hpclaunch.ops.call import job_options, submit_map
        from hpclaunch.ops.job import MapRun

        given, rest = job_options(options)
        if rest:
            raise TypeError(f"map passes each item alone: unknown options {sorted(rest)}")
        if len(iterables) == 1:
            call, items = fn, list(iterables[0])
        else:  # fn(*item) of zip(...): a partial of an importable helper, pickled as such
            call, items = functools.partial(star_call, fn), list(zip(*iterables, strict=False))
        swept = submit_map(
            self,
            call,
            items,
            given,
            max_concurrent=max_concurrent,
            sweep_id=sweep_id,
            check=check,
            dry_run=dry_run,
        )
        plan = swept.sweep.plan
        return MapRun(
            self,
            swept.sweep.sweep_id,
            swept.refs,
            len(swept.sweep.points),
            job_dir=plan.job_dir,
            log_dir=plan.log_dir,
        )

    def sweep_run(self, sweep_id: str) -> SweepRun:
        """A sweep submitted from this machine, by its id (a unique prefix, or one of its
        arrays' job ids): ``status()``, ``wait()``, ``cancel()``, as ``hpclaunch sweep status``
        and ``sweep cancel``.

        Raises:
            JobNotFound: No such sweep in this machine's records.
        """
        from hpclaunch.ops.job import SweepRun

        return SweepRun.find(self, sweep_id)

    @staticmethod
    def names_a_sweep(text: str) -> bool:
        """Whether ``text``, which may read as a job id (a sweep id's prefix of decimal
        digits: one in 40 of 8-character prefixes), names a sweep recorded here rather than
        a job of the history (``hpclaunch report``), or is the array job of one (a sweep's
        or map's array is not one job: its tasks are)."""
        from hpclaunch.ops.records import find_job_record
        from hpclaunch.store.sweeps import list_sweeps

        records = list_sweeps()
        if any(array.job_id == text for record in records for array in record.arrays):
            return True
        if len(text) < 4 or find_job_record(text) is not None:
            return False
        return any(r.sweep_id.startswith(text) for r in records)

    def sweeps(self) -> list[SweepRecord]:
        """The sweeps submitted from this machine, oldest first (``hpclaunch sweep list``;
        no Slurm call)."""
        from hpclaunch.store.sweeps import list_sweeps

        return list_sweeps()

    def pipeline(
        self,
        path: str,
        *,
        submission_id: str | None = None,
        check: bool = True,
        sync: bool = False,
        send: Callable[[Snapshot], object] | None = None,
        on_submitted: Callable[[Step, JobRef, bool], None] | None = None,
    ) -> list[Job]:
        """Submit every job of the multi-job file ``path`` (``jobs:`` with ``after:``) in
        dependency order, as ``hpclaunch submit FILE`` does: all planned and checked
        before the first is submitted; with your ``submission_id`` a retry submits only
        the jobs not submitted yet. ``sync``/``send``: as :meth:`submit`.
        ``on_submitted(step, ref, existing)`` after each job. The jobs in submission order.

        Raises:
            SpecError, PlanError: A job is wrong, or this site or cluster cannot run it.
            SubmissionError: A job was refused; the message lists those already submitted.
        """
        from hpclaunch.ops.job import Job
        from hpclaunch.ops.pipeline import submit_pipeline
        from hpclaunch.ops.snapshot import Snapshot

        planned, tree = self._plan_pipeline(path, submission_id, check, sync)
        if tree is not None:
            (send or Snapshot.send)(tree)
        refs = submit_pipeline(
            self, planned, retry=submission_id is not None, on_submitted=on_submitted
        )
        return [
            Job(
                self,
                refs[step.name],
                submission_id=planned.plans[step.name].submission_id,
                log_dir=planned.plans[step.name].log_dir,
                job_dir=planned.plans[step.name].job_dir,
            )
            for step in planned.steps
        ]

    def pipeline_dryrun(
        self,
        path: str,
        *,
        submission_id: str | None = None,
        check: bool = True,
        sync: bool = False,
    ) -> PlannedPipeline:
        """What :meth:`pipeline` would submit, submitting nothing (``submit --dry-run
        FILE``): ``.steps`` in submission order, each one's ``.plans[name]`` and
        ``.rendered[name]`` (its script, with ``<name>`` where a dependency's id will be).

        Raises:
            SpecError, PlanError: As :meth:`pipeline`.
        """
        return self._plan_pipeline(path, submission_id, check, sync)[0]

    def _plan_pipeline(
        self, path: str, submission_id: str | None, check: bool, sync: bool
    ) -> tuple[PlannedPipeline, Snapshot | None]:
        """The file's jobs planned (in a snapshot of the code tree with ``sync``: its
        paths are not on the cluster yet), and that snapshot, not sent."""
        from hpclaunch.ops.pipeline import plan_pipeline
        from hpclaunch.ops.snapshot import Snapshot

        tree = Snapshot.of_cwd(self) if sync else None
        cwd = tree.cwd if tree is not None else None
        planned = plan_pipeline(self, path, submission_id=submission_id, check=check, cwd=cwd)
        return planned, tree

    def wait_pipeline(
        self,
        jobs: Mapping[str, JobRef],
        *,
        timeout: float | None = None,
        on_change: Callable[[str, JobInfo], None] | None = None,
    ) -> PipelineEnd:
        """Follow a pipeline's jobs (name → job) to their ends, one status call a poll for
        all, store each end in the history, and say which did not complete
        (``submit --wait FILE``); ``on_change(name, info)`` when a job's state changes.

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        from hpclaunch.ops.pipeline import wait_pipeline

        return wait_pipeline(self, jobs, timeout=timeout, on_change=on_change)

    @staticmethod
    def is_pipeline(path: str) -> bool:
        """Whether the file at ``path`` is a multi-job file (``jobs:``), for :meth:`pipeline`,
        not a job spec."""
        from hpclaunch.planning.pipeline import is_pipeline_file

        return is_pipeline_file(path)

    def jobs(
        self,
        *,
        project: str | None = None,
        tier: str | None = None,
        state: str | None = None,
        limit: int | None = 20,
    ) -> list[Job]:
        """Your jobs from the history (``hpclaunch history``), oldest first: the newest
        ``limit`` (``None``: all) that match every filter given. ``state`` is the last
        state hpclaunch saw; ask :meth:`Job.status` for the state now."""
        from hpclaunch.store.history import query_submissions

        return [
            self._job_of(record)
            for record in query_submissions(project=project, tier=tier, state=state, limit=limit)
        ]

    def history(
        self,
        *,
        project: str | None = None,
        tier: str | None = None,
        state: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 50,
    ) -> list[SubmissionRecord]:
        """The submissions recorded here, oldest first, as ``hpclaunch history`` lists them:
        those matching every filter given (``since``/``until``: naive local times of
        submission), this site's unfinished ones asked about first (one squeue + one sacct;
        the final states seen are stored), then ``state`` (Slurm's, e.g. ``COMPLETED``)
        compared; the newest ``limit`` (``None``: all)."""
        from hpclaunch.ops.status import refresh_records
        from hpclaunch.store.history import query_submissions

        records = query_submissions(
            project=project,
            tier=tier,
            since=since.astimezone() if since else None,
            until=until.astimezone() if until else None,
        )
        records = refresh_records(self, records)
        if state is not None:
            records = [r for r in records if (r.state or "").upper() == state.upper()]
        return records[-limit:] if limit else records

    @staticmethod
    def history_path() -> Path:
        """Where the history of this machine's submissions is kept (SQLite)."""
        from hpclaunch.store.history import history_path

        return history_path()

    @staticmethod
    def recent_submissions(limit: int = 200) -> list[SubmissionRecord]:
        """The newest ``limit`` records of the history, oldest first: no Slurm call, no
        site read (shell completion)."""
        from hpclaunch.store.history import recent_submissions

        return recent_submissions(limit=limit)

    @staticmethod
    def when(text: str, now: datetime | None = None) -> datetime:
        """A time as hpclaunch's options take it, as a naive local datetime: ``now``,
        ``today``, ``7d``/``12h``/``30min``/``2w`` before ``now``, or ISO 8601
        (``2026-11-01``, ``2026-11-01T08:00``).

        Raises:
            ValueError: None of these.
        """
        from hpclaunch.slurm.usage import parse_when

        return parse_when(text, now or datetime.now())

    #: Compare scheduling policies on a simulated cluster (``hpclaunch simulate``; no Slurm
    #: involved): :func:`hpclaunch.ops.simulate.simulate`.
    simulate = staticmethod(simulate_policies)
    #: A synthetic workload as a CSV trace (``simulate --write-trace``).
    write_workload = staticmethod(write_workload)

    @staticmethod
    def spec_schema(*, pipeline: bool = False) -> dict[str, object]:
        """The JSON schema (draft 2020-12) of a job spec, or of a multi-job file
        (``pipeline``), as ``hpclaunch schema`` prints it."""
        from hpclaunch.planning.schema import pipeline_schema, spec_schema

        return pipeline_schema() if pipeline else spec_schema()

    def _job_of(self, record: SubmissionRecord) -> Job:
        from hpclaunch.ops.job import job_of_record

        return job_of_record(self, record)

    def status(self, job_ids: Sequence[str] = (), *, limit: int = 20) -> list[JobInfo]:
        """Jobs' state now, as ``hpclaunch status`` shows it (one status call for all):
        ``job_ids``, or the newest ``limit`` jobs of the history. The final states seen
        are stored in the history."""
        from hpclaunch.ops.status import job_statuses

        return job_statuses(self, list(job_ids) or None, limit=limit)

    def etas(self, infos: Sequence[JobInfo]) -> dict[str, Eta]:
        """Job id → when it should end, for the running jobs of ``infos`` (from
        :meth:`status`) whose trainer reports a total (``report_progress(step, total=N)``):
        one file read each, where the job runs."""
        from hpclaunch.ops.progress import running_etas

        return running_etas(self, infos)

    def unwatched(self, infos: Sequence[JobInfo]) -> dict[str, str]:
        """Job id → why its idle guard can never stop it (``n1: pynvml is not installed``),
        for the running jobs of ``infos`` whose nodes sample no GPU: one file read each."""
        from hpclaunch.ops.progress import unwatched_guards

        return unwatched_guards(self, infos)

    def retries(self, infos: Sequence[JobInfo]) -> dict[str, RetryWait]:
        """Job id → the retry it waits for, for the pending jobs of ``infos`` (from
        :meth:`status`) that their spec's ``retry:`` requeued (``hpclaunch status``)."""
        from hpclaunch.ops.retries import pending_retries

        return pending_retries(self, infos)

    def cancel(
        self, jobs: Sequence[str | JobRef] = (), *, name: str | None = None
    ) -> list[Cancelled]:
        """Cancel jobs by id (or :class:`JobRef`) and, with ``name``, your unfinished jobs of
        that exact name, as ``hpclaunch cancel`` does: what became of each (a job already
        ended is left alone, an id unknown to Slurm is reported, not raised)."""
        from hpclaunch.backends.base import JobRef
        from hpclaunch.ops.cancel import cancel_jobs

        refs = [job if isinstance(job, JobRef) else JobRef(job) for job in jobs]
        if name is not None:
            refs += self.jobs_named(name)
        return cancel_jobs(self, refs)

    def jobs_named(self, name: str) -> list[JobRef]:
        """Your unfinished jobs named exactly ``name`` (as squeue prints it)."""
        from hpclaunch.ops.cancel import jobs_named

        return jobs_named(self, name)

    def unfinished_jobs(self) -> list[JobInfo] | None:
        """The history's jobs on this site that have not ended (one status call);
        ``None`` when the history has no job of this site."""
        from hpclaunch.ops.cancel import unfinished_jobs

        return unfinished_jobs(self)

    def queue(self, *, me: bool = False, partition: str | None = None) -> list[QueueEntry]:
        """The cluster's queue as ``hpclaunch queue`` shows it: running jobs, then pending ones
        in the order the scheduler takes them, each with its tier, project, quota class and
        why it waits (``me``: only yours; ``partition``: only that partition's)."""
        from hpclaunch.ops.queue import queue_entries

        return queue_entries(self, me=me, partition=partition)

    def why_waiting(self, job_id: str) -> WaitExplanation:
        """Why pending job ``job_id`` is behind the jobs ranked before it (``hpclaunch
        queue --why``): their priority factors against its own (sprio) and the projects'
        fair-share standing (sshare).

        Raises:
            JobNotFound: The job is not in the queue.
            CommandFailed: sprio or sshare failed.
        """
        from hpclaunch.ops.queue_why import why_waiting

        return why_waiting(self, job_id)

    def cost(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        by: Sequence[str] = ("project",),
        all_users: bool = False,
    ) -> CostReport:
        """GPU-hours and money as ``hpclaunch cost`` reports them: your jobs' (``all_users``:
        everyone's) from ``since`` (default: the first of this month) to ``until`` (default:
        now), naive local times, grouped ``by`` project, tier and/or user."""
        from hpclaunch.ops.cost import gpu_cost

        return gpu_cost(self, since=since, until=until, by=by, all_users=all_users)

    def site_check(self, *, refresh: bool = False) -> SiteCheck:
        """The site config against the live cluster (``hpclaunch site check``): its
        capabilities (cached unless ``refresh``) and the QOS and account changes pending."""
        from hpclaunch.ops.site import check_site_live

        return check_site_live(self, refresh=refresh)

    def site_plan(self) -> SitePlan:
        """The sacctmgr commands that make the cluster match the site (``site plan``)."""
        from hpclaunch.ops.site import plan_site_live

        return plan_site_live(self)

    def site_apply(
        self,
        plan: SitePlan | None = None,
        *,
        progress: Callable[[Change], None] | None = None,
    ) -> SitePlan:
        """Run ``plan``'s sacctmgr commands (default: :meth:`site_plan` now), as ``site apply
        --yes`` does, calling ``progress`` with each before it runs; returns what is left
        (slurm.conf settings are an admin's)."""
        from hpclaunch.ops.site import apply_site

        return apply_site(self, plan or self.site_plan(), progress=progress)

    def arbiter(
        self,
        options: ArbiterOptions | None = None,
        *,
        log_path: str | os.PathLike[str] | None = None,
        on_event: Callable[[dict[str, Any], str], None] | None = None,
        **option_values: Any,
    ) -> Arbiter:
        """The preemption arbiter of this session's site (``hpclaunch arbiter``):
        ``.step()`` makes one pass, ``.run(interval, should_stop=...)`` runs until told to
        stop; every decision goes to ``log_path`` (default
        ``$XDG_STATE_HOME/hpclaunch/arbiter.jsonl``) and to ``on_event`` (the event and
        a line of text for it). ``options``, or its fields as keywords (``dry_run=True``,
        ``min_run=``, ``max_preemptions=``, ``restart_cost=``, ...).

        Raises:
            ConfigError: The site leaves preemption to Slurm (``preemption: slurm``) and
                this is no dry run: the arbiter and slurmctld would both pick victims.
        """
        from hpclaunch.errors import ConfigError
        from hpclaunch.scheduling.arbiter.daemon import (
            Arbiter,
            ArbiterOptions,
            default_log_path,
            describe,
        )

        options = replace(options or ArbiterOptions(), **option_values)
        if self.site_config.preemption != "arbiter" and not options.dry_run:
            raise ConfigError(
                f"site {self.site_config.name!r} leaves preemption to Slurm (preemption: slurm): the "
                "arbiter and slurmctld would both pick victims",
                hint="set `preemption: arbiter` in the site config and run `hpclaunch site "
                "apply` (clears the QOS Preempt lists), or watch its choices with --dry-run",
            )
        path = Path(log_path) if log_path is not None else default_log_path()
        told = None if on_event is None else (lambda event: on_event(event, describe(event)))
        return Arbiter(self.backend, self.site_config, path, options, on_event=told)

    def clean(self, older_than: timedelta | str = "30d", *, dry_run: bool = False) -> Cleaned:
        """Remove the call and result pickles of functions' jobs (and maps') that ended and
        were submitted more than ``older_than`` ago (a ``timedelta``, or ``7d``, ``12h``,
        ``2w``); logs, ledgers and checkpoints stay. Submitting a function does this once a
        day with 30 days (:mod:`hpclaunch.ops.clean`).

        Raises:
            ValueError: ``older_than`` is not a duration.
            HpclaunchError: The history, Slurm or the job directories could not be read.
        """
        from hpclaunch.ops.clean import clean_calls

        return clean_calls(self, _duration(older_than), dry_run=dry_run)

    def job_with_logs(self, job_id: str) -> Job:
        """A job of the history, whose logs hpclaunch knows where to find (``hpclaunch
        logs``).

        Raises:
            JobNotFound: Not in the history (the message says how to find its output).
            HpclaunchError: ``job_id`` is a sweep's array: each task has its own log.
        """
        from hpclaunch.ops.logs import log_record

        return self._job_of(log_record(job_id))

    def rerun(self, job_id: str, overrides: Sequence[str] = (), *, tier: str | None = None) -> Job:
        """Submit again the spec job ``job_id`` ran with, changed by ``overrides``
        (``KEY=VALUE``, as ``submit --set``) and ``tier``, from the directory it was
        submitted from (``hpclaunch rerun``). A sweep task (``<array>_<task>``) is rerun alone,
        as a sweep of its one point; the job returned is that task. The history records which
        job the new one reruns.

        Raises:
            JobNotFound: The history does not know the job or kept no spec of it.
            SpecError, PlanError: The changed spec is wrong, or this site cannot run it.
            SubmissionError: A function's job (call the function again), or Slurm refused.
        """
        from hpclaunch.ops.job import job_of
        from hpclaunch.ops.rerun import rerun_job

        return job_of(self, rerun_job(self, job_id, overrides=overrides, tier=tier).job_id)

    def rerun_spec(
        self, job_id: str, overrides: Sequence[str] = (), *, tier: str | None = None
    ) -> dict[str, Any]:
        """The spec :meth:`rerun` would submit (``hpclaunch rerun --dry-run``).

        Raises:
            As :meth:`rerun`, but for Slurm's refusal.
        """
        from hpclaunch.ops.rerun import rerun_spec

        return rerun_spec(self, job_id, overrides, tier)[1]

    @staticmethod
    def save_webhook(name: str, url: str) -> Path:
        """Keep webhook ``url`` under ``name`` in a private file, for specs' ``notify:
        {webhook: NAME}`` (``hpclaunch notify add``); returns the file.

        Raises:
            ConfigError: A bad name or URL (the message never shows the URL).
        """
        from hpclaunch.store.webhooks import save_webhook

        return save_webhook(name, url)

    @staticmethod
    def remove_webhook(name: str) -> Path:
        """Forget the webhook ``name`` (``hpclaunch notify remove``); returns its file.
        Jobs already submitted keep their own copy.

        Raises:
            ConfigError: No such webhook.
        """
        from hpclaunch.store.webhooks import remove_webhook

        return remove_webhook(name)

    @staticmethod
    def webhooks() -> list[str]:
        """The names of the webhooks saved here (``hpclaunch notify list``)."""
        from hpclaunch.store.webhooks import webhook_names

        return webhook_names()

    @staticmethod
    def test_webhook(name: str) -> str:
        """Send a test message to the webhook ``name`` from here; ``""`` when it took it,
        else why not (``hpclaunch notify test``).

        Raises:
            ConfigError: No such webhook.
        """
        import socket

        from hpclaunch.notify.message import Notice
        from hpclaunch.notify.send import NotifyConfig, send_notice
        from hpclaunch.store.webhooks import load_webhook

        config = NotifyConfig(load_webhook(name), None, None, ("test",))
        notice = Notice("test", "test", "-", "-", f"a test of webhook {name}")
        return send_notice(config, notice, socket.gethostname()).why

    def shell_argv(
        self, job_id: str, *, node: str | None = None, command: Sequence[str] = ()
    ) -> list[str]:
        """The argv that opens a login shell (or runs ``command``) on a node of the running
        job ``job_id``, as a step sharing its resources (``hpclaunch shell``): ``srun
        --overlap --jobid ...`` here, through ``ssh -t`` to the login node when remote.

        Raises:
            BackendError: The job is not running, or ``node`` is not one of its nodes.
        """
        from hpclaunch.ops.reach import shell_argv

        return shell_argv(self, job_id, node, command)

    def forward(
        self, job_id: str, port: int, *, local_port: int = 0, node: str | None = None
    ) -> Forward:
        """Forward ``127.0.0.1:local_port`` here (0: a free port) to ``port`` on a node of
        the running job (``hpclaunch forward``), through the login node when remote; call
        ``.close()`` to stop, and ``.follow()`` now and then to keep to the job's node across
        a requeue (``waiting`` until its next attempt runs, ``ended`` once it has ended).

        Raises:
            BackendError: The job is not running, or ``node`` is not one of its nodes.
            ConnectError: The local port is taken.
        """
        from hpclaunch.ops.reach import Forward, job_node, job_place

        _, where = job_node(self, job_id, node)
        forward = Forward(
            where,
            port,
            self.runner.open_tcp,
            local_port=local_port,
            locate=lambda: job_place(self, job_id, node),
        )
        forward.start()
        return forward

    def job(self, job_id: str) -> Job:
        """A job by its Slurm id; its log directory comes from the history, if it is there."""
        from hpclaunch.ops.job import job_of

        return job_of(self, job_id)


def submit(
    spec: SpecInput | Callable[..., Any],
    /,
    *args: Any,
    overrides: Sequence[str] = (),
    submission_id: str | None = None,
    check: bool = True,
    **kwargs: Any,
) -> Job:
    """:meth:`Session.submit` with a session of the settings as they are now (made for this
    call: a changed ``HPCLAUNCH_*`` variable or user config counts): the site, backend and
    remote of ``HPCLAUNCH_*``, the user config and the site's ``defaults:``. A spec, or a
    function with its arguments and job options."""
    return Session().submit(
        spec,
        *args,
        overrides=overrides,
        submission_id=submission_id,
        check=check,
        **kwargs,
    )


def _duration(value: timedelta | str) -> timedelta:
    """``older_than`` of :meth:`Session.clean`: a ``timedelta``, or ``30min``, ``12h``,
    ``7d``, ``2w``."""
    from hpclaunch.slurm.usage import parse_age

    return value if isinstance(value, timedelta) else parse_age(value)
