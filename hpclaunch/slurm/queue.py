"""The cluster's queue as the scheduler sees it, and why each pending job waits.

Pure functions over squeue's output, for ``hpclaunch queue`` and ``hpclaunch tier``:

* :data:`QUEUE_FORMAT` / :func:`queue_argv`: ONE squeue call for every pending and running
  job of the cluster (or of one user or partition); :func:`parse_queue` reads it.
* :func:`build_queue`: running jobs first, then pending ones in the order Slurm considers
  them, each with its tier, quota class and the reason it waits in words (:func:`explain`).
* :func:`job_argv`, :func:`tier_of`, :meth:`SiteConfig.project_of`: one job's line, its tier and
  project, which :mod:`hpclaunch.planning.retier` uses to move a pending job to another tier.

The order (Slurm 22.05, ``sched/backfill`` and the main scheduler's ``sort_job_queue2``):
pending jobs by priority, highest first, then submit time, then job id. With
``priority/multifactor`` the priority already holds the QOS priority (the tier, times
``PriorityWeightQOS``) minus the nice value, so sorting by it is sorting by tier first.
Partition ``PriorityTier`` and reservations, which come before priority in Slurm's sort,
are not read: on a site whose partitions differ in ``PriorityTier`` the rank is per
partition only approximately right. Backfill may still start a later job early when it
fits in GPUs nobody ahead of it can use before they free up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hpclaunch.config.site import SiteConfig
from hpclaunch.planning.quota import TIER_ORDER, classify
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.slurm.times import format_elapsed, parse_elapsed
from hpclaunch.slurm.tres import gpus_per_node, to_int

__all__ = [
    "QUEUE_FORMAT",
    "QueueEntry",
    "QueueRow",
    "build_queue",
    "explain",
    "job_argv",
    "parse_queue",
    "queue_argv",
    "tier_of",
]

#: squeue ``--format`` letters (22.05): job id (``123``, ``123_4`` or ``123_[5-9]`` for
#: pending array tasks folded into one line), user, account, QOS, state (long), reason,
#: priority (``%Q``, an integer), submit time (``%V``, local time of the cluster), node
#: count, tres-per-node (``%b``: ``gres:gpu:4``, ``N/A``), nice, partition, time used; the
#: name (free text, may hold ``|``) last. Without a width squeue prints values unpadded.
QUEUE_FIELDS = ("%i", "%u", "%a", "%q", "%T", "%r", "%Q", "%V", "%D", "%b", "%y", "%P", "%M", "%j")
QUEUE_FORMAT = "|".join(QUEUE_FIELDS)
#: The states shown: waiting or holding resources (finished jobs are not work ahead).
QUEUE_STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED"

_EMPTY = frozenset({"", "(null)", "None", "N/A", "n/a", "Unknown"})
_LEADING_INT = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class QueueRow:
    """One line of :func:`queue_argv`'s output.

    Attributes:
        job_id: ``123``, ``123_4``, or ``123_[5-9]`` (pending array tasks).
        reason: Slurm's raw reason (``Priority``, ``Resources``, ...); ``None``: none.
        priority: ``%Q``; ``None`` when unreadable.
        submit: Submit time as squeue prints it (ISO 8601, the cluster's local time).
        gpus_per_node: GPUs per node asked for (0: none).
        partition: One partition, or several comma-separated for a multi-partition job.
        elapsed: Run time in Slurm's format (``0:00`` while pending).
    """

    job_id: str
    user: str
    account: str | None
    qos: str | None
    state: str
    reason: str | None
    priority: int | None
    submit: str | None
    nodes: int
    gpus_per_node: int
    nice: int
    partition: str | None
    elapsed: str | None
    name: str

    @property
    def pending(self) -> bool:
        """Whether the job waits to start."""
        return self.state == "PENDING"

    @property
    def gpus(self) -> int:
        """GPUs of the whole job (of one task, for a line of folded array tasks)."""
        return self.nodes * self.gpus_per_node

    @property
    def gpus_of_all_tasks(self) -> int:
        """GPUs every job of the row holds or asks for (each task of a folded line)."""
        return self.gpus * self.tasks

    @property
    def tasks(self) -> int:
        """How many jobs the row stands for: ``123_[2-5,8%2]`` is 5 pending tasks."""
        folded = re.search(r"_\[([^%\]]*)", self.job_id)
        if folded is None:
            return 1
        try:
            return len(task_ids(folded.group(1))) or 1
        except ValueError:  # not a task list: count the row once, as an unfolded one
            return 1

    @property
    def reason_code(self) -> str | None:
        """The reason's code: ``ReqNodeNotAvail, UnavailableNodes:n1`` → ``ReqNodeNotAvail``."""
        if self.reason is None:
            return None
        return re.split(r"[,\s(]", self.reason.strip("()"), maxsplit=1)[0] or None

    @property
    def partitions(self) -> frozenset[str]:
        """The job's partitions (a pending job may name several)."""
        return frozenset(p for p in (self.partition or "").split(",") if p)

    @property
    def array_job(self) -> bool:
        """Whether this is (part of) an array job."""
        return "_" in self.job_id


def queue_argv(
    *,
    me: bool = False,
    partition: str | None = None,
    account: str | None = None,
    states: str = QUEUE_STATES,
) -> list[str]:
    """The one squeue call for the queue: the whole cluster, or (``me``) your jobs only, or
    one partition's, or one account's; in ``states`` (comma-separated)."""
    argv = ["squeue", "--noheader", f"--states={states}", f"--format={QUEUE_FORMAT}"]
    if me:
        argv.append("--me")
    if partition is not None:
        argv.append(f"--partition={partition}")
    if account is not None:
        argv.append(f"--account={account}")
    return argv


def job_argv(job_id: str) -> list[str]:
    """squeue for one job (every state), in :data:`QUEUE_FORMAT`: all tasks of an array id."""
    return ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", f"--format={QUEUE_FORMAT}"]


def parse_queue(stdout: str) -> list[QueueRow]:
    """Parse :data:`QUEUE_FORMAT` lines; lines that do not fit are skipped."""
    rows = []
    width = len(QUEUE_FIELDS)
    for line in stdout.splitlines():
        cols = line.split("|", width - 1)
        if len(cols) != width or not _LEADING_INT.match(cols[0].strip()):
            continue
        job_id, user, account, qos, state, reason, prio, submit, nodes, tres, nice, part = [
            c.strip() for c in cols[:-2]
        ]
        rows.append(
            QueueRow(
                job_id=job_id,
                user=user,
                account=_field(account),
                qos=_field(qos),
                state=state.split()[0].upper() if state.strip() else "UNKNOWN",
                reason=_field(reason),
                priority=to_int(prio),
                submit=_field(submit),
                nodes=to_int(nodes) or 1,
                gpus_per_node=gpus_per_node(tres) if _field(tres) else 0,
                nice=to_int(nice) or 0,
                partition=_field(part),
                elapsed=_field(cols[-2]),
                name=cols[-1],
            )
        )
    return rows


def sort_key(row: QueueRow) -> tuple[int, float, int, str]:
    """Slurm's order of pending jobs: priority (highest first), submit time, job id."""
    prio = row.priority if row.priority is not None else -1
    submitted = _timestamp(row.submit)
    job = _LEADING_INT.match(row.job_id)
    when = submitted if submitted is not None else float("inf")
    return (-prio, when, int(job.group(1)) if job else 0, row.job_id)


def order(rows: Iterable[QueueRow]) -> list[QueueRow]:
    """Running (and other started) jobs first, longest-running first; then pending ones in
    the order the scheduler considers them (:func:`sort_key`)."""
    rows = list(rows)
    started = sorted((r for r in rows if not r.pending), key=_started_key)
    pending = sorted((r for r in rows if r.pending), key=sort_key)
    return started + pending


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
        ours = _base_id(row.job_id) in history_tiers or row.job_id in history_tiers
        tier = history_tiers.get(row.job_id) or history_tiers.get(_base_id(row.job_id))
        if not row.pending:
            entries.append(_entry(row, None, tier or tier_of(row, site), 0, None, "", ours, site))
            continue
        ahead = sum(1 for r in pending_before if r.partitions & row.partitions or not r.partitions)
        submitted = _timestamp(row.submit)
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
    jobs of the preemptible QOS in its partitions are its victims: the lowest QOS priority
    first, then the youngest (preempt/qos orders candidates by priority; Slurm 22.05
    ``slurm.conf(5)`` ``PreemptParameters=youngest_order`` is the site's choice; an estimate).
    Victims named for a job ranked before are not counted again (``claimed``).
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
        key=lambda r: (prio.get(r.qos or "", 0), _elapsed_seconds(r.elapsed)),
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
    return f"will preempt job{'s' if len(chosen) > 1 else ''} {ids}, grace {grace} s"


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
    found = [str(name) for name, policy in site.tiers.items() if policy.qos == row.qos]
    if len(found) == 1:
        return found[0]
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


def _started_key(row: QueueRow) -> tuple[int, int]:
    job = _LEADING_INT.match(row.job_id)
    return (-_elapsed_seconds(row.elapsed), int(job.group(1)) if job else 0)


def _elapsed_seconds(text: str | None) -> int:
    """squeue ``%M`` (``[D-][H:]M:SS``) in seconds; 0 when unreadable."""
    return parse_elapsed(text) or 0


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _base_id(job_id: str) -> str:
    match = _LEADING_INT.match(job_id)
    return match.group(1) if match else job_id


def _field(text: str) -> str | None:
    text = text.strip()
    return None if text in _EMPTY else text
