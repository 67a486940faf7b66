"""``hpclaunch queue``: the cluster's queue in the order Slurm takes it, each job with its
tier, project, quota class and why it waits, in words (:func:`build_queue`, pure); and what
``hpclaunch tier`` needs of one queue row (:func:`tier_of`).

The rows come from :mod:`hpclaunch.slurm.queue` (one squeue call, or one job-list RPC with
pyslurm); their order is Slurm's (see that module).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hpclaunch.backends.abilities import queue_of
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import ConfigError, HpclaunchError
from hpclaunch.ops.context import Context
from hpclaunch.planning.quota import TIER_ORDER, classify
from hpclaunch.slurm.queue import QueueQuery, QueueRow, order
from hpclaunch.slurm.times import expected_start_text, format_elapsed
from hpclaunch.store.history import recent_submissions

__all__ = [
    "REASONS",
    "QueueEntry",
    "build_queue",
    "explain",
    "format_seconds",
    "history_tiers",
    "preemption_outlook",
    "queue_entries",
    "tier_of",
]


@dataclass(frozen=True)
class QueueEntry:
    """A job of the queue with what hpclaunch adds to squeue's view.

    Attributes:
        row: squeue's line.
        rank: 1, 2, ...: the pending job's place in the scheduler's order; ``None``: started.
        tier: The tier: from the submission history for our jobs, else the site's QOS.
        quota: ``in-quota``/``over-quota`` (:func:`hpclaunch.planning.quota.classify`), or ``None``.
        ahead: Pending jobs ranked before this one that want one of its partitions.
        waited: Seconds since submission (pending jobs; ``None`` when unknown).
        why: Why it waits, in words (``""`` for a started job).
        ours: Whether the job is in this user's submission history.
        project: The project: the account, or the project whose over-quota account it is.
    """

    row: QueueRow
    rank: int | None
    tier: str | None
    quota: str | None
    ahead: int
    waited: int | None
    why: str
    ours: bool = False
    project: str | None = None

    @property
    def waited_or_elapsed(self) -> str:
        """How long a pending job has waited, or a started one has run, as squeue prints
        times (``2:03:04``)."""
        return format_seconds(self.waited) if self.row.pending else (self.row.elapsed or "")

    @property
    def expected_start(self) -> str | None:
        """When Slurm expects a pending job to start (squeue's ``StartTime``, the cluster's
        local time; ``None``: started, or the scheduler has no estimate yet)."""
        return self.row.start if self.row.pending else None

    @property
    def expected_start_text(self) -> str:
        """:attr:`expected_start` as ``~15:00`` or ``~11-29 15:00`` (``""``: none)."""
        return expected_start_text(self.expected_start)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``reason`` keeps Slurm's raw reason, ``why`` the words."""
        row = self.row
        return {
            "rank": self.rank,
            "job_id": row.job_id,
            "user": row.user,
            "project": self.project,
            "account": row.account,
            "tier": self.tier,
            "quota": self.quota,
            "qos": row.qos,
            "state": row.state,
            "priority": row.priority,
            "nice": row.nice,
            "submit": row.submit,
            "waited": self.waited,
            "expected_start": self.expected_start,
            "elapsed": row.elapsed,
            "partition": row.partition,
            "nodes": row.nodes,
            "gpus": row.gpus,
            "reason": row.reason,
            "why": self.why,
            "ahead": self.ahead,
            "name": row.name,
            "ours": self.ours,
        }


def build_queue(
    rows: Iterable[QueueRow],
    site: SiteConfig,
    history_tiers: Mapping[str, str] | None = None,
    *,
    now: datetime | None = None,
) -> list[QueueEntry]:
    """The queue in the scheduler's order (:func:`order`), each job explained.

    Args:
        rows: squeue's lines (:func:`parse_queue`).
        site: The site: its QOS→tier mapping and quotas.
        history_tiers: Job id → tier of this user's submissions (their history wins over
            the QOS mapping: an over-quota job's QOS does not say its tier).
        now: The cluster's local time, for how long pending jobs waited (default: now).
    """
    history_tiers = history_tiers or {}
    now = now or datetime.now()
    entries: list[QueueEntry] = []
    pending_before: list[QueueRow] = []
    rows = order(rows)
    running = [r for r in rows if r.state == "RUNNING"]
    claimed: set[str] = set()  # victims already counted for a job ranked before
    for row in rows:
        ours = row.base_id in history_tiers or row.job_id in history_tiers
        tier = history_tiers.get(row.job_id) or history_tiers.get(row.base_id)
        if not row.pending:
            entries.append(_entry(row, None, tier or tier_of(row, site), 0, None, "", ours, site))
            continue
        ahead = sum(1 for r in pending_before if r.partitions & row.partitions or not r.partitions)
        submitted = row.submitted_at
        waited = max(0, int(now.timestamp() - submitted)) if submitted is not None else None
        rank = len(pending_before) + 1
        why = explain(row.reason_code, ahead=ahead, row=row)
        outlook = preemption_outlook(row, running, site, claimed)
        if outlook:
            why = f"{why}; {outlook}"
        entries.append(
            _entry(row, rank, tier or tier_of(row, site), ahead, waited, why, ours, site)
        )
        pending_before.append(row)
    return entries


def preemption_outlook(
    row: QueueRow, running: Iterable[QueueRow], site: SiteConfig, claimed: set[str]
) -> str | None:
    """Whether pending ``row`` will take GPUs by preemption, in words, or ``None`` when it
    waits on a limit, a dependency or asks no GPUs.

    A job whose QOS preempts nothing (over-quota work, a preemptible tier) waits for idle
    GPUs. Otherwise, with ``preemption: slurm`` (``PreemptType=preempt/qos``), the running
    jobs of the preemptible QOS in its partitions are its candidates, in Slurm's order:
    preempt/qos ranks a job by its QOS priority, then its node count (``preempt_p_get_prio``:
    ``priority << 16 | nodes``, fewest first), and keeps the job list's order among equals,
    oldest job first (``slurm_find_preemptable_jobs``, src/interfaces/preempt.c, 25.11;
    not with ``PreemptParameters=youngest_first``). cons_tres removes candidates in that
    order until the job fits and preempts those it removed (job_test.c ``_run_now``). Which
    node it lands on is Slurm's to pick, so the words say "likely". Victims named for a job
    ranked before are not counted again (``claimed``).
    """
    if row.gpus == 0 or row.reason_code not in _MAY_PREEMPT_REASONS:
        return None
    over = site.overquota
    preemptible = {p.qos: p.grace for p in site.tiers.values() if p.preemptible}
    if site.has_quotas:
        preemptible[over.qos] = over.grace
    preempting = {p.qos for p in site.tiers.values() if p.may_preempt}
    if row.qos in preemptible or row.qos not in preempting:
        what = "over-quota" if row.qos == over.qos else "preemptible"
        return f"{what}: waits for idle GPUs (it preempts nothing)"
    if site.preemption == "arbiter":
        return "the arbiter (hpclaunch arbiter) decides which job to preempt for it"
    prio = {p.qos: p.priority or 0 for p in site.tiers.values()} | {over.qos: over.priority}
    victims = sorted(
        (
            r
            for r in running
            if r.qos in preemptible
            and r.gpus > 0
            and r.job_id not in claimed
            and (not row.partitions or not r.partitions or row.partitions & r.partitions)
        ),
        key=lambda r: (prio.get(r.qos or "", 0), r.nodes, _job_order(r.job_id)),
    )
    chosen: list[QueueRow] = []
    for victim in victims:
        if sum(v.gpus for v in chosen) >= row.gpus:
            break
        chosen.append(victim)
    if not chosen:
        return "no preemptible job holds GPUs: waits for GPUs to free up"
    claimed.update(v.job_id for v in chosen)
    grace = max(preemptible[v.qos or ""] for v in chosen)
    ids = ", ".join(v.job_id for v in chosen)
    return f"will likely preempt job{'s' if len(chosen) > 1 else ''} {ids}, grace {grace} s"


def _job_order(job_id: str) -> tuple[int, int]:
    """Where a job stands in slurmctld's job list: by id (``123_4``: array 123, task 4)."""
    base, _, task = job_id.partition("_")
    return (int(base) if base.isdigit() else 0, int(task) if task.isdigit() else -1)


#: Pending reasons under which a job may start by preemption: it waits only for GPUs.
_MAY_PREEMPT_REASONS = frozenset({"Resources", "Priority", "None", None})


def _entry(
    row: QueueRow,
    rank: int | None,
    tier: str | None,
    ahead: int,
    waited: int | None,
    why: str,
    ours: bool,
    site: SiteConfig,
) -> QueueEntry:
    quota = classify(site, row.account, row.qos)
    project = site.project_of(row.account)
    return QueueEntry(row, rank, tier, quota, ahead, waited, why, ours, project)


def tier_of(row: QueueRow, site: SiteConfig) -> str | None:
    """The tier of a job from its QOS (the site's tier with that QOS, if only one has it).

    Over-quota jobs all share one QOS; :func:`hpclaunch.planning.quota.place` gives them
    ``nice = nice_step * the tier's place in TIER_ORDER``, which tells the tier back.
    """
    tier = site.tier_of_qos(row.qos)
    if tier is not None:
        return tier
    over = site.overquota
    if site.has_quotas and row.qos == over.qos and over.nice_step > 0:
        step, rest = divmod(row.nice, over.nice_step)
        if rest == 0 and 0 <= step < len(TIER_ORDER) - 1:
            return TIER_ORDER[step]
    return None


# -- reasons ------------------------------------------------------------------------------

#: Slurm's pending reasons (squeue(1) "JOB REASON CODES", 22.05) in words. ``{ahead}``: the
#: pending jobs before this one that want one of its partitions.
REASONS: Mapping[str, str] = {
    "Priority": "behind {ahead} higher-priority job{s} in the queue",
    "Resources": "next in line: waiting for GPUs (or nodes) to free up",
    "None": "not looked at by the scheduler yet (next pass)",
    "WaitingForScheduling": "not looked at by the scheduler yet (next pass)",
    "AssocGrpGRES": "project at its guaranteed GPU quota: starts when its own jobs free GPUs",
    "AssocGrpGRESRunMinutes": "project at its GPU-minutes limit for running jobs",
    "AssocGrpGRESMinutes": "project used up its GPU-minutes",
    "AssocGrpCpuLimit": "project at its CPU limit",
    "AssocGrpMemLimit": "project at its memory limit",
    "AssocGrpNodeLimit": "project at its node limit",
    "AssocGrpJobsLimit": "project at its running-jobs limit",
    "AssocGrpSubmitJobsLimit": "project at its submitted-jobs limit",
    "AssocMaxJobsLimit": "you are at your running-jobs limit in this project",
    "AssociationJobLimit": "you are at your running-jobs limit in this project",
    "AssociationResourceLimit": "project (association) at a resource limit",
    "AssociationTimeLimit": "the job's time is over the project's time limit",
    "QOSMaxGRESPerUser": "you hold the most GPUs this tier's QOS allows per user",
    "QOSMaxJobsPerUserLimit": "you run the most jobs this tier's QOS allows per user",
    "QOSMaxSubmitJobPerUserLimit": "you have the most jobs this tier's QOS allows per user",
    "QOSMaxWallDurationPerJobLimit": "the job's time is over this tier's wall-time limit "
    "(it will not start: lower the time or change tier)",
    "QOSGrpGRES": "this tier's QOS is at its GPU limit",
    "QOSGrpJobsLimit": "this tier's QOS is at its running-jobs limit",
    "QOSJobLimit": "this tier's QOS is at a job limit",
    "QOSResourceLimit": "this tier's QOS is at a resource limit",
    "QOSTimeLimit": "the job's time is over this tier's QOS time limit",
    "Dependency": "waiting for the jobs it depends on",
    "DependencyNeverSatisfied": "its dependency can never be met: cancel it",
    "BeginTime": "not before its begin time (a requeued job waits a short while too)",
    "JobHeldUser": "held by you: scontrol release {job}",
    "JobHeldAdmin": "held by an admin",
    "ReqNodeNotAvail": "the nodes it needs are down, drained or reserved",
    "PartitionTimeLimit": "the job's time is over the partition's limit (it will not start)",
    "PartitionNodeLimit": "the job asks more nodes than the partition allows (it will not start)",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "BadConstraints": "no node has the features/resources it asks for (it will not start)",
    "InvalidQOS": "its QOS is not valid for its account (it will not start)",
    "InvalidAccount": "its account is not valid (it will not start)",
    "Reservation": "waiting for its reservation",
    "Licenses": "waiting for licenses",
    "NodeDown": "a node it needs is down",
    "launch failed requeued held": "its launch failed: held after requeue",
    "Prolog": "its prolog is running",
    "Cleaning": "being cleaned up after a requeue",
}
_LIMIT_FAMILIES = (
    (re.compile(r"^AssocGrp"), "project at a group limit ({code})"),
    (re.compile(r"^AssocMax"), "you are at a per-user limit of the project ({code})"),
    (re.compile(r"^QOSGrp"), "this tier's QOS is at a group limit ({code})"),
    (re.compile(r"^QOSMax.*PerUser"), "you are at this tier's QOS per-user limit ({code})"),
    (re.compile(r"^QOSMax"), "the job is over a limit of this tier's QOS ({code})"),
)


def explain(code: str | None, *, ahead: int = 0, row: QueueRow | None = None) -> str:
    """Slurm's pending reason ``code`` in words; an unknown code is returned as it is."""
    if code is None:
        code = "None"
    text = REASONS.get(code)
    if text is None:
        for pattern, words in _LIMIT_FAMILIES:
            if pattern.match(code):
                return words.format(code=code)
        return code
    job = row.job_id if row is not None else "JOB"
    return text.format(ahead=ahead, s="" if ahead == 1 else "s", job=job)


# -- helpers ------------------------------------------------------------------------------


def history_tiers(records: Iterable[Any], site: str) -> dict[str, str]:
    """Job id → tier of submission records (:class:`~hpclaunch.store.history.SubmissionRecord`)
    of ``site``; later records win."""
    return {r.job_id: r.tier for r in records if r.tier and r.site == site}


def format_seconds(seconds: int | None) -> str:
    """``1-02:03:04`` / ``2:03:04`` / ``3:04`` like squeue's time columns."""
    return format_elapsed(seconds)


def queue_entries(
    ctx: Context, *, me: bool = False, partition: str | None = None
) -> list[QueueEntry]:
    """The queue now (``hpclaunch queue``): one look at Slurm's queue (everyone's, or ``me``:
    yours; of one ``partition``), in the scheduler's order, each job explained; your jobs'
    tiers come from the history."""

    if partition is not None:
        _check_partition(ctx, partition)
    rows = queue_of(ctx.backend).queue(QueueQuery(me=me, partition=partition))
    records = recent_submissions(limit=10_000)
    return build_queue(rows, ctx.site_config, history_tiers(records, ctx.site_config.name))


def _check_partition(ctx: Context, name: str) -> None:
    """Refuse a partition that neither the site nor the cluster has (an empty queue would
    read as "nobody has jobs" there).

    Raises:
        ConfigError: No such partition.
    """

    known = {p.name for p in ctx.site_config.partitions}
    if name in known:
        return
    try:
        caps = ctx.capabilities()
    except HpclaunchError:
        return  # the cluster cannot be read: squeue has the last word
    known |= {p.name for p in caps.partitions}
    if name not in known:
        raise ConfigError(
            f"partition {name!r}: the cluster has no such partition",
            hint=f"its partitions: {', '.join(sorted(known))}",
        )
