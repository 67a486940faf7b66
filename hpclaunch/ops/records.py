"""A job's record in the history (or its sweep's), the files in its job directory, and
storing a final state Slurm's answer showed: what the job commands (status, logs, events,
top, history) share."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from hpclaunch.errors import HistoryError, JobNotFound, TransportError
from hpclaunch.jobdir import JobDir
from hpclaunch.ops.notify import notify_from_here
from hpclaunch.store.history import find_record, history_path, record_state
from hpclaunch.store.sweeps import task_submission

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = [
    "ANOTHER_JOB",
    "another_job_reason",
    "find_job_record",
    "names_another_job",
    "read_job_file",
    "remember_end",
    "remember_finished",
    "runs_sidecar",
    "submission_record",
]


def submission_record(job_id: str, command: str, extra_hint: str = "") -> SubmissionRecord:
    """The history's record of ``job_id`` (or of the sweep task it names).

    Raises:
        JobNotFound: Not in the history; the hint names ``hpclaunch <command>``.
    """
    record = find_job_record(job_id)
    if record is None:
        raise JobNotFound(
            f"job {job_id} is not in the hpclaunch history ({history_path()})",
            hint=f"'hpclaunch {command}' knows the jobs submitted with 'hpclaunch submit' by "
            f"this user on this machine ('hpclaunch status' lists them){extra_hint}",
        )
    return record


def find_job_record(job_id: str) -> SubmissionRecord | None:
    """The history's record of ``job_id``, or of the sweep task it names, or ``None``."""
    return find_record(job_id=job_id) or _sweep_task(job_id)


def _sweep_task(job_id: str) -> SubmissionRecord | None:
    """A sweep's array task (``123_4``), pointed at its own directories."""
    if "_" not in job_id:
        return None

    return task_submission(job_id)


def read_job_file(ctx: Context, record: SubmissionRecord, name: str) -> str | None:
    """``name`` in the job's directory, read where the job runs; ``None`` if it cannot be."""
    try:
        return ctx.runner.read_file(posixpath.join(record.job_dir, name))
    except TransportError:
        return None


def runs_sidecar(read: Callable[[str], str], record: SubmissionRecord) -> bool | None:
    """Whether the job's batch script starts the sidecar (``launcher`` other than ``none``);
    ``None`` when the script cannot be read. ``read`` reads a file where the job runs."""
    try:
        script = read(JobDir(record.job_dir).script)
    except (TransportError, OSError):
        return None
    # The script execs "<python> -m hpclaunch.supervise run ..." (templates/command.sh.j2).
    return "-m hpclaunch.supervise run " in script


#: How :func:`another_job_reason` begins.
ANOTHER_JOB = "Slurm no longer has this job"


def names_another_job(info: JobInfo, record: SubmissionRecord | None) -> bool:
    """Whether Slurm's job of a recorded id is another job than the one recorded.

    Slurm gives an id again after its state is lost (slurmctld started with ``-c``, or a new
    StateSaveLocation), once MaxJobId wraps round to FirstJobId (slurm.conf), and on another
    cluster. The job name hpclaunch set (``--job-name``) tells them apart: the script's
    ``--comment=hpclaunch:<key>`` would be surer, but sacct shows a comment only where
    slurmdbd stores it (``AccountingStoreFlags=job_comment``), which few sites set.
    """
    return record is not None and bool(info.name) and info.name != record.name


def another_job_reason(info: JobInfo) -> str:
    """What to say where a recorded id names another job in Slurm now."""
    return (
        f"{ANOTHER_JOB}: id {info.ref.job_id} now names another job "
        f"({info.name!r}, {info.state.value}); as hpclaunch recorded it"
    )


def remember_end(ctx: Context, infos: Iterable[JobInfo]) -> None:
    """Store the end of jobs one followed to it (``submit --wait``, a pipeline's wait), each
    found in the history by its id; a history that cannot be read only leaves it unsaid."""
    ended = list(infos)
    records: dict[str, SubmissionRecord] = {}
    for info in ended:
        try:
            record = find_record(job_id=info.ref.job_id)
        except HistoryError:
            return
        if record is not None:
            records[record.job_id] = record
    remember_finished(ctx, ended, records)


def remember_finished(
    ctx: Context, infos: Iterable[JobInfo], records: Mapping[str, SubmissionRecord]
) -> None:
    """Store the final state, attempts and exit code of the recorded jobs that Slurm's
    answer shows finished, once per job (no extra Slurm call; a failure only warns)."""
    infos = list(infos)
    ended: set[str] = set()
    for info in infos:
        record = records.get(info.ref.job_id)
        if record is None or not info.state.is_finished:
            continue
        if names_another_job(info, record):
            continue
        attempts = None if info.restarts is None else info.restarts + 1
        seen = (info.state.value, attempts, info.exit_code)
        if (record.state, record.attempts, record.exit_code) == seen:
            continue
        if record.state != info.state.value:
            ended.add(record.job_id)
        try:
            record_state(
                record.job_id, state=info.state.value, attempts=attempts, exit_code=info.exit_code
            )
        except HistoryError as exc:  # the history is a convenience: the answer is still shown
            ctx.warn(f"could not update the history: {exc}")
            break
    if any(r.notify for r in records.values()):
        notify_from_here(ctx, infos, records, ended)
