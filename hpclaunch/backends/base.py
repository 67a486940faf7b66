"""The backend interface: submit a rendered job, ask about jobs, cancel one."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from hpclaunch.errors import HpclaunchError, SubmissionError
from hpclaunch.planning.render import RenderedJob, render
from hpclaunch.slurm.capabilities import discover
from hpclaunch.slurm.jobs import JobRef

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.transport.base import Runner

__all__ = ["Backend", "JobRef"]


class Backend(abc.ABC):
    """Talks to Slurm for hpclaunch.

    Args:
        runner: Where Slurm's commands run.
        site: The site config (limits, poll interval).
    """

    #: The registry name (``hpclaunch --backend NAME``).
    name: ClassVar[str]
    #: Whether jobs go to a Slurm cluster (plans are checked against it); the ``local``
    #: backend runs them on this machine.
    has_cluster: ClassVar[bool] = True
    #: Whether a job it submits can ask ``--requeue=expedite`` (site ``expedited_requeue``).
    can_expedite: ClassVar[bool] = True

    def __init__(self, runner: Runner, site: SiteConfig) -> None:
        self.runner = runner
        self.site = site

    def describe(self) -> str:
        """What this backend talks to Slurm with, for ``site check`` (e.g. library versions)."""
        return self.name

    def capabilities(self, *, now: Callable[[], float] | None = None) -> Capabilities:
        """What the cluster offers, asked now (:func:`hpclaunch.slurm.capabilities.discover`:
        Slurm's commands where :attr:`runner` runs them).
        :func:`hpclaunch.store.capabilities.load_capabilities` caches the answer.

        Raises:
            HpclaunchError: Slurm could not be asked.
        """
        return discover(self.runner, now=now or time.time)

    def dryrun(self, plan: SubmissionPlan) -> RenderedJob:
        """Render ``plan`` without submitting anything (``submit --dry-run``)."""
        return render(plan)

    @abc.abstractmethod
    def submit(self, job: RenderedJob, *, script_written: bool = False) -> JobRef:
        """Submit ``job`` once.

        Args:
            job: The rendered job.
            script_written: ``job.script`` is already at ``job.script_path`` (a sweep's
                arrays after the first share one script): do not write it again.

        Raises:
            SubmissionError: Slurm refused it (the message carries Slurm's answer).
        """

    @abc.abstractmethod
    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """Return the state of every job in ``refs``, asking Slurm once for all of them.

        Every ref is in the result; a job Slurm does not know is ``JobState.UNKNOWN``.
        """

    @abc.abstractmethod
    def cancel(self, ref: JobRef) -> None:
        """Cancel ``ref``. Safe to repeat: a job already finished or gone is not an error."""

    @abc.abstractmethod
    def submit_script(
        self, script_path: str, sbatch_argv: Sequence[str], submission_id: str, name: str
    ) -> JobRef:
        """Submit a batch script hpclaunch wrote earlier, already at ``script_path``, with
        ``sbatch_argv`` (``sbatch --parsable [--opt=value ...] SCRIPT [ARG ...]``, whose
        options replace the script's): a sweep's rerun of some points. A lost reply is
        recovered by ``submission_id`` (the argv's ``--comment`` tag), as in :meth:`submit`.

        Raises:
            SubmissionError: Slurm refused it.
        """

    @abc.abstractmethod
    def find_submission(self, submission_id: str) -> JobRef | None:
        """The job submitted with ``submission_id`` (its ``--comment`` tag), if any.

        What makes a retried submission safe: ``submit --submission-id`` asks this first.
        """

    @abc.abstractmethod
    def find_jobs(self, name: str) -> list[JobInfo]:
        """The current user's unfinished jobs whose name is exactly ``name``."""

    @abc.abstractmethod
    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        """The state (Slurm's long name) of each array task of ``wanted`` (``123_4``) of
        the arrays ``array_ids``, live or ended; a task Slurm knows nothing of is left out.
        What could not be asked is added to ``problems`` instead of raised (``sweep
        status`` shows what it has)."""

    # What only a Slurm cluster can do (the queue, changing jobs, accounting, estimates,
    # the arbiter's view) is in hpclaunch.backends.abilities: ask supports(backend, ...).

    #: Where :meth:`find_submission` looks, for the messages of :meth:`recover_submission`.
    asked_for_submissions: ClassVar[str] = "Slurm"

    def recover_submission(self, submission_id: str, what: str, cause: Exception) -> JobRef:
        """After a submission whose reply was lost (``what`` says how): the job of
        ``submission_id`` if it exists, else a :class:`SubmissionError` saying how to retry
        without making a second job."""
        retry = f"hpclaunch submit --submission-id {submission_id} SPEC"
        try:
            found = self.find_submission(submission_id)
        except HpclaunchError as exc:  # Slurm failed or timed out as well
            raise SubmissionError(
                f"{what}; the job may or may not have been submitted, and looking for it "
                f"failed too: {exc.message.splitlines()[0]}",
                hint=f"when Slurm answers again, retry with '{retry}': it submits only if "
                "no job carries that submission id",
            ) from cause
        if found is not None:
            return found
        raise SubmissionError(
            f"{what}; no job with submission id {submission_id} exists "
            f"({self.asked_for_submissions} were asked), so it was not submitted",
            hint=f"retry with '{retry}': it checks again and never makes a second job",
        ) from cause
