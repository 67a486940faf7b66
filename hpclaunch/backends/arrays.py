"""One :class:`~hpclaunch.slurm.jobs.JobInfo` for a whole job array, from its tasks' infos.

``hpclaunch status 123`` for an array ``123`` gets one line per task from squeue (``--array``)
and sacct (``123_0``, ``123_1``, ...; never a line ``123``). :func:`summarise_array` folds
them into one answer for the array, so that no task's state is silently dropped:

* state: RUNNING while any task runs (or is CONFIGURING, COMPLETING, ...); else PENDING while
  any task can still run (pending, requeued, held, suspended, unknown); else COMPLETED when
  every task completed, otherwise the worst final state of a task in :data:`WORST_FIRST`;
* reason: the count of tasks per state, ``array: 3 running, 5 pending, 1 completed, 1 failed``;
* node_count, gpus: summed over the running tasks (``None`` when none runs);
* restarts: summed over the tasks; exit_code: the first non-zero one (by task id), ``0`` when
  every task completed; elapsed: ``None`` (the tasks ran at different times).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from hpclaunch.backends.base import JobRef
from hpclaunch.slurm.jobs import JobInfo, JobState

__all__ = [
    "ACTIVE_STATES",
    "WORST_FIRST",
    "held_problem",
    "some_tasks",
    "summarise_array",
    "task_index",
]

#: Task states that count as "the array runs".
ACTIVE_STATES = frozenset(
    {
        JobState.CONFIGURING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.RESIZING,
        JobState.SIGNALING,
        JobState.STAGE_OUT,
    }
)
#: A finished array that did not complete takes the first of its tasks' final states here.
#: The user's own code first (it needs their fix), then the machine's failures, then limits
#: hit, then deliberate stops; COMPLETED only when every task completed.
WORST_FIRST = (
    JobState.FAILED,
    JobState.OUT_OF_MEMORY,
    JobState.NODE_FAIL,
    JobState.BOOT_FAIL,
    JobState.TIMEOUT,
    JobState.DEADLINE,
    JobState.CANCELLED,
    JobState.REVOKED,
    JobState.PREEMPTED,
    JobState.COMPLETED,
)


def held_problem(held: Mapping[str, str]) -> str | None:
    """What ``sweep status`` says of tasks that wait on a hold (task id → squeue's reason).

    Slurm requeues and holds a job whose launch failed ("launch failed requeued held", a
    user's hold: its owner may release it; job_mgr.c, 25.11). A slurmctld restarted after
    losing its last seconds of state does that to the tasks it starts a second time while
    their first copies are still ending on the node (slurmd: "already running, do not
    launch second copy"), and drains that node ("Duplicate jobid").
    """
    if not held:
        return None
    ids = sorted(held, key=lambda job: [int(x) for x in job.split("_")])
    reasons = ", ".join(sorted(set(held.values())))
    return (
        f"{len(ids)} task(s) wait on a hold ({reasons}): {some_tasks(ids)}. 'scontrol release "
        f"{' '.join(ids)}' lets them run (a hold an admin set, JobHeldAdmin, needs the admin)"
    )


def some_tasks(job_ids: Sequence[str]) -> str:
    """The first five of ``job_ids`` and how many more, for a one-line message."""
    more = f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else ""
    return ", ".join(job_ids[:5]) + more


def task_index(ref: JobRef) -> int:
    """The task id of ``123_4`` (4); ``-1`` for anything else."""
    _, _, task = ref.job_id.partition("_")
    return int(task) if task.isdigit() else -1


def summarise_array(ref: JobRef, tasks: Iterable[JobInfo], note: str | None = None) -> JobInfo:
    """One info for array ``ref`` from its tasks' infos (see the module docstring).

    ``note`` (e.g. why sacct could not be asked) is added to the reason.
    """
    ordered = sorted(tasks, key=lambda info: task_index(info.ref))
    states = [info.state for info in ordered]
    running = [info for info in ordered if info.state in ACTIVE_STATES]
    if running:
        state = JobState.RUNNING
    elif any(not s.is_finished for s in states):
        state = JobState.PENDING
    else:
        state = min(states, key=_badness, default=JobState.UNKNOWN)
    codes = [info.exit_code for info in ordered if info.exit_code]
    all_completed = bool(states) and all(s is JobState.COMPLETED for s in states)
    signals = [info.exit_signal for info in ordered if info.exit_signal]
    qos = {info.qos for info in ordered}
    reason = "array: " + _counts(states)
    return JobInfo(
        ref=ref,
        state=state,
        name=next((info.name for info in ordered if info.name), None),
        reason=f"{reason} ({note})" if note else reason,
        exit_code=codes[0] if codes else (0 if all_completed else None),
        exit_signal=signals[0] if signals else None,
        source="squeue" if any(info.source == "squeue" for info in ordered) else "sacct",
        qos=qos.pop() if len(qos) == 1 else None,
        node_count=_sum([info.node_count for info in running]),
        # Running: what the running tasks hold; else what one task holds or asks for (a
        # finished job shows the GPUs it had: an array's 0 read as "no GPUs", issue 27).
        gpus=_sum([info.gpus for info in running]) if running else _most(ordered),
        restarts=_sum([info.restarts for info in ordered]),
    )


def _badness(state: JobState) -> int:
    return WORST_FIRST.index(state) if state in WORST_FIRST else len(WORST_FIRST)


def _counts(states: Sequence[JobState]) -> str:
    """``3 running, 5 pending, 1 completed, 1 failed``: running, then waiting, then final
    states, each group in the order of :class:`JobState`."""
    order = list(JobState)

    def key(state: JobState) -> tuple[int, int]:
        group = 0 if state in ACTIVE_STATES else 2 if state.is_finished else 1
        return group, order.index(state)

    counted = Counter(states)
    return ", ".join(
        f"{counted[s]} {s.value.lower().replace('_', ' ')}" for s in sorted(counted, key=key)
    )


def _most(tasks: Sequence[JobInfo]) -> int | None:
    known = [info.gpus for info in tasks if info.gpus is not None]
    return max(known) if known else None


def _sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
