"""What is known about one job's life (``hpclaunch events``, ``Job.events``) and its newest
GPU samples (``hpclaunch top``, ``Job.gpus``).

The submission record, Slurm's accounting of each attempt (``sacct -D``), and the sidecar's
ledger (``<job dir>/events.jsonl``: signals, checkpoint requests and commits, requeue
decisions, why each attempt ended, steps lost). GPU samples come from
``<job dir>/metrics.jsonl``, written on each node by :mod:`hpclaunch.supervise.gpumon`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch import jobdir
from hpclaunch.backends.abilities import accounting_of
from hpclaunch.backends.base import JobRef
from hpclaunch.backends.route import status_anywhere
from hpclaunch.errors import BackendError, JobNotFound
from hpclaunch.ops.records import (
    ANOTHER_JOB,
    another_job_reason,
    find_job_record,
    names_another_job,
    read_job_file,
    runs_sidecar,
    submission_record,
)
from hpclaunch.supervise.gpumon import latest_samples, read_metrics
from hpclaunch.supervise.ledger import describe_event, parse_ledger

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import Attempt
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["GpuSamples", "JobEvents", "gpu_samples", "job_events", "why_no_samples"]

LEDGER_NOTE = "no sidecar ledger (events.jsonl) yet: the job has not started"
NO_SIDECAR_NOTE = (
    "the job runs without the sidecar (launcher: none): Slurm's accounting above is all "
    "there is; a launcher (srun, torchrun, ...) adds signals, checkpoints and requeues here"
)


@dataclass(frozen=True)
class JobEvents:
    """One job's life so far.

    Attributes:
        job_id: Slurm's id.
        submission: The history's record (``None``: not submitted through hpclaunch here).
        attempts: Slurm's accounting of each attempt, oldest first.
        accounting_problem: Why Slurm's accounting could not be read (``None``: it was).
        ledger: The sidecar's events, each with its ``attempt`` (``None``: no ledger).
        note: Why there is no ledger.
    """

    job_id: str
    submission: SubmissionRecord | None
    attempts: list[Attempt]
    accounting_problem: str | None
    ledger: list[dict[str, Any]] | None
    note: str | None

    def to_dict(self) -> dict[str, Any]:
        """As ``hpclaunch events --json`` prints it."""
        return {
            "job_id": self.job_id,
            "submission": asdict(self.submission) if self.submission is not None else None,
            "attempts": [a.to_dict() for a in self.attempts],
            "accounting_problem": self.accounting_problem,
            "ledger": self.ledger,
            "note": self.note,
        }

    @property
    def another_job(self) -> bool:
        """Slurm's accounting was read, but its job of this id is another one (a reused
        id): its attempts were dropped, and the history's record stands in."""
        return (self.accounting_problem or "").startswith(ANOTHER_JOB)

    def accounting_line(self) -> str | None:
        """What to say of Slurm's accounting (``None``: read, and of this job)."""
        problem = self.accounting_problem
        if problem is None or self.another_job:
            return problem
        return f"Slurm's accounting is not available: {problem}"

    def ledger_lines(self) -> dict[int, list[str]]:
        """The ledger's events as lines of text (``checkpoint_committed step 120 in 0.4
        s``), by attempt (``-1``: an event without one), in the ledger's order."""

        lines: dict[int, list[str]] = {}
        for event in self.ledger or []:
            index = event.get("attempt")
            lines.setdefault(index if isinstance(index, int) else -1, []).append(
                describe_event(event)
            )
        return lines


def job_events(ctx: Context, job_id: str) -> JobEvents:
    """Everything known about ``job_id``.

    Raises:
        JobNotFound: Neither the history nor Slurm's accounting knows it.
    """

    record = find_job_record(job_id)
    problem = None
    try:
        attempts = accounting_of(ctx.backend).attempts(JobRef(job_id))
    except BackendError as exc:
        attempts, problem = [], exc.message.splitlines()[0]
    if record is not None and attempts:
        problem = _another_job(ctx, record)
        attempts = [] if problem else attempts
    if record is None and not attempts and problem is None:
        raise JobNotFound(
            f"job {job_id} is neither in the hpclaunch history nor in Slurm's accounting",
            hint="check the id with 'hpclaunch status'",
        )
    ledger = _ledger(ctx, record)
    note = None
    if ledger is None:
        plain = record is not None and runs_sidecar(ctx.runner.read_file, record) is False
        note = NO_SIDECAR_NOTE if plain else LEDGER_NOTE
    return JobEvents(job_id, record, attempts, problem, ledger, note)


def _another_job(ctx: Context, record: SubmissionRecord) -> str | None:
    """Why Slurm's accounting of the record's id is another job's (``None``: it is this
    job's, or Slurm cannot say). The attempts carry no name: one status call asks."""

    ref = JobRef(record.job_id)
    try:
        now = status_anywhere(ctx.backend, [ref]).get(ref)
    except BackendError:
        return None
    return another_job_reason(now) if now is not None and names_another_job(now, record) else None


def _ledger(ctx: Context, record: SubmissionRecord | None) -> list[dict[str, Any]] | None:
    """The sidecar's events, read where the job directory is (``None``: no ledger)."""
    if record is None:
        return None

    text = read_job_file(ctx, record, jobdir.LEDGER)
    return None if text is None else parse_ledger(text)


@dataclass(frozen=True)
class GpuSamples:
    """The newest sample of each of a job's GPUs.

    Attributes:
        job_id: Slurm's id.
        samples: One per node and GPU (node, attempt, gpu, util, mem_used, mem_total,
            temp_c, power_w).
        off: Why nodes sample nothing (``node: reason``, from the ledger), when there is
            no sample.
        why_none: Why there is no sample at all, in words (``None``: there are samples).
    """

    job_id: str
    samples: list[dict[str, Any]]
    off: list[str]
    why_none: str | None


def gpu_samples(ctx: Context, job_id: str) -> GpuSamples:
    """The newest GPU sample of each of ``job_id``'s GPUs.

    Raises:
        JobNotFound: The job is not in the history.
    """

    record = submission_record(job_id, "top")
    samples = latest_samples(read_metrics(read_job_file(ctx, record, jobdir.GPU_METRICS) or ""))
    if samples:
        return GpuSamples(job_id, samples, [], None)
    ledger = parse_ledger(read_job_file(ctx, record, jobdir.LEDGER) or "")
    off, why = why_no_samples(ctx, record, ledger)
    return GpuSamples(job_id, [], off, why)


def why_no_samples(
    ctx: Context, record: SubmissionRecord, ledger: Iterable[Mapping[str, Any]]
) -> tuple[list[str], str]:
    """Why the job has no GPU sample: each node's ``gpu_monitor_off`` reason from its
    ``ledger`` (``node: reason``), and all of it in words."""
    off: list[str] = []
    for event in ledger:
        if event.get("event") == "gpu_monitor_off":
            line = f"{event.get('node', '?')}: {event.get('reason', '?')}"
            if line not in off:
                off.append(line)
    why = "; ".join(off)
    if not why and runs_sidecar(ctx.runner.read_file, record) is False:
        why = (
            f"job {record.job_id} runs without the sidecar (launcher: none), which samples the "
            "GPUs: GPU monitoring needs a launcher (srun, torchrun, deepspeed or accelerate)"
        )
    return off, why or "the job has not started, or no sample is due yet"
