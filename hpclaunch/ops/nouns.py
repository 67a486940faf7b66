"""The nouns of a :class:`~hpclaunch.ops.session.Session`, each the verbs of one thing:
``session.sweeps``, ``session.pipelines``, ``session.site``, ``session.notify``.

One preview convention throughout: what submits (``submit``) has a ``dryrun`` beside it
that plans the same and returns a typed preview, submitting nothing (the site's
``plan`` previews its ``apply``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.notify.message import Notice
from hpclaunch.notify.send import NotifyConfig, send_notice
from hpclaunch.ops.job import Job, SweepRun
from hpclaunch.ops.pipeline import plan_pipeline, submit_pipeline, wait_pipeline
from hpclaunch.ops.site import SiteCheck, SitePlan, apply_site, check_site_live, plan_site_live
from hpclaunch.ops.snapshot import Snapshot
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.ops.sweep import preview_sweep, submit_sweep_spec
from hpclaunch.store.sweeps import list_sweeps
from hpclaunch.store.webhooks import load_webhook, remove_webhook, save_webhook, webhook_names

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hpclaunch.backends.base import JobRef
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.ops.context import Context
    from hpclaunch.ops.pipeline import PipelineEnd, PlannedPipeline
    from hpclaunch.ops.sweep import SweepPreview
    from hpclaunch.planning.pipeline import Step
    from hpclaunch.planning.siteplan import Change
    from hpclaunch.planning.sweep import SweepPlan
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.sweeps import SweepRecord

__all__ = ["Pipelines", "SiteSetup", "Sweeps", "Webhooks"]


class Sweeps:
    """``session.sweeps``: sweeps of a spec's ``sweep:``, submitted as job arrays."""

    def __init__(self, session: Context) -> None:
        self._session = session

    def submit(
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
        :meth:`dryrun` shows what it would submit.

        Raises:
            SpecError, PlanError: The spec is wrong, or this site or cluster cannot run it.
            SubmissionError: Slurm refused an array (the ones before it stay, recorded), or
                ``sweep_id`` names a sweep of other points.
        """
        opts: SubmitOptions[SweepPlan] = SubmitOptions(
            overrides=overrides, submission_id=sweep_id, check=check
        )
        swept = submit_sweep_spec(self._session, os.fspath(spec), opts)
        specs = tuple(array.array_spec for array in swept.sweep.arrays)
        return SweepRun(
            self._session, swept.sweep.sweep_id, swept.refs, len(swept.sweep.points), specs
        )

    def dryrun(
        self,
        spec: str | os.PathLike[str],
        *,
        overrides: Sequence[str] = (),
        check: bool = True,
        sweep_id: str | None = None,
    ) -> SweepPreview:
        """What :meth:`submit` would submit, submitting nothing (``sweep --dry-run``): the
        points, arrays and argv (``.sweep``), the script (``.job``), and the over-quota
        part's script (``.overquota``) when part of it is placed over-quota.

        Raises:
            SpecError, PlanError: As :meth:`submit`.
        """
        opts: SubmitOptions[SweepPlan] = SubmitOptions(
            overrides=overrides, submission_id=sweep_id, check=check
        )
        return preview_sweep(self._session, os.fspath(spec), opts)

    def find(self, sweep_id: str) -> SweepRun:
        """A sweep submitted from this machine, by its id (a unique prefix, or one of its
        arrays' job ids): ``status()``, ``wait()``, ``cancel()``, as ``hpclaunch sweep
        status`` and ``sweep cancel``.

        Raises:
            JobNotFound: No such sweep in this machine's records.
        """
        return SweepRun.find(self._session, sweep_id)

    def recorded(self) -> list[SweepRecord]:
        """The sweeps submitted from this machine, oldest first (``hpclaunch sweep list``;
        no Slurm call)."""
        return list_sweeps()


class Pipelines:
    """``session.pipelines``: multi-job files (``jobs:`` with ``after:``)."""

    def __init__(self, session: Context) -> None:
        self._session = session

    def submit(
        self,
        path: str,
        *,
        submission_id: str | None = None,
        check: bool = True,
        sync: bool = False,
        send: Callable[[Snapshot], object] | None = None,
        on_submitted: Callable[[Step, JobRef, bool], None] | None = None,
    ) -> list[Job]:
        """Submit every job of the multi-job file ``path`` in dependency order, as
        ``hpclaunch submit FILE`` does: all planned and checked before the first is
        submitted; with your ``submission_id`` a retry submits only the jobs not submitted
        yet. ``sync``/``send``: as :meth:`Session.submit`. ``on_submitted(step, ref,
        existing)`` after each job. The jobs in submission order.

        Raises:
            SpecError, PlanError: A job is wrong, or this site or cluster cannot run it.
            SubmissionError: A job was refused; the message lists those already submitted.
        """
        planned, tree = self._planned(path, submission_id, check, sync)
        if tree is not None:
            (send or Snapshot.send)(tree)
        refs = submit_pipeline(
            self._session, planned, retry=submission_id is not None, on_submitted=on_submitted
        )
        return [
            Job(
                self._session,
                refs[step.name],
                submission_id=planned.plans[step.name].submission_id,
                log_dir=planned.plans[step.name].log_dir,
                job_dir=planned.plans[step.name].job_dir,
            )
            for step in planned.steps
        ]

    def dryrun(
        self,
        path: str,
        *,
        submission_id: str | None = None,
        check: bool = True,
        sync: bool = False,
    ) -> PlannedPipeline:
        """What :meth:`submit` would submit, submitting nothing (``submit --dry-run
        FILE``): ``.steps`` in submission order, each one's ``.plans[name]`` and
        ``.rendered[name]`` (its script, with ``<name>`` where a dependency's id will be).

        Raises:
            SpecError, PlanError: As :meth:`submit`.
        """
        return self._planned(path, submission_id, check, sync)[0]

    def wait(
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
        return wait_pipeline(self._session, jobs, timeout=timeout, on_change=on_change)

    def _planned(
        self, path: str, submission_id: str | None, check: bool, sync: bool
    ) -> tuple[PlannedPipeline, Snapshot | None]:
        """The file's jobs planned (in a snapshot of the code tree with ``sync``: its
        paths are not on the cluster yet), and that snapshot, not sent."""
        tree = Snapshot.of_cwd(self._session) if sync else None
        cwd = tree.cwd if tree is not None else None
        planned = plan_pipeline(
            self._session, path, submission_id=submission_id, check=check, cwd=cwd
        )
        return planned, tree


class SiteSetup:
    """``session.site``: the site config (``.config``) and the cluster made to match it:
    ``check()``, ``plan()`` (the preview), ``apply()``."""

    def __init__(self, session: Context) -> None:
        self._session = session

    @property
    def config(self) -> SiteConfig:
        """The site config this session uses."""
        return self._session.site_config

    @property
    def name(self) -> str:
        """The site's name."""
        return self._session.site_config.name

    def check(self, *, refresh: bool = False) -> SiteCheck:
        """The site config against the live cluster (``hpclaunch site check``): its
        capabilities (cached unless ``refresh``) and the QOS and account changes pending."""
        return check_site_live(self._session, refresh=refresh)

    def plan(self) -> SitePlan:
        """The sacctmgr commands that make the cluster match the site (``site plan``)."""
        return plan_site_live(self._session)

    def apply(
        self,
        plan: SitePlan | None = None,
        *,
        progress: Callable[[Change], None] | None = None,
    ) -> SitePlan:
        """Run ``plan``'s sacctmgr commands (default: :meth:`plan` now), as ``site apply
        --yes`` does, calling ``progress`` with each before it runs; returns what is left
        (slurm.conf settings are an admin's)."""
        return apply_site(self._session, plan or self.plan(), progress=progress)


class Webhooks:
    """``session.notify``: the webhooks saved on this machine, for specs' ``notify:
    {webhook: NAME}`` (no site or Slurm involved)."""

    def add(self, name: str, url: str) -> Path:
        """Keep webhook ``url`` under ``name`` in a private file (``hpclaunch notify
        add``); returns the file.

        Raises:
            ConfigError: A bad name or URL (the message never shows the URL).
        """
        return save_webhook(name, url)

    def remove(self, name: str) -> Path:
        """Forget the webhook ``name`` (``hpclaunch notify remove``); returns its file.
        Jobs already submitted keep their own copy.

        Raises:
            ConfigError: No such webhook.
        """
        return remove_webhook(name)

    def names(self) -> list[str]:
        """The names of the webhooks saved here (``hpclaunch notify list``)."""
        return webhook_names()

    def test(self, name: str) -> str:
        """Send a test message to the webhook ``name`` from here; ``""`` when it took it,
        else why not (``hpclaunch notify test``).

        Raises:
            ConfigError: No such webhook.
        """
        config = NotifyConfig(load_webhook(name), None, None, ("test",))
        notice = Notice("test", "test", "-", "-", f"a test of webhook {name}")
        return send_notice(config, notice, socket.gethostname()).why
