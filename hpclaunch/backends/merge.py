"""One view of many jobs from two sources: the controller's live jobs (squeue, or
pyslurm's job list) and the accounting database (sacct, or pyslurm.db), merged the same way
whichever backend asked them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from hpclaunch.backends.arrays import summarise_array
from hpclaunch.backends.base import JobRef
from hpclaunch.backends.slurm_text import is_waiting_reason
from hpclaunch.slurm.job_ids import JOB_ID_FORMS, is_local_job_id, is_slurm_job_id
from hpclaunch.slurm.jobs import JobInfo, JobState

__all__ = ["Accounting", "Live", "merge_status"]

#: The live jobs among ``by_id`` (job id -> ref), array tasks keyed by their own ``123_4`` ref.
Live = Callable[[Mapping[str, JobRef]], dict[JobRef, JobInfo]]
#: The accounting records of ``by_id``, and the problem when accounting could not answer.
Accounting = Callable[[Mapping[str, JobRef]], tuple[dict[JobRef, JobInfo], str | None]]


def merge_status(
    refs: Sequence[JobRef], live: Live, accounting: Accounting
) -> dict[JobRef, JobInfo]:
    """The state of every job in ``refs``: one ``live`` call for all of them; one
    ``accounting`` call for those the controller did not know or saw finished (for their
    exit codes). Unknown to both: ``JobState.UNKNOWN``.

    An array's own id (``123``, answered with task lines ``123_N``) gets one info that sums
    up its tasks (:func:`~hpclaunch.backends.arrays.summarise_array`). Arrays are always
    asked of accounting too: the controller cannot tell which of their tasks it forgot after
    MinJobAge, so each task is the live view when there is one, else the accounting one.
    """
    refs = list(dict.fromkeys(refs))
    # squeue refuses a whole --jobs list for one id it cannot read ("Invalid job id
    # specified"): the local backend's ids and malformed ones are never sent.
    foreign = {ref: _not_slurms(ref) for ref in refs if not is_slurm_job_id(ref.job_id)}
    refs = [ref for ref in refs if ref not in foreign]
    if not refs:
        return foreign
    by_id = {ref.job_id: ref for ref in refs}
    infos = live(by_id)
    ask_sacct = [ref for ref in refs if ref not in infos or infos[ref].state.is_finished]
    if ask_sacct:
        accounted, problem = accounting({r.job_id: r for r in ask_sacct})
        for ref in ask_sacct:
            known, found = infos.get(ref), accounted.get(ref)
            tasks = [] if known else _merge_tasks(ref, infos, accounted)
            if known and found:  # squeue's view, with sacct's exit code
                infos[ref] = _with_exit(known, found)
            elif tasks:
                # An array: its tasks, never a line of accounting's for the bare id. Slurm
                # 22.05's slurmdbd briefly holds a record of the task whose raw id is the
                # array's ("17|FAILED|78:0|...|allocation", no task id, QOS Unknown) while
                # the other task runs: taken for the array, it ended a sweep's wait with a
                # task still RUNNING (clean-clone CI on 22.05, 2026-11-29).
                infos[ref] = summarise_array(ref, tasks, problem)
            elif found:
                infos[ref] = found
            elif not known:
                reason = problem or "unknown to Slurm's queue and accounting"
                infos[ref] = JobInfo(ref, JobState.UNKNOWN, reason=reason)
    return {**foreign, **{ref: _finished_view(infos[ref]) for ref in refs}}


def _not_slurms(ref: JobRef) -> JobInfo:
    """The answer for an id that is not Slurm's."""
    if is_local_job_id(ref.job_id):
        why = "a job of the local backend, not Slurm's (Session(backend='local'), --backend local)"
    else:
        why = f"not a Slurm job id ({JOB_ID_FORMS})"
    return JobInfo(ref, JobState.UNKNOWN, reason=why)


def _finished_view(info: JobInfo) -> JobInfo:
    """A finished job as status shows it: COMPLETED's exit code, no stale waiting reason."""
    info = _failed_exit(_completed_exit(info))
    if info.state.is_finished and info.reason and is_waiting_reason(info.reason):
        info = replace(info, reason=None)
    return info


def _failed_exit(info: JobInfo) -> JobInfo:
    """FAILED means a non-zero exit code (squeue(1)): a FAILED job with exit 0 and no signal
    has no exit recorded yet, and shows none rather than a wrong 0 (a clean-clone CI run on
    Slurm 22.05 in docker printed "ended FAILED, exit code 0" for a job that exited 3)."""
    if info.state is JobState.FAILED and (info.exit_code, info.exit_signal) == (0, None):
        return replace(info, exit_code=None)
    return info


def _completed_exit(info: JobInfo) -> JobInfo:
    """COMPLETED means every process ended with exit code 0 (squeue(1), JOB STATE CODES,
    22.05): say so when squeue already lists the job COMPLETED but slurmdbd has not yet
    given sacct its end (seen on the local cluster: exit code None for a moment)."""
    if info.state is JobState.COMPLETED and info.exit_code is None:
        return replace(info, exit_code=0)
    return info


def _with_exit(known: JobInfo, accounted: JobInfo) -> JobInfo:
    """The controller's view with accounting's exit code, and its OUT_OF_MEMORY for a job
    the controller calls FAILED whose srun step ran out of memory (the controller does not
    look at steps: :func:`~hpclaunch.backends.slurm_text.step_out_of_memory`)."""
    ended = replace(known, exit_code=accounted.exit_code, exit_signal=accounted.exit_signal)
    if known.state is JobState.FAILED and accounted.state is JobState.OUT_OF_MEMORY:
        return replace(ended, state=accounted.state, reason=accounted.reason)
    return ended


def _merge_tasks(
    array: JobRef, live: Mapping[JobRef, JobInfo], accounted: Mapping[JobRef, JobInfo]
) -> list[JobInfo]:
    """The tasks (``<id>_N``) of ``array`` in squeue's and sacct's answers, one per task:
    squeue's view (with sacct's exit code once finished), else sacct's."""
    prefix = f"{array.job_id}_"
    merged: dict[JobRef, JobInfo] = {}
    for ref, known in live.items():
        if ref.job_id.startswith(prefix):
            found = accounted.get(ref)
            ended = known.state.is_finished and found is not None and found.state.is_finished
            merged[ref] = _with_exit(known, found) if ended and found else known
    for ref, found in accounted.items():
        if ref.job_id.startswith(prefix) and ref not in merged:
            merged[ref] = found
    return list(merged.values())
