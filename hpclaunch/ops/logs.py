"""A job's logs (``hpclaunch logs``, ``submit --follow``, ``Job.logs``): what it has
written so far, or every line as it comes, across requeues, until the job ends.

Each attempt (a requeue starts a new one) appends to ``<log dir>/attempt-N.log``; Slurm's
own lines for the job (time limit, OOM kill) go to ``<job dir>/slurm-<id>.out``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from hpclaunch.errors import HpclaunchError
from hpclaunch.ops.logtail import LogTail, RemoteFiles, attempt_logs, attempt_of, slurm_messages
from hpclaunch.ops.records import remember_end, submission_record
from hpclaunch.slurm.jobs import watch
from hpclaunch.store.sweeps import list_sweeps

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["LogFollower", "attempts_written", "log_record", "read_logs", "slurm_lines"]


def log_record(job_id: str) -> SubmissionRecord:
    """The record of ``job_id``, whose logs hpclaunch knows where to find.

    Raises:
        JobNotFound: Not in the history.
        HpclaunchError: ``job_id`` is a sweep's array: each task has its own log.
    """
    _refuse_array(job_id)
    return submission_record(
        job_id, "logs", f"; for another job, 'scontrol show job {job_id}' shows its StdOut path"
    )


def _refuse_array(job_id: str) -> None:
    """A sweep's array id has no log of its own: each task has its own."""
    if "_" in job_id:
        return

    for sweep in list_sweeps():
        for array in sweep.arrays:
            if array.job_id == job_id:
                raise HpclaunchError(
                    f"job {job_id} is an array of sweep {sweep.sweep_id} ({array.count} tasks): "
                    f"each task has its own log",
                    hint=f"use {job_id}_<task>, e.g. 'hpclaunch logs {job_id}_0' "
                    f"('hpclaunch sweep status {sweep.sweep_id}' lists the tasks)",
                )


def tail_of(ctx: Context, log_dir: str, attempt: int | None = None) -> LogTail:
    """A reader of the attempt logs in ``log_dir`` (over SSH when Slurm is remote)."""
    return LogTail(log_dir, attempt=attempt, files=remote_files(ctx))


def read_logs(ctx: Context, log_dir: str, attempt: int | None = None) -> list[tuple[int, str]]:
    """Every line written so far, as ``(attempt, line)``, oldest attempt first (``attempt``:
    that attempt's only); a last line without its newline is included."""
    tail = tail_of(ctx, log_dir, attempt)
    return [(n, line) for n, lines in tail.read_new_by_attempt(final=True) for line in lines]


def attempts_written(ctx: Context, log_dir: str) -> list[int]:
    """The attempts that have a log in ``log_dir``."""
    return [attempt_of(p) for p in attempt_logs(log_dir, remote_files(ctx))]


def slurm_lines(ctx: Context, job_dir: str, job_id: str) -> list[str]:
    """What Slurm itself wrote for the job (``<job dir>/slurm-<id>.out``: a chdir that
    failed, the time limit, an OOM kill): none if nothing."""
    return slurm_messages(job_dir, job_id, remote_files(ctx))


class LogFollower:
    """Iterates over a job's log lines as ``(attempt, line)`` while it runs, across requeues
    (PREEMPTED/REQUEUED → PENDING → RUNNING keeps the id: only a final state ends it), then
    the last ones; :attr:`final` is then the job's end, stored in the history. Each poll is
    one status call at the site's pace.

    Args:
        ctx: The session.
        ref: The job.
        log_dir: Its log directory (``None``: follow the state only).
        attempt: Only this attempt's lines.
        timeout: Give up after this many seconds (:class:`WatchTimeout`).
        on_change: Called with the job's info when its state or reason changes.
    """

    def __init__(
        self,
        ctx: Context,
        ref: JobRef,
        log_dir: str | None,
        *,
        attempt: int | None = None,
        timeout: float | None = None,
        on_change: Callable[[JobInfo], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.ref = ref
        self.tail = tail_of(ctx, log_dir, attempt) if log_dir is not None else None
        self.timeout = timeout
        self.on_change = on_change
        self.final: JobInfo | None = None

    def __iter__(self) -> Iterator[tuple[int, str]]:
        rounds = watch(self.ctx.backend, [self.ref], timeout=self.timeout, on_change=self.on_change)
        for infos in rounds:
            yield from self._new_lines(final=False)
            self.final = infos[self.ref]
        yield from self._new_lines(final=True)
        if self.final is not None and self.final.state.is_finished:
            remember_end(self.ctx, [self.final])  # what the watch saw: no extra call

    def _new_lines(self, *, final: bool) -> Iterator[tuple[int, str]]:
        if self.tail is None:
            return
        for number, lines in self.tail.read_new_by_attempt(final=final):
            for line in lines:
                yield number, line


def remote_files(ctx: Context) -> RemoteFiles | None:
    """How to read the job's files when Slurm is remote (``None``: they are local)."""
    return ctx.runner if ctx.is_remote else None
