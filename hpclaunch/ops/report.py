"""A job's report (``hpclaunch report JOB``, ``Job.report``): gathers the history's record,
Slurm's accounting of each attempt, the ledger and the GPU samples (read where the job
directory is: here, or over SSH), and hands them to :mod:`hpclaunch.report`.

The calls it makes are those of ``hpclaunch events`` (one sacct, whose attempts carry what
each was given and used, and for a recorded job one status call: is Slurm's job of that id
still this one?) plus one file read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpclaunch import jobdir
from hpclaunch.ops.events import job_events, why_no_samples
from hpclaunch.ops.progress import eta_of_record, out_of_memory_line
from hpclaunch.ops.records import read_job_file
from hpclaunch.ops.tracking import tracker_lines
from hpclaunch.report.attempts import summarise_attempts
from hpclaunch.report.gpus import gpu_stats
from hpclaunch.report.job import JobReport, advise
from hpclaunch.report.usage import advise_usage, summarise_usage
from hpclaunch.supervise.gpumon import read_metrics
from hpclaunch.supervise.ledger import COMMIT_EVENTS

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context

__all__ = ["job_report"]


def job_report(ctx: Context, job_id: str) -> JobReport:
    """Everything known about ``job_id``, summed up.

    Raises:
        JobNotFound: Neither the history nor Slurm's accounting knows it.
    """
    events = job_events(ctx, job_id)
    record = events.submission
    attempts = summarise_attempts(events.attempts, events.ledger or [])
    samples = read_metrics(read_job_file(ctx, record, jobdir.GPU_METRICS) or "") if record else []
    gpus = gpu_stats(samples)
    usage = summarise_usage(events.attempts, ctx.site_config.gres_name, events.ledger or [])
    gone = events.another_job  # what hpclaunch recorded stands in for Slurm's accounting
    running = bool(attempts) and attempts[-1].state == "RUNNING"
    eta = eta_of_record(ctx, record) if record is not None and running else None
    note = None
    if not gpus:  # why, from the ledger read above
        ledger = events.ledger or []
        note = (
            why_no_samples(ctx, record, ledger)[1] if record else "not submitted through hpclaunch"
        )
    return JobReport(
        job_id=job_id,
        name=record.name if record else None,
        tier=record.tier if record else None,
        project=record.project if record else None,
        state=attempts[-1].state if attempts else (record.state if gone and record else None),
        submitted=record.submitted_at if record else None,
        attempts=tuple(attempts),
        gpus=tuple(gpus),
        gpu_note=note,
        accounting_problem=events.accounting_problem,
        advice=tuple(
            _where_oom(events.ledger or []) + advise(attempts, gpus) + advise_usage(usage)
        ),
        samples=tuple(samples),
        checkpoints=_commits(events.ledger or []),
        usage=usage,
        eta=eta,
        progress=_progress(events.ledger or []),
        retries=_retries(events.ledger or []),
        recorded_attempts=(record.attempts or 0) if gone and record else None,
        trackers=tuple(tracker_lines(ctx, record.job_dir, job_id)) if record else (),
    )


def _where_oom(ledger: list[dict[str, Any]]) -> list[str]:
    """Where the job ran out of memory, first of the advice (``rank 2 on n1 ...``)."""
    line = out_of_memory_line(ledger)
    return [f"out of memory: {line}"] if line else []


def _commits(ledger: list[dict[str, Any]]) -> tuple[tuple[float, int | None], ...]:
    """(time, step) of each committed checkpoint, the trainer's periodic ones too, each
    step once (its first line: a periodic commit that ends a launch is logged twice)."""
    seen: set[tuple[object, object]] = set()
    found: list[tuple[float, int | None]] = []
    for event in ledger:
        when, step = event.get("time"), event.get("step")
        if event.get("event") not in COMMIT_EVENTS or not isinstance(when, (int, float)):
            continue
        key = (event.get("attempt"), step)
        if key in seen:
            continue
        seen.add(key)
        found.append((float(when), step if isinstance(step, int) else None))
    return tuple(found)


def _progress(ledger: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The trainer's step over time: each attempt's start (the step it resumed from) and
    end (its last step, world size and samples per second, as the sidecar kept them)."""
    found: list[dict[str, Any]] = []
    for event in ledger:
        kind, when = event.get("event"), event.get("time")
        if not isinstance(when, (int, float)):
            continue
        if kind == "attempt_start":
            step = event.get("progress_step")
            found.append({"attempt": event.get("attempt"), "time": when, "step": step or 0})
        elif kind == "attempt_end" and event.get("last_step") is not None:
            found.append(
                {
                    "attempt": event.get("attempt"),
                    "time": when,
                    "step": event.get("last_step"),
                    "world_size": event.get("world_size"),
                    "samples_per_s": event.get("samples_per_s"),
                    "global_batch": event.get("global_batch"),
                    "lr_factor": event.get("lr_factor"),
                    "size": f"{event.get('world_size')} ranks" if event.get("world_size") else None,
                }
            )
    sizes = {p["attempt"]: p["size"] for p in found if p.get("size")}
    for point in found:  # an attempt's start drawn on the same line as its end
        point["size"] = sizes.get(point["attempt"])
    return tuple(found)


def _retries(ledger: list[dict[str, Any]]) -> tuple[str, ...]:
    """What the ``retry:`` policy did: each retry scheduled, and each failure it did not
    retry, in the sidecar's words."""
    said = {"retry_scheduled": "", "retry_skipped": "not retried: "}
    return tuple(
        f"attempt {e.get('attempt')}: {said[str(e.get('event'))]}{e.get('why')}"
        for e in ledger
        if e.get("event") in said
    )
