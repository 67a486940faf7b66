"""When a job would start and how long it runs (``hpclaunch estimate SPEC``,
``submit --dry-run``, :meth:`Session.estimate`).

Two sources, asked once each, on demand: Slurm's own answer for the job as it would be
submitted (``sbatch --test-only``: its script on stdin, nothing queued), and the run times of
the completed jobs the history holds of the same spec (its hash, overrides applied), else of
the same name: one status call for at most :data:`PAST_RUNS` of them. From those runs a time
limit is suggested: a limit far above the run keeps a job out of backfill's gaps.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.backends.abilities import estimates_of
from hpclaunch.errors import BackendError, HistoryError, SubmissionError, TransportError
from hpclaunch.slurm.jobs import JobRef, JobState
from hpclaunch.slurm.times import format_elapsed, parse_elapsed, parse_time_limit
from hpclaunch.store.history import query_submissions

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.planning.render import RenderedJob
    from hpclaunch.slurm.estimate import StartEstimate

__all__ = ["PAST_RUNS", "Estimate", "PastRun", "estimate_job", "suggest_time"]

#: The most recent completed runs looked at.
PAST_RUNS = 10
#: A limit this many times the longest past run, or more, is worth cutting.
_FAR_ABOVE = 2.0


@dataclass(frozen=True)
class PastRun:
    """A completed job of the same spec (``matched``: ``spec`` or ``name``) and its run
    time (its last attempt's, in seconds)."""

    job_id: str
    ran_s: int
    matched: str


@dataclass(frozen=True)
class Estimate:
    """What is known, before submitting, of when a job would start and how long it runs.

    Attributes:
        job_name: The job.
        slurm: Slurm's estimate (``None``: not asked or no answer; ``why_not`` says which).
        why_not: Why there is no Slurm estimate, or Slurm's refusal.
        time_limit: The limit the job asks for, in seconds (``None``: the partition's).
        past: Completed runs of the same spec (or name), newest first.
        suggested_time: A limit to ask for instead, in seconds (``None``: keep it).
    """

    job_name: str
    slurm: StartEstimate | None
    why_not: str | None
    time_limit: int | None
    past: tuple[PastRun, ...]
    suggested_time: int | None

    def lines(self) -> list[str]:
        """The estimate as text."""
        out = []
        if self.slurm is not None:
            where = f"on {self.slurm.nodes}" + (
                f" in partition {self.slurm.partition}" if self.slurm.partition else ""
            )
            out.append(f"Slurm expects it to start at {self.slurm.start} {where}")
            if self.slurm.preempts:
                out.append(f"  by preempting job(s) {', '.join(self.slurm.preempts)}")
        else:
            out.append(f"no start time from Slurm: {self.why_not}")
        limit = format_elapsed(self.time_limit) if self.time_limit else "the partition's"
        if self.past:
            times = [r.ran_s for r in self.past]
            by = "spec" if self.past[0].matched == "spec" else "name"
            out.append(
                f"{len(times)} completed run{'' if len(times) == 1 else 's'} of the same {by} ran "
                f"{format_elapsed(min(times))} to {format_elapsed(max(times))} "
                f"(median {format_elapsed(round(statistics.median(times)))}); "
                f"its time limit: {limit}"
            )
        else:
            out.append(f"no completed run of this spec in the history; its time limit: {limit}")
        if self.suggested_time is not None:
            out.append(
                f"suggested: --time {format_elapsed(self.suggested_time)} (resources.time): a "
                "limit far above the run time keeps a job out of backfill, so it starts later"
            )
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "job_name": self.job_name,
            "slurm": self.slurm.to_dict() if self.slurm else None,
            "why_not": self.why_not,
            "time_limit": self.time_limit,
            "past": [
                {"job_id": r.job_id, "ran_s": r.ran_s, "matched": r.matched} for r in self.past
            ],
            "suggested_time": self.suggested_time,
        }


def estimate_job(ctx: Context, job: RenderedJob, spec_hash: str | None) -> Estimate:
    """Ask Slurm for ``job``'s start and the history for runs of the same spec.

    Raises:
        SubmissionError: Slurm would refuse the job as it stands.
    """
    slurm, why_not = None, None
    try:
        slurm = estimates_of(ctx.backend).estimate_start(job)
        if slurm is None:
            why_not = "sbatch --test-only gave no time"
    except SubmissionError:
        raise
    except (BackendError, TransportError) as exc:
        why_not = exc.message.splitlines()[0]
    try:
        limit = parse_time_limit(job.plan.option("--time"))
    except (KeyError, ValueError):
        limit = None
    past = _past_runs(ctx, spec_hash, job.plan.job_name)
    return Estimate(
        job_name=job.plan.job_name,
        slurm=slurm,
        why_not=why_not,
        time_limit=limit,
        past=tuple(past),
        suggested_time=suggest_time(limit, [r.ran_s for r in past]),
    )


def suggest_time(limit: int | None, runs: list[int]) -> int | None:
    """A time limit for a job whose past runs took ``runs`` seconds, when ``limit`` is far
    above them: the longest run x 1.5, rounded up to 5 minutes (``None``: keep the limit)."""
    if not runs or limit is None:
        return None
    longest = max(runs)
    if limit < _FAR_ABOVE * longest or limit - longest < 15 * 60:
        return None
    return max(300, math.ceil(longest * 1.5 / 300) * 300)


def _past_runs(ctx: Context, spec_hash: str | None, name: str) -> list[PastRun]:
    """The newest completed runs of ``spec_hash`` (else of ``name``), their run times."""

    try:
        matched, records = "spec", []
        if spec_hash:
            records = query_submissions(spec_hash=spec_hash, limit=PAST_RUNS)
        if not records:
            matched, records = "name", query_submissions(name=name, limit=PAST_RUNS)
    except HistoryError as exc:
        ctx.warn(f"could not read the history: {exc}")
        return []
    records = [r for r in records if r.state in (None, JobState.COMPLETED.value)]
    if not records:
        return []
    try:
        infos = ctx.backend.status([JobRef(r.job_id) for r in records])
    except (BackendError, TransportError) as exc:
        ctx.warn(f"the past runs' times are unknown: {exc.message.splitlines()[0]}")
        return []
    runs = []
    for record in reversed(records):  # newest first
        info = infos.get(JobRef(record.job_id))
        if info is None or info.state is not JobState.COMPLETED or info.name != record.name:
            continue
        ran = parse_elapsed(info.elapsed)
        if ran:
            runs.append(PastRun(record.job_id, ran, matched))
    return runs
