"""Run again the points of a sweep that never ran: ``hpclaunch sweep rerun ID``.

slurmctld killed while tasks start forgets what it launched in its last seconds (it saves
its state at most every 5 s) and launches some tasks again: the node's slurmd, which still
has that job id, refuses ("Duplicate jobid"), drains, and the task ends FAILED before its
batch script ever ran (seen on 25.11 in CI). :func:`~hpclaunch.ops.sweep_status.sweep_status`
marks such points (``never_ran``); this submits them again, one sbatch per array they
belong to: the same script with ``--array=<their task ids>`` and the array's offset, so
each task runs the same point in the same ``tasks/<point>/`` directory. The new arrays are
added to the sweep record after the others (a point's newest task is the one ``sweep
status`` shows) and to the history.

A point never runs twice: the task step holds a lock per point and skips a point whose
ledger says it completed (:mod:`hpclaunch.supervise.sweep_task`). A rerun whose sbatch
reply was lost, or whose record was not written, is found by its tag and not submitted
again: the tag ``<sweep id>-r<n>`` counts the reruns recorded so far.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from hpclaunch import jobdir
from hpclaunch.backends.arrays import some_tasks
from hpclaunch.backends.base import JobRef
from hpclaunch.errors import HistoryError
from hpclaunch.ops.sweep_status import sweep_status
from hpclaunch.store.history import find_record, record_submission
from hpclaunch.store.sweeps import SweepArray, SweepRecord, find_sweep, save_sweep

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context

__all__ = ["Rerun", "rerun_sweep"]


@dataclass(frozen=True)
class Rerun:
    """What :func:`rerun_sweep` did: the points submitted again, and their new arrays."""

    record: SweepRecord
    points: tuple[int, ...]
    arrays: tuple[SweepArray, ...]

    @property
    def points_text(self) -> str:
        """The first five points and how many more, for a one-line message."""

        return some_tasks([str(p) for p in self.points])


def rerun_sweep(context: Context, sweep_id: str) -> Rerun:
    """Submit again every point of the sweep ``sweep_id`` that never ran (see the module
    docstring); nothing when there is none.

    Raises:
        JobNotFound: No such sweep in this machine's records.
        SubmissionError: Slurm refused a rerun (the ones before it stay, recorded).
    """
    record = find_sweep(sweep_id)
    status = sweep_status(context.backend, record, metrics=False)
    lost = [t.point for t in status.tasks if t.never_ran]
    done: list[SweepArray] = []
    for array, indices in _by_array(record, lost).items():
        tag = f"{record.sweep_id}-r{sum(1 for a in record.arrays if a.tasks is not None)}"
        tasks = tuple(i - array.offset for i in indices)
        ref = context.backend.find_submission(tag) or _submit(context, record, array, tasks, tag)
        rerun = SweepArray(ref.job_id, array.offset, array.count, tasks, array.script)
        record = replace(record, arrays=(*record.arrays, rerun))
        try:
            save_sweep(record)
        except OSError as exc:  # submitted: the tag finds it next time
            context.warn(f"could not record rerun {ref.job_id}: {exc}")
        _remember(context, array, ref, tag)
        done.append(rerun)
    return Rerun(record, tuple(lost), tuple(done))


def _by_array(record: SweepRecord, points: list[int]) -> dict[SweepArray, list[int]]:
    """The task indices of the lost points (a packed sweep's: their packs, each once; the
    pack skips its points that completed) under the first-submitted array that holds
    them (its script and offset run them)."""
    groups: dict[SweepArray, list[int]] = {}
    for index in sorted({point // record.pack for point in points}):
        for array in record.arrays:
            if array.tasks is None and array.offset <= index < array.offset + array.count:
                groups.setdefault(array, []).append(index)
                break
    return groups


def _submit(
    context: Context, record: SweepRecord, array: SweepArray, tasks: tuple[int, ...], tag: str
) -> JobRef:
    script = array.script or f"{record.job_dir.rstrip('/')}/{jobdir.SCRIPT}"
    limit = f"%{record.max_concurrent}" if record.max_concurrent else ""
    argv = (
        "sbatch",
        "--parsable",
        f"--array={','.join(map(str, tasks))}{limit}",
        f"--comment=hpclaunch:{tag}",
        script,
        str(array.offset),
    )
    ref = context.backend.submit_script(script, argv, tag, record.name)
    return JobRef(ref.job_id, ref.cluster or record.cluster)


def _remember(context: Context, array: SweepArray, ref: JobRef, tag: str) -> None:
    """A history row for the rerun, the array's own with the new job id and tag (so
    ``status``, ``logs`` and ``cancel`` know it)."""

    first = find_record(job_id=array.job_id)
    if first is None:
        return
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    row = replace(
        first,
        job_id=ref.job_id,
        submission_id=tag,
        submitted_at=now,
        state=None,
        attempts=None,
        exit_code=None,
        dependency=None,
    )
    try:
        record_submission(row)
    except HistoryError as exc:
        context.warn(f"could not record rerun {ref.job_id} in the history: {exc}")
