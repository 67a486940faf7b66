"""The cluster's jobs and GPUs as the arbiter reads them, in two calls per pass.

* :func:`jobs_argv` / :func:`parse_jobs`: ONE ``squeue`` for every pending and running job
  (id, unique id, user, account, QOS, state, reason, priority, node count, GPUs per node,
  node list, start time, partition, the batch script's path).
* :func:`nodes_argv` / :func:`parse_nodes`: ONE ``scontrol show nodes --oneliner``: each
  node's GPUs (``Gres=gpu:4``), the ones allocated (``AllocTRES=...,gres/gpu=3``), its
  partitions and state.
* :func:`restarts_argv` / :func:`parse_restarts`: only in a pass where a job waits for GPUs
  it may take by preemption, one more ``squeue`` for Slurm's restart count of each running
  job.

Both are pure parsers over Slurm 22.05's text, tested on lines recorded from the local
cluster. ``squeue`` prints times in the cluster's local time (ISO 8601, no zone).
"""

from __future__ import annotations

from dataclasses import dataclass

import hostlist  # type: ignore[import-untyped]  # python-hostlist ships no types

from hpclaunch.slurm.queue import OWNER_AND_STATE, long_format
from hpclaunch.slurm.text import field, key_values
from hpclaunch.slurm.times import slurm_epoch
from hpclaunch.slurm.tres import GPU_FIELDS, gpus_of_fields, gres_count, to_int, tres_value

__all__ = [
    "JOB_FIELDS",
    "JOB_STATES",
    "RUNNING_STATES",
    "ClusterJob",
    "NodeGpus",
    "expand_hosts",
    "jobs_argv",
    "nodes_argv",
    "parse_jobs",
    "parse_nodes",
    "parse_restarts",
    "restarts_argv",
    "usable",
]

#: squeue ``--Format`` fields (22.05 to 26.05): ``JobArrayID`` the id to act on (``123``,
#: ``123_4`` for an array task; a folded pending line ``123_[5-9]`` too), ``JobID`` the
#: unique job id, user, account, QOS, state (long), reason, priority, node count, the fields
#: the job's GPUs are counted from (:data:`hpclaunch.slurm.tres.GPU_FIELDS`), node list
#: (compressed), start time (the expected start of a pending job, ``N/A`` if unknown),
#: partition; the command (the batch script's path and arguments, which may hold ``|``)
#: last.
JOB_FIELDS = (
    "JobArrayID",
    "JobID",
    *OWNER_AND_STATE,
    "NumNodes",
    *GPU_FIELDS,
    "NodeList",
    "StartTime",
    "Partition",
    "Command",
)
#: The states the arbiter reads (pending and running work), and those of running jobs.
JOB_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
RUNNING_STATES = ("RUNNING", "CONFIGURING")
_DOWN = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER", "FUTURE", "MAINT", "RESERVED")


@dataclass(frozen=True)
class ClusterJob:
    """A pending or running job as the arbiter sees it.

    Attributes:
        job_id: ``%i``: what ``scancel``/``scontrol requeue`` get (one task of an array).
        unique_id: ``%A``: Slurm's own id of this job (of this array task).
        gpus: GPUs of the whole job, held (running) or asked for (pending), however it
            asked for them (:func:`hpclaunch.slurm.tres.job_gpus`).
        hosts: The expanded node list (running jobs); ``()`` while pending.
        start: The start of the current run (running jobs; epoch seconds), else ``None``.
        command: ``%o``: the batch script's path and its arguments, joined by spaces.
    """

    job_id: str
    unique_id: str
    user: str
    account: str | None
    qos: str | None
    state: str
    reason: str | None
    priority: int
    nodes: int
    gpus: int
    hosts: tuple[str, ...]
    start: float | None
    partition: str | None
    command: str | None

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node (rounded up where a ``--gpus`` job's are spread unevenly: the
        arbiter then counts a node's share of such a job as the largest one)."""
        return -(-self.gpus // max(1, self.nodes))

    @property
    def partitions(self) -> frozenset[str]:
        return frozenset(p for p in (self.partition or "").split(",") if p)


@dataclass(frozen=True)
class NodeGpus:
    """One node's GPUs: ``total`` configured, ``used`` allocated; ``usable`` for new jobs."""

    name: str
    total: int
    used: int
    partitions: frozenset[str]
    usable: bool

    @property
    def free(self) -> int:
        return max(0, self.total - self.used) if self.usable else 0


def jobs_argv() -> list[str]:
    """The one squeue call for every pending and running job of the cluster."""
    return [
        "squeue",
        "--noheader",
        f"--states={','.join(JOB_STATES)}",
        f"--Format={long_format(JOB_FIELDS)}",
    ]


def restarts_argv() -> list[str]:
    """How often each running job has been restarted (requeued), by Slurm's count.

    ``squeue -o`` has no letter for it; ``-O RestartCnt`` does (22.05). ``Field:|`` prints
    the field unpadded with ``|`` after it; ``JobArrayID`` is ``-o %i`` (``123_4``).
    """
    return [
        "squeue",
        "--noheader",
        f"--states={','.join(RUNNING_STATES)}",
        "--Format=JobArrayID:|,RestartCnt:|",
    ]


def parse_restarts(stdout: str) -> dict[str, int]:
    """Job id -> restarts, from :func:`restarts_argv`'s lines (``6692|2|``)."""
    out = {}
    for line in stdout.splitlines():
        job_id, _, rest = line.strip().partition("|")
        count = to_int(rest.split("|", 1)[0])
        if job_id[:1].isdigit() and count is not None:
            out[job_id] = count
    return out


def nodes_argv() -> list[str]:
    """The one call for every node's GPUs (``scontrol`` has no ``--json`` in 22.05)."""
    return ["scontrol", "show", "nodes", "--oneliner"]


def parse_jobs(stdout: str, gres: str = "gpu") -> list[ClusterJob]:
    """Parse :func:`jobs_argv`'s lines (``gres``: the site's GPU GRES name); lines that do
    not fit are skipped."""
    width = len(JOB_FIELDS)
    jobs = []
    for line in stdout.splitlines():
        cols = [c.strip() for c in line.split("|", width - 1)]
        if len(cols) != width or not cols[0][:1].isdigit():
            continue
        job_id, unique, user, account, qos, state, reason, prio, nodes = cols[:9]
        gpu_fields = cols[9:14]
        hosts, start, partition, command = cols[14:]
        state = state.split()[0].upper() if state else "UNKNOWN"
        running = state in ("RUNNING", "CONFIGURING", "COMPLETING")
        node_count = to_int(nodes) or 1
        jobs.append(
            ClusterJob(
                job_id=job_id,
                unique_id=unique,
                user=user,
                account=field(account),
                qos=field(qos),
                state=state,
                reason=field(reason),
                priority=to_int(prio) or 0,
                nodes=node_count,
                gpus=gpus_of_fields(gpu_fields, nodes=node_count, gres=gres),
                hosts=expand_hosts(hosts) if running and field(hosts) else (),
                start=slurm_epoch(field(start)) if running else None,
                partition=field(partition),
                command=field(command),
            )
        )
    return jobs


def parse_nodes(stdout: str, gres: str = "gpu") -> list[NodeGpus]:
    """Parse ``scontrol show nodes --oneliner``: one node per line, ``Key=Value`` words."""
    nodes = []
    for line in stdout.splitlines():
        fields = key_values(line)
        name = fields.get("NodeName")
        if not name:
            continue
        state = fields.get("State", "")
        nodes.append(
            NodeGpus(
                name=name,
                total=gres_count(fields.get("Gres", ""), gres),
                used=tres_value(fields.get("AllocTRES", ""), f"gres/{gres}") or 0,
                partitions=frozenset(p for p in fields.get("Partitions", "").split(",") if p),
                usable=usable(state),
            )
        )
    return nodes


def usable(state: str) -> bool:
    """Whether a node in ``state`` (``MIXED``, ``IDLE+DRAIN``, ``DOWN*``) takes new jobs."""
    return not any(flag in state.upper() for flag in _DOWN)


def expand_hosts(compressed: str) -> tuple[str, ...]:
    """``n[1-3],n5`` → ``("n1", "n2", "n3", "n5")`` (python-hostlist, never by hand)."""

    return tuple(hostlist.expand_hostlist(compressed))
