"""Running jobs' progress and expected end (``hpclaunch status``, ``report``): each one's
``control/progress.json`` in its job directory, read where the job runs (here or over SSH),
when a command asks; never a poller (:mod:`hpclaunch.report.eta`). And whether their idle
guard can act: ``control/idle-guard-off``, written by nodes that sample no GPU."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch import jobdir
from hpclaunch.errors import HistoryError
from hpclaunch.ops.records import find_job_record, read_job_file
from hpclaunch.ops.retries import RetryWait, retry_wait
from hpclaunch.report.eta import Eta, eta_of
from hpclaunch.report.usage import format_size
from hpclaunch.slurm.jobs import JobState
from hpclaunch.supervise.ledger import parse_ledger

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = [
    "MAX_READS",
    "JobNotes",
    "eta_of_record",
    "job_notes",
    "out_of_memory_line",
]

#: The most files of one kind one command reads (one a job shown).
MAX_READS = 20


@dataclass(frozen=True)
class JobNotes:
    """What ``hpclaunch status`` adds to a job's row, from its files where it runs."""

    #: When a running job should end (its trainer reports a ``total``).
    eta: Eta | None = None
    #: The retry a pending job waits for (its spec's ``retry:`` requeued it).
    retry: RetryWait | None = None
    #: Why a running job's idle guard can never stop it (``n1: pynvml is not installed``).
    idle_guard_off: str | None = None
    #: Where a job that ended out of memory ran out (``rank 2 on n1``), from its ledger.
    out_of_memory: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The notes given, as ``status --json`` adds them to the job's object."""
        shown: dict[str, Any] = {}
        if self.eta is not None:
            shown["eta"] = self.eta.to_dict()
        if self.retry is not None:
            shown["retry"] = self.retry.to_dict()
        if self.idle_guard_off is not None:
            shown["idle_guard_off"] = self.idle_guard_off
        if self.out_of_memory is not None:
            shown["out_of_memory"] = self.out_of_memory
        return shown


def job_notes(ctx: Context, infos: Sequence[JobInfo]) -> dict[str, JobNotes]:
    """Job id → its notes, for the running jobs of ``infos`` and the pending ones Slurm
    restarted (at most :data:`MAX_READS` of each): the history read once a job, then one
    file read for each note it may have."""
    found: dict[str, JobNotes] = {}
    for info, record in _records(infos, running=True):
        notes = JobNotes(eta=eta_of_record(ctx, record), idle_guard_off=_guard_off(ctx, record))
        if notes != JobNotes():
            found[info.ref.job_id] = notes
    for info, record in _records(infos, running=False):
        text = read_job_file(ctx, record, jobdir.LEDGER)
        wait = retry_wait(parse_ledger(text)) if text else None
        if wait is not None:
            found[info.ref.job_id] = JobNotes(retry=wait)
    for info, record in _records(infos, state=JobState.OUT_OF_MEMORY):
        text = read_job_file(ctx, record, jobdir.LEDGER)
        where = out_of_memory_line(parse_ledger(text)) if text else None
        if where is not None:
            found[info.ref.job_id] = JobNotes(out_of_memory=where)
    return found


def out_of_memory_line(ledger: Sequence[Mapping[str, Any]]) -> str | None:
    """``rank 2 on n1 was killed for memory (limit 300 MiB, peak 300 MiB on n1)``: the last
    out-of-memory ending the sidecar recorded (``None``: none)."""
    ends = [e for e in ledger if e.get("event") == "attempt_end"]
    if not ends or ends[-1].get("reason") != "oom":
        return None
    end = ends[-1]
    who = f"rank {end['oom_rank']}" if end.get("oom_rank") is not None else "a process"
    where = f" on {end['oom_node']}" if end.get("oom_node") else ""
    figures = [
        f"{name} {format_size(end[key])}"
        for name, key in (("limit", "mem_limit"), ("peak", "mem_peak"))
        if isinstance(end.get(key), int)
    ]
    measured = f" ({', '.join(figures)} on the first node)" if figures else ""
    return f"{who}{where} ran out of memory{measured}"


def _guard_off(ctx: Context, record: SubmissionRecord) -> str | None:
    """Why the job's nodes sample no GPU, one line a reason (``None``: they all do)."""
    text = read_job_file(ctx, record, jobdir.in_control(jobdir.GUARD_OFF))
    lines = list(dict.fromkeys(line for line in (text or "").splitlines() if line))
    return "; ".join(lines) or None


def _records(
    infos: Sequence[JobInfo], *, running: bool = False, state: JobState | None = None
) -> Iterator[tuple[JobInfo, SubmissionRecord]]:
    """The history's records of the running jobs of ``infos`` (``running``), of those in
    ``state``, or of the pending ones Slurm restarted: the first :data:`MAX_READS`; none
    once the history cannot be read."""
    if state is not None:
        chosen = [i for i in infos if i.state is state]
    elif running:
        chosen = [i for i in infos if i.state is JobState.RUNNING]
    else:
        chosen = [i for i in infos if i.state is JobState.PENDING and (i.restarts or 0) > 0]
    for info in chosen[:MAX_READS]:
        try:
            record = find_job_record(info.ref.job_id)
        except HistoryError:
            return
        if record is not None:
            yield info, record


def eta_of_record(ctx: Context, record: SubmissionRecord) -> Eta | None:
    """The ETA of a recorded job from its ``progress.json`` (``None``: none to tell)."""
    text = read_job_file(ctx, record, jobdir.in_control(jobdir.PROGRESS))
    if not text:
        return None
    try:
        progress = json.loads(text)
    except json.JSONDecodeError:
        return None
    return eta_of(progress) if isinstance(progress, dict) else None
