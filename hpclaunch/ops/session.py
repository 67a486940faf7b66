"""``hpclaunch.Session`` and ``hpclaunch.submit``: the library's entry points.

A session is a :class:`~hpclaunch.ops.context.Context` (settings, site, runner, backend)
with the cluster's verbs as methods (submit, dryrun, render, estimate, map; job, jobs,
history, status, notes; cancel, queue, cost, rerun, clean, arbiter) and its nouns as
attributes (:mod:`hpclaunch.ops.nouns`): ``session.sweeps``, ``session.pipelines``,
``session.site``, ``session.notify``. What needs no session is in
:mod:`hpclaunch.ops.helpers`. The CLI's commands call the same.

Every use case is imported at the top: importing this module loads the spec's models,
the template engine and the backends, which every command that reaches Slurm needs
anyway. So the CLI makes its session only when a command runs (``cli/_session.py``) and
``--help`` stays light; ``import hpclaunch`` loads this module at the first
``hpclaunch.Session``.
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
from hpclaunch.errors import ConfigError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.ops.call import bind_call, job_options, submit_call, submit_map
from hpclaunch.ops.cancel import cancel_jobs, jobs_named
from hpclaunch.ops.clean import clean_calls
from hpclaunch.ops.context import Context
from hpclaunch.ops.cost import gpu_cost
from hpclaunch.ops.estimate import estimate_job
from hpclaunch.ops.job import Job, MapRun, job_of, job_of_record
from hpclaunch.ops.nouns import Pipelines, SiteSetup, Sweeps, Webhooks
from hpclaunch.ops.plan_job import naming, plan_spec, spec_source
from hpclaunch.ops.progress import JobNotes, job_notes
from hpclaunch.ops.queue import queue_entries
from hpclaunch.ops.rerun import rerun_job
from hpclaunch.ops.snapshot import Snapshot
from hpclaunch.ops.status import job_statuses, refresh_records
from hpclaunch.ops.submit import spec_hash, submit_spec
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.planning.render import render
from hpclaunch.scheduling.arbiter.daemon import (
    Arbiter,
    ArbiterOptions,
    default_log_path,
    describe,
)
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.slurm.usage import parse_age
from hpclaunch.store.history import query_submissions

if TYPE_CHECKING:
    from hpclaunch.ops.cancel import Cancelled
    from hpclaunch.ops.clean import Cleaned
    from hpclaunch.ops.cost import CostReport
    from hpclaunch.ops.estimate import Estimate
    from hpclaunch.ops.plan_job import SpecInput
    from hpclaunch.ops.queue import QueueEntry
    from hpclaunch.ops.submit import Submitted
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.planning.sweep import SweepPlan
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["Session", "submit"]


class Session(Context):
    """Settings, a site, one way to Slurm and the history, for any number of calls; see
    :class:`~hpclaunch.ops.context.Context` for the arguments."""

    @functools.cached_property
    def sweeps(self) -> Sweeps:
        """Sweeps: ``submit``, ``dryrun``, ``find`` (by id), ``recorded``."""
        return Sweeps(self)

    @functools.cached_property
    def pipelines(self) -> Pipelines:
        """Multi-job files: ``submit``, ``dryrun``, ``wait``."""
        return Pipelines(self)

    @functools.cached_property
    def site(self) -> SiteSetup:
        """The site: ``.config``, ``.name``; the cluster against it: ``check``, ``plan``,
        ``apply``."""
        return SiteSetup(self)

    @functools.cached_property
    def notify(self) -> Webhooks:
        """The webhooks saved here: ``add``, ``remove``, ``names``, ``test``."""
        return Webhooks()

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
        job = rendered if rendered is not None else self.dryrun(spec, overrides=overrides)
        return estimate_job(self, job, spec_hash(spec, overrides))

    def render(self, spec: SpecInput) -> RenderedJob:
        """The batch script and sbatch argv ``spec`` becomes on this site, planned offline
        (``hpclaunch render``): no call to the cluster, the project's quota use taken as
        0 (:meth:`dryrun` reads it live and checks the plan against the cluster).

        Raises:
            SpecError, PlanError: The spec is wrong, or this site cannot run it.
        """
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

        if not callable(spec) and not isinstance(spec, (str, os.PathLike, Mapping, JobSpec)):
            raise TypeError(
                "submit takes a spec (a YAML file's path, a mapping or a JobSpec) or a "
                f"function, not {type(spec).__name__} {spec!r:.60}"
            )
        tree = Snapshot.of_cwd(self) if sync else None
        cwd = tree.cwd if tree is not None else None
        sender = send or Snapshot.send
        upload = (lambda _plan: sender(tree)) if tree is not None else None
        opts: SubmitOptions[SubmissionPlan] = SubmitOptions(
            overrides=overrides,
            submission_id=submission_id,
            check=check,
            dry_run=dry_run,
            force=force,
            cwd=cwd,
            before_submit=upload,
        )
        if callable(spec):
            if overrides:
                raise TypeError(
                    "overrides are for a spec: give a function's job options as keywords"
                )
            options, fn_kwargs = job_options(kwargs)
            given = {"submission_id": submission_id, "check": check, "sync": sync, "force": force}
            bind_call(spec, args, fn_kwargs, options, given, explicit="job" in kwargs)
            return submit_call(self, spec, args, fn_kwargs, options, opts)
        if args or kwargs:
            raise TypeError(
                "arguments are for a function (session.submit(fn, *args, **kwargs)); a spec "
                f"takes none: got {len(args)} positional and {sorted(kwargs)}"
            )
        return submit_spec(self, spec, opts)

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        max_concurrent: int | None = None,
        pack: int = 1,
        sweep_id: str | None = None,
        check: bool = True,
        dry_run: bool = False,
        **options: Any,
    ) -> MapRun:
        """Run ``fn(item)`` for each of ``items``, as one sweep of job arrays (split at the
        cluster's MaxArraySize, each point run once, tier ``low`` unless given); ``options``
        are the job's (a spec's fields, as for :meth:`submit`). ``max_concurrent``: at most
        that many tasks at once. ``pack``: items per array task, run one after another in
        its allocation (``sweep.pack``: short items pay no job each). ``results()`` gives
        the values in the items' order.
        With several iterables, as ``Executor.map``: ``fn(a, b)`` for each pair of
        ``zip(as_, bs)``.

        Raises:
            CallError: No items, ``fn`` or the items cannot be pickled, or too large.
            SpecError, PlanError, SubmissionError: As for :meth:`sweep`.
        """
        given, rest = job_options(options)
        if rest:
            raise TypeError(f"map passes each item alone: unknown options {sorted(rest)}")
        if len(iterables) == 1:
            call, items = fn, list(iterables[0])
        else:  # fn(*item) of zip(...): a partial of an importable helper, pickled as such
            call, items = functools.partial(star_call, fn), list(zip(*iterables, strict=False))
        opts: SubmitOptions[SweepPlan] = SubmitOptions(
            submission_id=sweep_id, check=check, dry_run=dry_run
        )
        swept = submit_map(self, call, items, given, opts, max_concurrent=max_concurrent, pack=pack)
        plan = swept.sweep.plan
        return MapRun(
            self,
            swept.sweep.sweep_id,
            swept.refs,
            len(swept.sweep.points),
            job_dir=plan.job_dir,
            log_dir=plan.log_dir,
        )

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

    def _job_of(self, record: SubmissionRecord) -> Job:
        return job_of_record(self, record)

    def status(self, job_ids: Sequence[str] = (), *, limit: int = 20) -> list[JobInfo]:
        """Jobs' state now, as ``hpclaunch status`` shows it (one status call for all):
        ``job_ids``, or the newest ``limit`` jobs of the history. The final states seen
        are stored in the history."""
        return job_statuses(self, list(job_ids) or None, limit=limit)

    def notes(self, infos: Sequence[JobInfo]) -> dict[str, JobNotes]:
        """Job id → what ``hpclaunch status`` adds to its row, for the running jobs of
        ``infos`` (from :meth:`status`) and the pending ones Slurm restarted: when it should
        end (its trainer reports a total), the retry it waits for (its spec's ``retry:``),
        why its idle guard cannot stop it. The history read once a job, one file read for
        each note, where the job runs."""
        return job_notes(self, infos)

    def cancel(
        self, jobs: Sequence[str | JobRef] = (), *, name: str | None = None
    ) -> list[Cancelled]:
        """Cancel jobs by id (or :class:`JobRef`) and, with ``name``, your unfinished jobs of
        that exact name, as ``hpclaunch cancel`` does: what became of each (a job already
        ended is left alone, an id unknown to Slurm is reported, not raised)."""
        refs = [job if isinstance(job, JobRef) else JobRef(job) for job in jobs]
        if name is not None:
            refs += jobs_named(self, name)
        return cancel_jobs(self, refs)

    def queue(self, *, me: bool = False, partition: str | None = None) -> list[QueueEntry]:
        """The cluster's queue as ``hpclaunch queue`` shows it: running jobs, then pending ones
        in the order the scheduler takes them, each with its tier, project, quota class and
        why it waits (``me``: only yours; ``partition``: only that partition's)."""
        return queue_entries(self, me=me, partition=partition)

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
        return gpu_cost(self, since=since, until=until, by=by, all_users=all_users)

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
        options = replace(options or ArbiterOptions(), **option_values)
        if self.site_config.preemption != "arbiter" and not options.dry_run:
            raise ConfigError(
                f"site {self.site_config.name!r} leaves preemption to Slurm (preemption: "
                "slurm): the arbiter and slurmctld would both pick victims",
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
        return clean_calls(self, _duration(older_than), dry_run=dry_run)

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
        return job_of(self, rerun_job(self, job_id, overrides=overrides, tier=tier).job_id)

    def job(self, job_id: str) -> Job:
        """A job by its Slurm id; its log directory comes from the history, if it is there."""
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
    return value if isinstance(value, timedelta) else parse_age(value)
