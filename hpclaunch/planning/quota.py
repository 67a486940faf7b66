"""Guaranteed GPU quotas (Run:AI semantics) expressed in Slurm's accounts and QOS.

The design, and why (``docs`` of :class:`~hpclaunch.config.site.OverQuota` too):

* Each project ``P`` with a quota ``Q`` is a Slurm account with the association limit
  ``GrpTRES=gres/gpu=Q``: Slurm itself never runs more than ``Q`` GPUs of ``P``'s jobs at
  once, whoever submits them (sbatch by hand included). Only the non-preemptible tiers' QOS
  are used there, so the work inside the guarantee is never preempted.
* Work beyond the guarantee runs in a sibling account ``P-oq`` (not a child: Slurm counts a
  child's jobs towards its parent's ``GrpTRES``), whose association allows only preemptible
  QOS: the over-quota QOS and the preemptible tiers'. Every non-preemptible tier's QOS lists
  them in its ``Preempt``, so in-quota work of *any* project takes GPUs back from over-quota
  work of *every* project (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``), and a
  project's own sweeps never eat its own guarantee.
* As long as the quotas add up to no more than the cluster's GPUs, a project's in-quota job
  always finds GPUs: held by nobody, or by over-quota work it may preempt.

hpclaunch decides at submit time from live usage, one look at the project's queue:
``in-quota`` when the GPUs its in-quota jobs hold or wait for, plus this job's, fit in
``Q``; ``over-quota`` otherwise. Two submissions racing for the last GPUs of a quota may
both be placed in-quota; Slurm's ``GrpTRES`` then holds the second (reason
``AssocGrpGRES``) until the first ends: it waits, but it never runs beyond the guarantee.
A pending over-quota job stays over-quota when in-quota GPUs free up later (the decision is
made once; ``hpclaunch tier`` or resubmitting re-decides).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.config.site import SiteConfig, TierPolicy
from hpclaunch.errors import PlanError
from hpclaunch.jobspec.job import JobSpec

if TYPE_CHECKING:
    from hpclaunch.slurm.queue import QueueRow

__all__ = [
    "QUOTA_MODES",
    "TIER_ORDER",
    "USAGE_STATES",
    "Placement",
    "classify",
    "in_quota_usage",
    "place",
    "usage_of",
]

#: Tiers from the most to the least urgent.
TIER_ORDER = ("critical", "high", "medium", "low")

# squeue %b (tres-per-node) as Slurm 22.05 prints it: "gres:gpu:4", "gres:gpu:a100:2",
# "gres/gpu:2" in later versions; several entries are comma-separated.


@dataclass(frozen=True)
class Placement:
    """Where a job runs: account, QOS and how it is treated at preemption.

    Attributes:
        account: The Slurm account (``--account``), or ``None`` for the user's default.
        policy: The effective tier policy: the tier's own, or the over-quota one.
        quota: ``in-quota``, ``over-quota`` or ``none`` (the site has no quotas).
        nice: ``--nice`` to keep tier order among over-quota jobs (0: none).
        notes: Why, for ``--dry-run``.
        warning: One line for stderr when a job of a non-preemptible tier is placed
            over-quota because its project's guarantee is used up (``None`` otherwise): the
            user asked for a tier that is never preempted and gets preemptible work.
    """

    account: str | None
    policy: TierPolicy
    quota: str
    nice: int
    notes: tuple[str, ...]
    warning: str | None = None


#: ``allow``: a job that does not fit in its project's free guarantee runs over-quota
#: (preemptible, on idle GPUs); ``strict``: it is placed in-quota anyway and waits there
#: (Slurm's ``GrpTRES`` holds it, reason ``AssocGrpGRES``) until the project's GPUs free up.
QUOTA_MODES = ("allow", "strict")


def place(
    spec: JobSpec,
    site: SiteConfig,
    policy: TierPolicy,
    quota_used: int | None,
    *,
    mode: str = "allow",
    gpus: int | None = None,
) -> Placement:
    """Decide account, QOS and preemptibility of ``spec`` (see the module docstring).

    Args:
        spec: The job.
        site: The site; without ``quotas`` the tier alone decides.
        policy: The spec's tier policy on this site.
        quota_used: GPUs the project's in-quota jobs hold or wait for now; ``None``: unknown.
        mode: ``allow`` or ``strict`` (:data:`QUOTA_MODES`).
        gpus: The GPUs the submission can hold at once (a sweep: its concurrent tasks');
            default: one job's.

    Raises:
        PlanError: The site has quotas and the job names no project the site knows; or
            ``strict`` and the job asks more GPUs than the project's whole guarantee.
    """
    project = spec.project or site.default_account
    if not site.has_quotas:
        if project:
            source = "the spec's project" if spec.project else "the site's default account"
            note = f"account {project}: {source}"
        else:
            note = "no account given: Slurm uses your default account"
        return Placement(project, policy, "none", 0, (note,))
    if project is None or project not in site.quotas:
        known = ", ".join(sorted(site.quotas))
        what = f"project {project!r} has" if project else "no project given, and the site has"
        raise PlanError(
            f"project: {what} no GPU quota on site {site.name} (projects: {known})",
            hint="set project: to one of the listed projects, or ask the admins to add yours "
            "under quotas: in the site config",
        )
    quota = site.quotas[project]
    job_gpus = spec.resources.nodes * spec.resources.gpus_per_node
    gpus = job_gpus if gpus is None else gpus
    over = site.overquota
    oq_account = over.account_for(project)
    if policy.preemptible:
        note = (
            f"tier {spec.tier} is preemptible: account {oq_account} (outside project "
            f"{project}'s guarantee of {quota} GPUs, so it never uses it up)"
        )
        return Placement(oq_account, policy, "over-quota", 0, (note,))
    used = 0 if quota_used is None else quota_used
    unknown = " (usage not read: taken as 0)" if quota_used is None else ""
    if used + gpus <= quota:
        note = (
            f"in-quota: project {project} holds {used}{unknown} of its {quota} guaranteed GPUs; "
            f"this job's {gpus} fit, so it runs in account {project} and is never preempted"
        )
        return Placement(project, policy, "in-quota", 0, (note,))
    if mode == "strict":
        return _strict_in_quota(project, quota, used, gpus, job_gpus, policy, unknown)
    nice = over.nice_step * TIER_ORDER.index(spec.tier)
    over_policy = TierPolicy(
        qos=over.qos, partition=policy.partition, preemptible=True, grace=over.grace
    )
    notes = [
        f"over-quota: project {project} holds {used}{unknown} of its {quota} guaranteed GPUs "
        f"and this job asks {gpus}: it runs in account {oq_account} with QOS {over.qos} on "
        "idle GPUs, and in-quota work of any project may preempt it (it is requeued)"
    ]
    if nice:
        notes.append(f"--nice={nice}: keeps tier {spec.tier} behind higher tiers' over-quota jobs")
    warning = (
        f"project {project} holds {used}{unknown} of its {quota} guaranteed GPUs; this job asks "
        f"{gpus}: it runs over-quota on idle GPUs and may be preempted"
        + (
            " (--quota=strict waits in-quota instead)"
            if gpus <= quota
            else f" (it asks more than the whole guarantee of {quota}: only over-quota runs it)"
        )
    )
    return Placement(oq_account, over_policy, "over-quota", nice, tuple(notes), warning)


def _strict_in_quota(
    project: str, quota: int, used: int, gpus: int, job_gpus: int, policy: TierPolicy, unknown: str
) -> Placement:
    """``--quota=strict``: in the project's account although the guarantee is used up now;
    Slurm's ``GrpTRES=gres/gpu=<quota>`` holds the job (each task of a sweep) until its GPUs
    fit."""
    if job_gpus > quota:
        raise PlanError(
            f"resources: this job asks {job_gpus} GPUs, more than project {project}'s whole "
            f"guarantee of {quota}: with --quota=strict it could never start",
            hint="ask for fewer GPUs, or use --quota=allow to run it over-quota on idle GPUs "
            "(preemptible)",
        )
    note = (
        f"--quota=strict: project {project} holds {used}{unknown} of its {quota} guaranteed "
        f"GPUs and this job asks {gpus}; it stays in-quota (account {project}, never "
        f"preempted) and waits, held by Slurm (reason AssocGrpGRES), until {used + gpus - quota} "
        "of the project's GPUs free up"
    )
    return Placement(project, policy, "in-quota", 0, (note,))


#: The states of a project's jobs that hold or wait for its guaranteed GPUs (squeue
#: ``--states``): a requeued job waits for them again.
USAGE_STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED,REQUEUE_HOLD"


def usage_of(site: SiteConfig, rows: Iterable[QueueRow]) -> int:
    """The GPUs the project's in-quota jobs hold or wait for, from its queue rows (those of
    ``squeue --account=PROJECT --states=USAGE_STATES``: ``hpclaunch.ops.plan_job.read_usage``
    asks for them)."""
    # An array's pending tasks are one folded row: each asks for its GPUs.
    return in_quota_usage(site, ((row.qos, row.gpus_of_all_tasks) for row in rows))


def in_quota_usage(site: SiteConfig, jobs: Iterable[tuple[str | None, int]]) -> int:
    """GPUs of ``jobs`` (each its QOS and its GPUs) that count against the guarantee:
    those with a non-preemptible tier's QOS."""
    counted = {p.qos for p in site.tiers.values() if not p.preemptible}
    return sum(gpus for qos, gpus in jobs if qos in counted)


def classify(site: SiteConfig, account: str | None, qos: str | None) -> str | None:
    """``in-quota``/``over-quota`` for a job seen in squeue or sacct, from its QOS (and its
    account, when known); ``None`` without quotas, or for a job outside the site's projects
    or tiers."""
    if not site.has_quotas or qos is None:
        return None
    projects = set(site.quotas) | {site.overquota.account_for(p) for p in site.quotas}
    if account is not None and account not in projects:
        return None
    preemptible = {p.qos for p in site.tiers.values() if p.preemptible}
    if qos == site.overquota.qos or qos in preemptible:
        return "over-quota"
    if qos in {p.qos for p in site.tiers.values()}:
        return "in-quota"
    return None
