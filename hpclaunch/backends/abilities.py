"""What a backend can do besides submitting and following jobs, as small protocols.

Every backend submits, asks the state of jobs, cancels, and finds a submission again
(:class:`~hpclaunch.backends.base.Backend`). The rest needs a Slurm cluster: the queue, a
controller that changes jobs, accounting, ``sbatch --test-only`` and the arbiter's view of
nodes and jobs. The ``cli`` and ``pyslurm`` backends declare them all (as their bases); the
``local`` backend, which runs jobs on this machine, none. Ask before (:func:`supports`), or
take one with its accessor (:func:`queue_of`, ...), which names the backend that can when
this one cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

from hpclaunch.errors import BackendUnavailable
from hpclaunch.slurm.queue import WHOLE_QUEUE, QueueQuery

if TYPE_CHECKING:
    from datetime import datetime

    from hpclaunch.backends.base import Backend
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.cluster import ClusterJob, NodeGpus
    from hpclaunch.slurm.estimate import StartEstimate
    from hpclaunch.slurm.jobs import Attempt, JobRef
    from hpclaunch.slurm.queue import QueueRow
    from hpclaunch.slurm.usage import AttemptUsage

__all__ = [
    "Ability",
    "ArbiterView",
    "ControlsJobs",
    "EstimatesStart",
    "ReadsAccounting",
    "ReadsQueue",
    "accounting_of",
    "arbiter_view_of",
    "control_of",
    "estimates_of",
    "queue_of",
    "supports",
]


@runtime_checkable
class ReadsQueue(Protocol):
    """The queue, asked once a call."""

    def queue(self, query: QueueQuery = WHOLE_QUEUE) -> list[QueueRow]:
        """The cluster's pending and running jobs as squeue lists them (pending tasks of an
        array folded into one row, ``123_[4-9%2]``) that ``query`` asks for.

        Raises:
            BackendUnavailable: Slurm could not be asked.
        """
        ...

    def queue_job(self, job_id: str) -> list[QueueRow]:
        """The rows of one job in any state Slurm still holds (``123``: every task of an
        array; ``123_4``: that task); empty when Slurm no longer knows it.

        Raises:
            BackendUnavailable: Slurm could not be asked.
        """
        ...


@runtime_checkable
class ControlsJobs(Protocol):
    """Changes to a job that only the controller makes. Each raises UpdateRefused when
    Slurm says no (its answer in ``said``)."""

    def update_job(self, job_id: str, changes: Mapping[str, str]) -> None:
        """Change a pending job (an array's id: every pending task), e.g. ``{"QOS": "high",
        "Nice": "0", "Requeue": "1"}``: the fields of ``scontrol update`` that ``hpclaunch
        tier`` sets (QOS, Account, Nice, Requeue)."""
        ...

    def requeue(self, job_id: str) -> None:
        """Put running job ``job_id`` back in the queue (``scontrol requeue``)."""
        ...

    def hold(self, job_id: str) -> None:
        """Keep pending job ``job_id`` from starting until :meth:`release` (a hold its user
        may release: ``scontrol uhold``, reason ``JobHeldUser``)."""
        ...

    def release(self, job_id: str) -> None:
        """Let held job ``job_id`` be scheduled again (``scontrol release``)."""
        ...

    def signal(self, job_id: str, signal: str) -> None:
        """Send ``signal`` (``USR1``, ``SIGTERM``, ...) to the batch step of running job
        ``job_id`` only (``scancel --batch --signal``): the sidecar there turns it into
        checkpoint and requeue."""
        ...


@runtime_checkable
class ReadsAccounting(Protocol):
    """Slurm's accounting (slurmdbd). Each raises BackendUnavailable when it cannot be
    asked."""

    def usage(self, since: datetime, until: datetime, user: str | None) -> list[AttemptUsage]:
        """Every attempt of every allocation around in [since, until): ``user``'s, or
        (``None``) all users'."""
        ...

    def attempts(self, ref: JobRef) -> list[Attempt]:
        """Every run (attempt) of ``ref``, oldest first."""
        ...


@runtime_checkable
class EstimatesStart(Protocol):
    """The scheduler's answer for a job not submitted."""

    def estimate_start(self, job: RenderedJob) -> StartEstimate | None:
        """When Slurm would start ``job`` if it were submitted now (``sbatch --test-only``,
        nothing queued); ``None`` when Slurm gave no time.

        Raises:
            SubmissionError: Slurm refused the job as it stands (its answer in the message).
        """
        ...


@runtime_checkable
class ArbiterView(Protocol):
    """What the arbiter reads each round. Each raises BackendUnavailable when Slurm could
    not be asked."""

    def cluster_jobs(self) -> list[ClusterJob]:
        """Every pending and running job of the cluster (one look at the queue)."""
        ...

    def node_gpus(self) -> list[NodeGpus]:
        """Every node's GPUs (the site's GRES name): configured, allocated, usable."""
        ...

    def restart_counts(self) -> dict[str, int]:
        """Slurm's restart (requeue) count of every running job, by job id (``123_4``)."""
        ...


#: The abilities by the name :func:`supports` takes, and what a backend without one cannot.
Ability = Literal["queue", "control", "accounting", "estimates", "arbiter"]
_PROTOCOLS: dict[Ability, tuple[type, str]] = {
    "queue": (ReadsQueue, "list the queue"),
    "control": (ControlsJobs, "change, hold, requeue or signal a job"),
    "accounting": (ReadsAccounting, "read Slurm's accounting"),
    "estimates": (EstimatesStart, "estimate a job's start"),
    "arbiter": (ArbiterView, "show the arbiter the cluster's nodes and jobs"),
}


def supports(backend: Backend, ability: Ability) -> bool:
    """Whether ``backend`` can do what ``ability`` names."""
    return isinstance(backend, _PROTOCOLS[ability][0])


def _able(backend: Backend, ability: Ability) -> object:
    if supports(backend, ability):
        return backend
    raise BackendUnavailable(
        f"the {backend.name!r} backend cannot {_PROTOCOLS[ability][1]}",
        hint="use the 'cli' backend (--backend cli)",
    )


# The accessors: the backend as that ability, or BackendUnavailable naming the backend that
# has it (the local backend has none of them).


def queue_of(backend: Backend) -> ReadsQueue:
    """``backend`` as a reader of the queue."""
    return cast("ReadsQueue", _able(backend, "queue"))


def control_of(backend: Backend) -> ControlsJobs:
    """``backend`` as what changes, holds, requeues and signals jobs."""
    return cast("ControlsJobs", _able(backend, "control"))


def accounting_of(backend: Backend) -> ReadsAccounting:
    """``backend`` as a reader of Slurm's accounting."""
    return cast("ReadsAccounting", _able(backend, "accounting"))


def estimates_of(backend: Backend) -> EstimatesStart:
    """``backend`` as what asks Slurm when a job would start."""
    return cast("EstimatesStart", _able(backend, "estimates"))


def arbiter_view_of(backend: Backend) -> ArbiterView:
    """``backend`` as the arbiter's view of the cluster's nodes and jobs."""
    return cast("ArbiterView", _able(backend, "arbiter"))
