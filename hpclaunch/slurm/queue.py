"""The cluster's queue as squeue prints it, and the order the scheduler takes it in.

Pure functions over squeue's output, for ``hpclaunch queue``, ``hpclaunch tier`` and the
quota usage read at submit:

* :data:`QUEUE_FORMAT` / :func:`queue_argv`: ONE squeue call for every pending and running
  job of the cluster (or of one user or partition); :func:`parse_queue` reads it into
  :class:`QueueRow` s; :func:`job_argv`: one job's line.
* :func:`order`: running jobs first, then pending ones in the order Slurm considers them.
  :mod:`hpclaunch.ops.queue` adds each job's tier, quota class and why it waits, in words.

The order (Slurm 22.05, ``sched/backfill`` and the main scheduler's ``sort_job_queue2``):
pending jobs by priority, highest first, then submit time, then job id. With
``priority/multifactor`` the priority already holds the QOS priority (the tier, times
``PriorityWeightQOS``) minus the nice value, so sorting by it is sorting by tier first.
Partition ``PriorityTier`` and reservations, which come before priority in Slurm's sort,
are not read: on a site whose partitions differ in ``PriorityTier`` the rank is per
partition only approximately right. Backfill may still start a later job early when it
fits in GPUs nobody ahead of it can use before they free up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.slurm.text import field
from hpclaunch.slurm.times import parse_elapsed, slurm_epoch
from hpclaunch.slurm.tres import GPU_FIELDS, gpus_of_fields, to_int

__all__ = [
    "OWNER_AND_STATE",
    "QUEUE_FORMAT",
    "QUEUE_STATES",
    "WHOLE_QUEUE",
    "QueueQuery",
    "QueueRow",
    "job_argv",
    "long_format",
    "order",
    "parse_queue",
    "queue_argv",
    "sort_key",
]

#: squeue ``--Format`` fields (22.05 to 26.05): job id (``123``, ``123_4`` or ``123_[5-9]``
#: for pending array tasks folded into one line), user, account, QOS, state (long), reason,
#: priority (an integer), submit time (the cluster's local time), node count, the fields
#: the job's GPUs are counted from (:data:`hpclaunch.slurm.tres.GPU_FIELDS`: ``%b`` alone
#: misses ``--gpus`` and ``--gpus-per-task``), nice, partition, time used, start time (a
#: pending job's is the one the scheduler expects, once backfill computed it; ``N/A``
#: before); the name (free text, may hold ``|``) last.
#: The fields every queue reader asks after the id, in this order: whose job, in which
#: QOS, its state and reason, its priority.
OWNER_AND_STATE = ("UserName", "Account", "QOS", "State", "Reason", "PriorityLong")
QUEUE_FIELDS = (
    "JobArrayID",
    *OWNER_AND_STATE,
    "SubmitTime",
    "NumNodes",
    *GPU_FIELDS,
    "Nice",
    "Partition",
    "TimeUsed",
    "StartTime",
    "Name",
)


def long_format(fields: tuple[str, ...]) -> str:
    """squeue ``--Format`` for ``fields`` split by ``|``: ``type:0|`` prints the whole value
    unpadded (width 0) with ``|`` as its suffix (squeue's opts.c ``_parse_long_token``); the
    last field, free text, has no suffix."""
    return ",".join(f"{f}:0|" for f in fields[:-1]) + f",{fields[-1]}:0"


QUEUE_FORMAT = long_format(QUEUE_FIELDS)
#: The states shown: waiting or holding resources (finished jobs are not work ahead).
QUEUE_STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED"

_LEADING_INT = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class QueueRow:
    """One line of :func:`queue_argv`'s output.

    Attributes:
        job_id: ``123``, ``123_4``, or ``123_[5-9]`` (pending array tasks).
        reason: Slurm's raw reason (``Priority``, ``Resources``, ...); ``None``: none.
        priority: ``%Q``; ``None`` when unreadable.
        submit: Submit time as squeue prints it (ISO 8601, the cluster's local time).
        gpus: GPUs of the whole job, held (running) or asked for (pending), however it
            asked (``--gres``, ``--gpus``, ``--gpus-per-node``, ``--gpus-per-task``); of one
            task for a line of folded array tasks.
        partition: One partition, or several comma-separated for a multi-partition job.
        elapsed: Run time in Slurm's format (``0:00`` while pending).
        start: When it started, or for a pending job when Slurm expects it to start (the
            cluster's local time; ``None``: Slurm has no estimate yet).
    """

    job_id: str
    user: str
    account: str | None
    qos: str | None
    state: str
    reason: str | None
    priority: int | None
    submit: str | None
    nodes: int
    gpus: int
    nice: int
    partition: str | None
    elapsed: str | None
    name: str
    start: str | None = None

    @property
    def pending(self) -> bool:
        """Whether the job waits to start."""
        return self.state == "PENDING"

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (rounded up where a ``--gpus`` job's are spread unevenly)."""
        return -(-self.gpus // max(1, self.nodes))

    @property
    def gpus_of_all_tasks(self) -> int:
        """GPUs every job of the row holds or asks for (each task of a folded line)."""
        return self.gpus * self.tasks

    @property
    def tasks(self) -> int:
        """How many jobs the row stands for: ``123_[2-5,8%2]`` is 5 pending tasks."""
        folded = re.search(r"_\[([^%\]]*)", self.job_id)
        if folded is None:
            return 1
        try:
            return len(task_ids(folded.group(1))) or 1
        except ValueError:  # not a task list: count the row once, as an unfolded one
            return 1

    @property
    def reason_code(self) -> str | None:
        """The reason's code: ``ReqNodeNotAvail, UnavailableNodes:n1`` → ``ReqNodeNotAvail``."""
        if self.reason is None:
            return None
        return re.split(r"[,\s(]", self.reason.strip("()"), maxsplit=1)[0] or None

    @property
    def partitions(self) -> frozenset[str]:
        """The job's partitions (a pending job may name several)."""
        return frozenset(p for p in (self.partition or "").split(",") if p)

    @property
    def base_id(self) -> str:
        """The job id without its array task (``123`` of ``123_4`` and ``123_[5-9]``)."""
        match = _LEADING_INT.match(self.job_id)
        return match.group(1) if match else self.job_id

    @property
    def submitted_at(self) -> float | None:
        """The submit time as a POSIX timestamp (``None``: unreadable)."""
        return slurm_epoch(self.submit)

    @property
    def elapsed_seconds(self) -> int:
        """``%M`` (``[D-][H:]M:SS``) in seconds; 0 when unreadable."""
        return parse_elapsed(self.elapsed) or 0

    @property
    def array_job(self) -> bool:
        """Whether this is (part of) an array job."""
        return "_" in self.job_id


@dataclass(frozen=True)
class QueueQuery:
    """Which of the queue's jobs to list: the whole cluster's, or (``me``) yours only, or
    one partition's, or one account's; in ``states`` (comma-separated, squeue's names).
    Both backends read it: squeue's options, or the same filters over one job-list RPC."""

    me: bool = False
    partition: str | None = None
    account: str | None = None
    states: str = QUEUE_STATES


#: The whole cluster's queue, pending and running jobs.
WHOLE_QUEUE = QueueQuery()


def queue_argv(query: QueueQuery = WHOLE_QUEUE) -> list[str]:
    """The one squeue call for the queue ``query`` asks for."""
    argv = ["squeue", "--noheader", f"--states={query.states}", f"--Format={QUEUE_FORMAT}"]
    if query.me:
        argv.append("--me")
    if query.partition is not None:
        argv.append(f"--partition={query.partition}")
    if query.account is not None:
        argv.append(f"--account={query.account}")
    return argv


def job_argv(job_id: str) -> list[str]:
    """squeue for one job (every state), in :data:`QUEUE_FORMAT`: all tasks of an array id."""
    return ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", f"--Format={QUEUE_FORMAT}"]


def parse_queue(stdout: str, gres: str = "gpu") -> list[QueueRow]:
    """Parse :data:`QUEUE_FORMAT` lines (``gres``: the site's GPU GRES name); lines that do
    not fit are skipped."""
    rows = []
    width = len(QUEUE_FIELDS)
    for line in stdout.splitlines():
        cols = line.split("|", width - 1)
        if len(cols) != width or not _LEADING_INT.match(cols[0].strip()):
            continue
        job_id, user, account, qos, state, reason, prio, submit, nodes = [
            c.strip() for c in cols[:9]
        ]
        gpu_fields = cols[9:14]
        nice, part, elapsed, start = (c.strip() for c in cols[14:18])
        node_count = to_int(nodes) or 1
        rows.append(
            QueueRow(
                job_id=job_id,
                user=user,
                account=field(account),
                qos=field(qos),
                state=state.split()[0].upper() if state.strip() else "UNKNOWN",
                reason=field(reason),
                priority=to_int(prio),
                submit=field(submit),
                nodes=node_count,
                gpus=gpus_of_fields(gpu_fields, nodes=node_count, gres=gres),
                nice=to_int(nice) or 0,
                partition=field(part),
                elapsed=field(elapsed),
                name=cols[-1],
                start=field(start),
            )
        )
    return rows


def sort_key(row: QueueRow) -> tuple[int, float, int, str]:
    """Slurm's order of pending jobs: priority (highest first), submit time, job id."""
    prio = row.priority if row.priority is not None else -1
    submitted = slurm_epoch(row.submit)
    job = _LEADING_INT.match(row.job_id)
    when = submitted if submitted is not None else float("inf")
    return (-prio, when, int(job.group(1)) if job else 0, row.job_id)


def order(rows: Iterable[QueueRow]) -> list[QueueRow]:
    """Running (and other started) jobs first, longest-running first; then pending ones in
    the order the scheduler considers them (:func:`sort_key`)."""
    rows = list(rows)
    started = sorted((r for r in rows if not r.pending), key=_started_key)
    pending = sorted((r for r in rows if r.pending), key=sort_key)
    return started + pending


# -- helpers ------------------------------------------------------------------------------


def _started_key(row: QueueRow) -> tuple[int, int]:
    job = _LEADING_INT.match(row.job_id)
    return (-row.elapsed_seconds, int(job.group(1)) if job else 0)
