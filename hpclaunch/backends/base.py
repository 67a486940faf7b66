"""The backend interface: submit a rendered job, ask about jobs, cancel one."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from hpclaunch.errors import BackendUnavailable, HpclaunchError, SubmissionError
from hpclaunch.slurm.capabilities import discover
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.slurm.queue import WHOLE_QUEUE, QueueQuery

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.slurm.cluster import ClusterJob, NodeGpus
    from hpclaunch.slurm.estimate import StartEstimate
    from hpclaunch.slurm.jobs import Attempt, JobInfo
    from hpclaunch.slurm.queue import QueueRow
    from hpclaunch.slurm.usage import AttemptUsage
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
        from hpclaunch.planning.render import render  # noqa: PLC0415 (pydantic, jinja2)

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
        raise self._unsupported("submit a script again")

    @abc.abstractmethod
    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """Return the state of every job in ``refs``, asking Slurm once for all of them.

        Every ref is in the result; a job Slurm does not know is ``JobState.UNKNOWN``.
        """

    @abc.abstractmethod
    def cancel(self, ref: JobRef) -> None:
        """Cancel ``ref``. Safe to repeat: a job already finished or gone is not an error."""

    # Optional abilities: a backend that lacks one says so when it is used.

    def find_submission(self, submission_id: str) -> JobRef | None:
        """The job submitted with ``submission_id`` (its ``--comment`` tag), if any.

        What makes a retried submission safe: ``submit --submission-id`` asks this first.

        Raises:
            BackendUnavailable: This backend cannot look jobs up by submission id.
        """
        raise self._unsupported("look up a job by its submission id")

    def find_jobs(self, name: str) -> list[JobInfo]:
        """The current user's unfinished jobs whose name is exactly ``name``.

        Raises:
            BackendUnavailable: This backend cannot list jobs by name.
        """
        raise self._unsupported("find jobs by name")

    def update_job(self, job_id: str, changes: Mapping[str, str]) -> None:
        """Change a pending job (an array's id: every pending task), e.g. ``{"QOS": "high",
        "Nice": "0", "Requeue": "1"}``: the fields of ``scontrol update`` that ``hpclaunch
        tier`` sets (QOS, Account, Nice, Requeue).

        Raises:
            UpdateRefused: Slurm said no (its answer in ``said``).
            BackendUnavailable: This backend cannot change jobs.
        """
        raise self._unsupported("change a job")

    def task_states(
        self, array_ids: Sequence[str], wanted: Sequence[str], problems: list[str]
    ) -> dict[str, str]:
        """The state (Slurm's long name) of each array task of ``wanted`` (``123_4``) of
        the arrays ``array_ids``, live or ended; a task Slurm knows nothing of is left out.
        What could not be asked is added to ``problems`` instead of raised (``sweep
        status`` shows what it has)."""
        raise self._unsupported("list the states of array tasks")

    def queue(self, query: QueueQuery = WHOLE_QUEUE) -> list[QueueRow]:
        """The cluster's pending and running jobs as squeue lists them (pending tasks of an
        array folded into one row, ``123_[4-9%2]``) that ``query`` asks for, asking Slurm
        once.

        Raises:
            BackendUnavailable: Slurm could not be asked, or this backend cannot.
        """
        raise self._unsupported("list the queue")

    def queue_job(self, job_id: str) -> list[QueueRow]:
        """The rows of one job in any state Slurm still holds (``123``: every task of an
        array; ``123_4``: that task); empty when Slurm no longer knows it.

        Raises:
            BackendUnavailable: Slurm could not be asked, or this backend cannot.
        """
        raise self._unsupported("look up a job in the queue")

    def cluster_jobs(self) -> list[ClusterJob]:
        """Every pending and running job of the cluster, as the arbiter reads them (one
        look at the queue).

        Raises:
            BackendUnavailable: Slurm could not be asked, or this backend cannot.
        """
        raise self._unsupported("list the cluster's jobs for the arbiter")

    def node_gpus(self) -> list[NodeGpus]:
        """Every node's GPUs (the site's GRES name): configured, allocated, usable.

        Raises:
            BackendUnavailable: Slurm could not be asked, or this backend cannot.
        """
        raise self._unsupported("list the nodes' GPUs")

    def restart_counts(self) -> dict[str, int]:
        """Slurm's restart (requeue) count of every running job, by job id (``123_4``).

        Raises:
            BackendUnavailable: Slurm could not be asked, or this backend cannot.
        """
        raise self._unsupported("read restart counts")

    def usage(self, since: datetime, until: datetime, user: str | None) -> list[AttemptUsage]:
        """Every attempt of every allocation around in [since, until), from accounting:
        ``user``'s, or (``None``) all users'.

        Raises:
            BackendUnavailable: No accounting is available through this backend.
        """
        raise self._unsupported("read GPU usage from accounting")

    def requeue(self, job_id: str) -> None:
        """Put running job ``job_id`` back in the queue (``scontrol requeue``).

        Raises:
            UpdateRefused: Slurm said no (its answer in ``said``).
        """
        raise self._unsupported("requeue a job")

    def hold(self, job_id: str) -> None:
        """Keep pending job ``job_id`` from starting until :meth:`release` (a hold its user
        may release: ``scontrol uhold``, reason ``JobHeldUser``).

        Raises:
            UpdateRefused: Slurm said no (its answer in ``said``).
        """
        raise self._unsupported("hold a job")

    def release(self, job_id: str) -> None:
        """Let held job ``job_id`` be scheduled again (``scontrol release``).

        Raises:
            UpdateRefused: Slurm said no (its answer in ``said``).
        """
        raise self._unsupported("release a job")

    def signal(self, job_id: str, signal: str) -> None:
        """Send ``signal`` (``USR1``, ``SIGTERM``, ...) to the batch step of running job
        ``job_id`` only (``scancel --batch --signal``): the sidecar there turns it into
        checkpoint and requeue.

        Raises:
            UpdateRefused: Slurm said no (its answer in ``said``).
        """
        raise self._unsupported("signal a job")

    def estimate_start(self, job: RenderedJob) -> StartEstimate | None:
        """When Slurm would start ``job`` if it were submitted now (``sbatch --test-only``,
        nothing queued); ``None`` when Slurm gave no time.

        Raises:
            SubmissionError: Slurm refused the job as it stands (its answer in the message).
        """
        raise self._unsupported("estimate a job's start")

    def attempts(self, ref: JobRef) -> list[Attempt]:
        """Every run (attempt) of ``ref``, oldest first, from Slurm's accounting.

        Raises:
            BackendUnavailable: No accounting is available through this backend.
        """
        raise self._unsupported("list a job's attempts")

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

    def _unsupported(self, what: str) -> Exception:
        return BackendUnavailable(
            f"the {self.name!r} backend cannot {what}", hint="use the 'cli' backend (--backend cli)"
        )
