"""Cancelling jobs by id, by name, or every unfinished one of the history
(``hpclaunch cancel``, ``Session.cancel``). Safe to repeat: a job that already ended is
reported, not cancelled again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.route import status_anywhere
from hpclaunch.store.history import recent_submissions

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo

__all__ = ["Cancelled", "cancel_jobs", "jobs_named", "unfinished_jobs"]


@dataclass(frozen=True)
class Cancelled:
    """What became of one job asked to be cancelled.

    Attributes:
        info: The job as it was just before (one status call for all).
        outcome: ``cancelled``; ``finished`` (it had ended: nothing done); ``unknown``
            (neither Slurm's queue nor its accounting knows the id).
    """

    info: JobInfo
    outcome: Literal["cancelled", "finished", "unknown"]

    @property
    def ok(self) -> bool:
        """Whether the job is now cancelled or ended."""
        return self.outcome != "unknown"


def jobs_named(ctx: Context, name: str) -> list[JobRef]:
    """Your unfinished jobs named exactly ``name`` (as squeue prints it)."""
    return [info.ref for info in ctx.backend.find_jobs(name)]


def unfinished_jobs(ctx: Context) -> list[JobInfo] | None:
    """The jobs of the history submitted to this site that have not ended (and that Slurm
    still knows), in one status call; ``None`` when the history has no job of this site."""

    records = [r for r in recent_submissions(limit=10_000) if r.site == ctx.site_config.name]
    refs = list(dict.fromkeys(JobRef(r.job_id) for r in records))
    if not refs:
        return None
    infos = status_anywhere(ctx.backend, refs)
    live = [infos[ref] for ref in refs if not infos[ref].state.is_finished]
    return [info for info in live if info.source != "none"]  # UNKNOWN to Slurm: gone


def cancel_jobs(ctx: Context, refs: Sequence[JobRef]) -> list[Cancelled]:
    """Cancel ``refs`` (one status call first, to leave alone those already ended)."""
    refs = list(dict.fromkeys(refs))
    if not refs:
        return []
    infos = ctx.backend.status(refs)
    done: list[Cancelled] = []
    for ref in refs:
        info = infos[ref]
        if info.state.is_finished:
            done.append(Cancelled(info, "finished"))
        elif info.source == "none":
            done.append(Cancelled(info, "unknown"))
        else:
            ctx.backend.cancel(ref)
            done.append(Cancelled(info, "cancelled"))
    return done
