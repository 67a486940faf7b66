"""pyslurm's job and accounting records as hpclaunch's own types (pure: no RPC)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.slurm_text import ended_by, is_work_step, step_out_of_memory
from hpclaunch.slurm.jobs import JobInfo, JobState, parse_state
from hpclaunch.slurm.queue import QueueRow
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.slurm.text import field
from hpclaunch.slurm.times import format_elapsed
from hpclaunch.slurm.tres import gpus_per_node

__all__ = [
    "db_id",
    "db_info",
    "live_fields",
    "live_id",
    "live_ids",
    "queue_row",
    "task_id",
    "user_name",
]


def user_name() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def live_id(job: Any) -> str:
    """The id as squeue prints it: ``123``, or ``123_4`` for a task of an array."""
    if not job.array_id:
        return str(job.id)
    return f"{job.array_id}_{task_id(job)}"


def task_id(job: Any) -> int:
    """The task id of an array task's record. pyslurm 25.11 reads a task id of 0 as "not
    set" (``u32_parse``: zero is no value), as it reads the not-a-task value of the record
    that holds an array's tasks not yet started; a record with no waiting tasks is a task."""
    return 0 if job.array_task_id is None else int(job.array_task_id)


def live_ids(job: Any) -> list[tuple[str, bool]]:
    """(id, is a not yet started array task) of every job ``job`` stands for: the tasks of
    an array that have not started are one record (``array_tasks_waiting`` ``3-7``), which
    squeue --array prints one line per task."""
    waiting = job.array_tasks_waiting
    if not job.array_id or not waiting:
        return [(live_id(job), False)]
    return [(f"{job.array_id}_{task}", True) for task in task_ids(waiting)]


def live_fields(job: Any, gres: str, waiting: bool) -> dict[str, Any]:
    """A :class:`JobInfo`'s fields but its ref, from a job-list record. The record of an
    array's tasks not yet started stands for each of them (a cancelled array's too: squeue
    --array prints its state on every task's line)."""
    state = parse_state(job.state)
    finished = state.is_finished
    return {
        "state": state,
        "name": job.name or None,
        "reason": _reason(job.state_reason),
        "nodes": None if waiting else field(job.allocated_nodes or ""),
        "exit_code": job.exit_code if finished else None,
        "exit_signal": (job.exit_code_signal or None) if finished else None,
        "elapsed": format_elapsed(0 if waiting else job.run_time),
        "source": "squeue",
        "qos": job.qos,
        "node_count": job.num_nodes,
        "gpus": _gpus(job.allocated_tres or job.requested_tres, gres),
        "restarts": job.requeue_count,
        # squeue's StartTime of a pending job: when Slurm expects it to start (0: no plan).
        "expected_start": (
            datetime.fromtimestamp(job.start_time).isoformat()
            if state is JobState.PENDING and job.start_time
            else None
        ),
    }


def queue_row(job: Any, *, job_id: str | None = None) -> QueueRow:
    """squeue's line for a job-list record (:data:`hpclaunch.slurm.queue.QUEUE_FORMAT`): an
    array's tasks not yet started are one row, ``123_[4-9%2]``, as squeue folds them."""

    if job_id is None:
        job_id = live_id(job)
        waiting = job.array_tasks_waiting
        if job.array_id and waiting:
            limit = f"%{job.array_tasks_parallel}" if job.array_tasks_parallel else ""
            job_id = f"{job.array_id}_[{waiting}{limit}]"
    submit = job.submit_time
    pending = str(job.state) == "PENDING"
    return QueueRow(
        job_id=job_id,
        user=job.user_name or str(job.user_id),
        account=job.account or None,
        qos=job.qos or None,
        state=str(job.state),
        reason=_reason(job.state_reason),
        priority=job.priority,
        # squeue %V: the cluster's local time, ISO 8601 without a zone.
        submit=None if not submit else datetime.fromtimestamp(submit).isoformat(),
        nodes=job.num_nodes or 1,
        gpus=_job_gpus(job),
        nice=job.nice or 0,
        partition=job.partition or None,
        elapsed=format_elapsed(0 if pending else job.run_time or 0),
        name=job.name or "",
        # squeue's StartTime: for a pending job the scheduler's estimate (0: none yet).
        start=datetime.fromtimestamp(job.start_time).isoformat() if job.start_time else None,
    )


def _job_gpus(job: Any, gres: str = "gpu") -> int:
    """The GPUs a job holds (running) or asks for (pending), as squeue's ``tres-alloc``
    gives them (:func:`hpclaunch.slurm.tres.job_gpus`): the allocated TRES, else the
    requested ones, which count ``--gpus`` and ``--gpus-per-task`` too (recorded on 25.11).
    Where the site does not track ``gres/gpu``, the per-node request times the nodes."""
    counted = _gpus(job.allocated_tres or job.requested_tres, gres)
    if counted:
        return counted
    return _gpus_per_node(job.gres_per_node) * (job.num_nodes or 1)


def _gpus_per_node(gres_per_node: Mapping[str, int] | None) -> int:
    """GPUs per node from pyslurm's ``gres_per_node`` (``{"gres/gpu": 4}``; with a type,
    ``{"gres/gpu:a100": 2}``): put back into squeue's %b text (``gres/gpu:4``, seen on
    25.11) and read by the same rule as squeue's."""

    asked = (gres_per_node or {}).items()
    return gpus_per_node(",".join(f"{name}:{count}" for name, count in asked))


def db_id(record: Any) -> list[str]:
    """The ids an accounting record answers for, as sacct prints them (one per task of the
    tasks of an array that never started, which slurmdbd keeps as one record)."""
    if not record.array_id:
        return [str(record.id)]
    waiting = record.array_tasks_waiting
    if waiting:
        return [f"{record.array_id}_{task}" for task in task_ids(waiting)]
    return [f"{record.array_id}_{task_id(record)}"]


def db_info(ref: JobRef, record: Any, gres: str) -> JobInfo:
    state = parse_state(record.state)
    finished = state.is_finished
    info = JobInfo(
        ref=ref,
        state=state,
        name=record.name or None,
        reason=_reason(record.state_reason),
        nodes=field(record.nodelist or ""),
        exit_code=record.exit_code if finished else None,
        exit_signal=(record.exit_code_signal or None) if finished else None,
        elapsed=format_elapsed(record.elapsed_time),
        source="sacct",
        qos=record.qos,
        node_count=record.num_nodes,
        gpus=_gpus(record.allocated_tres or record.requested_tres, gres),
        restarts=record.requeue_count,
    )
    # The allocation says 0:0 for a job Slurm cancelled or timed out; its batch step holds
    # the signal: the same rule as for sacct's lines.
    batch = record.steps.get("batch") if record.steps else None
    batch_exit = None if batch is None else (batch.exit_code, batch.exit_code_signal or None)
    return step_out_of_memory(ended_by(info, batch_exit), _oom_step(ref, record))


def _oom_step(ref: JobRef, record: Any) -> str | None:
    """The first srun step of ``record`` that ended OUT_OF_MEMORY, as sacct names it
    (``123.0``), if any (see :func:`~hpclaunch.backends.slurm_text.step_out_of_memory`)."""
    for key, step in sorted((record.steps or {}).items(), key=lambda kv: str(kv[0])):
        if is_work_step(str(key)) and parse_state(step.state or "") is JobState.OUT_OF_MEMORY:
            return f"{ref.job_id}.{key}"
    return None


def _reason(text: str | None) -> str | None:
    return field(text or "")


def _gpus(tres: Any, gres: str) -> int | None:
    """GPUs in a pyslurm TrackableResources (``.gres``: name → resource with ``count``)."""
    if tres is None:
        return None
    found = tres.gres.get(gres) if tres.gres else None
    return int(found.count) if found is not None else 0
