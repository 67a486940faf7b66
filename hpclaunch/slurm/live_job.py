"""One job as slurmctld has it now: ``scontrol show job`` and ``squeue -o %L``, read here
and nowhere else (the sidecar asks why a SIGTERM came and how long is left; a resize and
the arbiter ask how many nodes, tasks and CPUs the job holds)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hpclaunch.slurm.text import field
from hpclaunch.slurm.times import parse_time

__all__ = ["ShownJob", "parse_show_job", "parse_time_left", "show_job_argv", "time_left_argv"]

_INT_FIELD = re.compile(r"\b(Restarts|NumNodes|NumTasks|NumCPUs)=(\d+)")
_TEXT_FIELD = re.compile(r"\b(FailedNode|PreemptTime|Reason)=(\S+)")


def show_job_argv(job_id: str) -> list[str]:
    """``scontrol show job ID``: every field of one job (an array task as ``123_4``)."""
    return ["scontrol", "show", "job", job_id]


def time_left_argv(job_id: str) -> list[str]:
    """``squeue -o %L`` of one job: the time left to its limit, following a ``scontrol
    update TimeLimit`` (``SLURM_JOB_END_TIME`` does not)."""
    return ["squeue", "-h", "-j", job_id, "-o", "%L"]


@dataclass(frozen=True)
class ShownJob:
    """What ``scontrol show job`` says of a job (``None``: not said, or not asked).

    Attributes:
        restarts: ``Restarts=N``. Raised when the job is requeued, *before* Slurm SIGTERMs
            the running attempt (measured on 22.05: ``scontrol requeue`` gives the batch
            shell SIGTERM with it one above ``SLURM_RESTART_COUNT``; ``scancel`` leaves it).
        failed_node: ``FailedNode=NODE``: a node of the job failed (or was set DOWN) and
            Slurm ends the attempt as NODE_FAIL (seen on 25.11 while the job is COMPLETING,
            ``tests/unit/data/cluster-25.11/scontrol_show_job_failed_node.txt``).
        reason: ``Reason=``: ``TimeLimit`` when the SIGTERM is the time limit's (25.11:
            ``JobState=COMPLETING Reason=TimeLimit``; a scancel leaves ``Reason=None``).
        preempting: ``PreemptTime`` is set: Slurm is preempting the job.
        nodes, tasks, cpus: ``NumNodes``, ``NumTasks``, ``NumCPUs`` (the job's minimum CPUs).
    """

    restarts: int | None = None
    failed_node: str | None = None
    reason: str | None = None
    preempting: bool = False
    nodes: int | None = None
    tasks: int | None = None
    cpus: int | None = None

    @property
    def at_time_limit(self) -> bool:
        """Slurm is ending the job because its time limit came."""
        return self.reason == "TimeLimit"


def parse_show_job(text: str) -> ShownJob:
    """The fields of :class:`ShownJob` in ``scontrol show job``'s text (the first of
    each: an array id shows every task, the first one is read)."""
    numbers: dict[str, int] = {}
    for name, value in _INT_FIELD.findall(text):
        numbers.setdefault(name, int(value))
    words: dict[str, str] = {}
    for name, value in _TEXT_FIELD.findall(text):
        words.setdefault(name, value)
    return ShownJob(
        restarts=numbers.get("Restarts"),
        failed_node=field(words.get("FailedNode", "")),
        reason=words.get("Reason"),
        preempting=field(words.get("PreemptTime", "")) is not None,
        nodes=numbers.get("NumNodes"),
        tasks=numbers.get("NumTasks"),
        cpus=numbers.get("NumCPUs"),
    )


def parse_time_left(stdout: str) -> float:
    """Seconds left, from :func:`time_left_argv`'s answer (``1-02:03:04``, ``59:58``).

    Raises:
        ValueError, IndexError: No time in the answer (``UNLIMITED``, ``INVALID``, nothing).
    """
    return float(parse_time(stdout.strip().splitlines()[0]))
