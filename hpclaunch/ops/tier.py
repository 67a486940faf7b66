"""Move a pending job to another tier: what ``hpclaunch tier`` and ``Job.tier`` both do.

One look at the job, one at the project's usage (sites with quotas), one update; the
history row follows (tier, QOS, quota).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.backends.abilities import control_of, queue_of
from hpclaunch.errors import BackendError, HistoryError, JobNotFound, PlanError, UpdateRefused
from hpclaunch.ops.context import Context
from hpclaunch.ops.plan_job import read_usage
from hpclaunch.ops.queue import tier_of
from hpclaunch.planning.retier import check_allowed, counted_gpus, plan_retier, scontrol_hint
from hpclaunch.store.history import find_record, record_amendment

if TYPE_CHECKING:
    from hpclaunch.planning.retier import Retier
    from hpclaunch.slurm.queue import QueueRow
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["TierMove", "apply_tier_move", "plan_tier_move"]

#: States of a job that has started: its QOS and account are fixed.
_STARTED = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED"})


@dataclass(frozen=True)
class TierMove:
    """What moving a job changes (``retier``), its tasks that started (they keep their
    tier), and its history row, if it has one."""

    retier: Retier
    started: tuple[QueueRow, ...]
    record: SubmissionRecord | None


def plan_tier_move(context: Context, job_id: str, new_tier: str) -> TierMove:
    """What moving ``job_id`` to ``new_tier`` would change, checked against the cluster.

    Raises:
        PlanError: The site has no such tier, or the cluster does not allow it.
        JobNotFound, BackendError: The job is gone or has ended.
    """
    site = context.site_config
    if new_tier not in site.tiers:
        raise PlanError(
            f"site {site.name} has no tier {new_tier!r}; tiers: {', '.join(site.tiers)}",
            hint="name one of the site's tiers",
        )
    rows = queue_of(context.backend).queue_job(job_id)
    if not rows:
        raise JobNotFound(
            f"job {job_id} is not in Slurm's queue (it ended, or never existed)",
            hint="'hpclaunch queue --me' lists your pending and running jobs",
        )
    pending = [r for r in rows if r.pending]
    started = [r for r in rows if not r.pending]
    if not pending and started[0].state not in _STARTED:
        raise BackendError(
            f"job {job_id} has ended ({started[0].state}): there is nothing to move",
            hint="resubmit it with the tier you want",
        )
    row = pending[0] if pending else started[0]  # a started job: plan_retier refuses it
    record = _record(job_id)
    old_tier = (record.tier if record is not None else None) or tier_of(row, site)
    retier = plan_retier(
        row,
        site,
        new_tier,
        job_id=job_id,
        old_tier=old_tier,
        quota_used=_quota_used(context, row, new_tier),
    )
    check_allowed(retier, context.capabilities())
    return TierMove(retier, tuple(started), record)


def apply_tier_move(context: Context, move: TierMove) -> None:
    """The one update, then the history row (a failure there only warns: the job moved).

    Raises:
        JobNotFound: The job ended meanwhile.
        BackendError: Slurm refused the change (its answer and a hint).
    """
    retier = move.retier
    _update(context, retier)
    if move.record is not None:
        try:
            record_amendment(
                move.record, tier=retier.new_tier, qos=retier.new_qos, quota=retier.quota
            )
        except HistoryError as exc:
            context.warn(f"could not record the new tier in the history: {exc}")


def _quota_used(context: Context, row: QueueRow, new_tier: str) -> int | None:
    """The project's in-quota GPUs without this job's own (one look at the queue), when the new
    tier's placement depends on them; ``None`` otherwise."""
    site = context.site_config
    project = site.project_of(row.account)
    if project not in site.quotas or site.tiers[new_tier].preemptible:  # type: ignore[index]
        return None
    assert project is not None
    # The usage counts this job too while it is in-quota: moving it must not count it twice.
    used = read_usage(context.backend, site, project)
    return max(0, used - counted_gpus(site, row, project))


def _update(context: Context, retier: Retier) -> None:
    """The one update (``scontrol update`` or its RPC); its refusals become errors with
    hints."""
    try:
        control_of(context.backend).update_job(retier.job_id, retier.slurm_changes)
    except UpdateRefused as exc:
        said = exc.said
        if "Invalid job id" in said:
            raise JobNotFound(
                f"job {retier.job_id} is gone: {said}", hint="it ended meanwhile"
            ) from None
        raise BackendError(
            f"Slurm refused to move job {retier.job_id} to tier {retier.new_tier}: {said}",
            hint=scontrol_hint(said),
        ) from None


def _record(job_id: str) -> SubmissionRecord | None:
    return find_record(job_id=job_id) or find_record(job_id=job_id.split("_")[0])
