"""Moving a pending job to another tier: the one ``scontrol update`` of ``hpclaunch tier``.

Pure functions over a job's squeue line (:class:`hpclaunch.slurm.queue.QueueRow`):

* :func:`plan_retier`: where the job goes in the new tier, through
  :func:`hpclaunch.planning.quota.place` (account, QOS, nice and requeue may all change), as a
  :class:`Retier` whose :attr:`~Retier.argv` is the ``scontrol update``.
* :func:`counted_gpus`: the job's GPUs the project's in-quota usage counts (so a move does
  not count them twice).
* :func:`check_allowed`: refuse a move the user's associations do not allow, before Slurm.
* :func:`scontrol_hint`: a hint for each of ``scontrol update``'s refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.errors import BackendError, ConfigError
from hpclaunch.jobspec.job import JobSpec, Resources
from hpclaunch.planning.quota import in_quota_usage, place
from hpclaunch.slurm.queue import QueueRow

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.slurm.capabilities import Capabilities

__all__ = [
    "SCONTROL_HINTS",
    "Retier",
    "check_allowed",
    "counted_gpus",
    "plan_retier",
    "scontrol_hint",
]


@dataclass(frozen=True)
class Retier:
    """How ``hpclaunch tier`` moves a pending job: the old and new placement.

    Attributes:
        job_id: The job as given (an array job id moves every pending task).
        row: The job (its pending tasks) as squeue shows it now.
        new_tier: The tier asked for.
        old_tier: The job's tier now (history, else QOS), if known.
        quota: ``in-quota``/``over-quota``/``none``: the new placement's class.
        requeue: Whether the new placement is preemptible (``Requeue=1``).
        notes: Why, from :func:`hpclaunch.planning.quota.place`.
    """

    job_id: str
    row: QueueRow
    new_tier: str
    old_tier: str | None
    new_qos: str
    new_account: str | None
    new_nice: int
    quota: str
    requeue: bool
    notes: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        """ONE ``scontrol update`` with every change.

        ``--signal`` is not among them: ``scontrol update`` cannot change it (22.05 has no
        such job field). That is harmless: Slurm sends SIGTERM at preemption anyway (after
        the QOS GraceTime), which the sidecar takes as a checkpoint request too; and a job
        moved out of a preemptible tier keeps a signal that at worst asks it to checkpoint
        before its time limit.
        """
        changes = [f"{key}={value}" for key, value in self.slurm_changes.items()]
        return ["scontrol", "update", f"JobId={self.job_id}", *changes]

    @property
    def slurm_changes(self) -> dict[str, str]:
        """The job fields to set, in ``scontrol update``'s spelling (:meth:`argv`)."""
        changes = {"QOS": self.new_qos}
        if self.new_account is not None and self.new_account != self.row.account:
            changes["Account"] = self.new_account
        if self.new_nice != self.row.nice:
            changes["Nice"] = str(self.new_nice)
        # Requeue=1: preempted work is requeued (PreemptMode=REQUEUE); Requeue=0: a job that
        # is never preempted is not requeued after a node failure either (as --no-requeue).
        changes["Requeue"] = "1" if self.requeue else "0"
        return changes

    def changes(self) -> list[str]:
        """``what: old → new`` for each value that changes (all of them under dry run)."""
        row = self.row
        pairs = [
            ("tier", self.old_tier or "?", self.new_tier),
            ("QOS", row.qos or "?", self.new_qos),
            ("account", row.account or "?", self.new_account or row.account or "?"),
            ("nice", str(row.nice), str(self.new_nice)),
        ]
        changed = [f"{what}: {old} → {new}" for what, old, new in pairs if old != new]
        changed.append(f"requeue on preemption/node failure: {'yes' if self.requeue else 'no'}")
        return changed


def counted_gpus(site: SiteConfig, row: QueueRow, project: str) -> int:
    """GPUs of ``row`` that :func:`hpclaunch.ops.plan_job.read_usage` counts for ``project`` (by
    the same rule: :func:`hpclaunch.planning.quota.in_quota_usage`, every task of a folded line)."""
    if row.account != project:
        return 0
    return in_quota_usage(site, [(row.qos, row.gpus_of_all_tasks)])


def plan_retier(
    row: QueueRow,
    site: SiteConfig,
    new_tier: str,
    *,
    job_id: str | None = None,
    old_tier: str | None = None,
    quota_used: int | None = None,
) -> Retier:
    """Where the pending job ``row`` goes in ``new_tier`` (:func:`hpclaunch.planning.quota.place`).

    Args:
        row: The job as squeue shows it (:func:`hpclaunch.slurm.queue.job_argv`).
        site: The site.
        new_tier: The tier to move to.
        job_id: The id to update (default: the row's; an array job id for all its tasks).
        old_tier: Its tier now, if known (for the message).
        quota_used: GPUs the project's in-quota jobs hold or wait for, this job's own not
            included (:func:`counted_gpus`); ``None``: unknown or the site has no quotas.

    Raises:
        ConfigError: No such tier on the site.
        PlanError: The site has quotas and the job's account is none of its projects.
        BackendError: The job is not pending (a running job's tier cannot change).
    """

    policy = site.tiers.get(new_tier)  # type: ignore[call-overload]
    if policy is None:
        raise ConfigError(
            f"site {site.name} has no tier {new_tier!r}",
            hint=f"tiers: {', '.join(site.tiers) or 'none'}",
        )
    if not row.pending:
        raise BackendError(
            f"job {row.job_id} is {row.state}: the tier of a job that has started cannot "
            "change (Slurm changes QOS and account of pending jobs only)",
            hint=f"cancel it and resubmit with tier: {new_tier} (hpclaunch cancel "
            f"{row.job_id}; hpclaunch submit SPEC); a checkpointing job resumes where it was",
        )
    spec = JobSpec(
        name="retier",
        command=("true",),
        project=site.project_of(row.account),
        tier=new_tier,  # type: ignore[arg-type]
        resources=Resources(nodes=row.nodes, gpus_per_node=row.gpus_per_node),
    )
    placement = place(spec, site, policy, quota_used)
    return Retier(
        job_id=job_id or row.job_id,
        row=row,
        new_tier=new_tier,
        old_tier=old_tier,
        new_qos=placement.policy.qos,
        new_account=placement.account,
        new_nice=placement.nice,
        quota=placement.quota,
        requeue=placement.policy.preemptible,
        notes=placement.notes,
    )


def check_allowed(retier: Retier, caps: Capabilities) -> None:
    """Refuse a move the user's associations do not allow (before Slurm does, with the list).

    Only the job owner's associations matter, and discovery knows the current user's: a job
    of another user (an admin moving it) and unknown accounting are left to Slurm.

    Raises:
        BackendError: No association with the new account, or its QOS list lacks the new QOS.
    """

    if caps.associations is None or retier.row.user != caps.user:
        return
    account = retier.new_account or caps.default_account
    parts = retier.row.partitions
    accounts = sorted({a.account for a in caps.associations})
    mine = [
        a
        for a in caps.associations
        if a.account == account and (a.partition is None or a.partition in parts)
    ]
    if not mine:
        raise BackendError(
            f"tier {retier.new_tier} puts job {retier.job_id} in account {account}, and user "
            f"{caps.user} has no association with it; your accounts: {', '.join(accounts)}",
            hint="ask the admins to add you to that account (on a site with quotas, "
            "'hpclaunch site plan' shows the over-quota accounts it needs)",
        )
    allowed = sorted({q for a in mine if a.qos for q in a.qos})
    if allowed and retier.new_qos not in allowed:
        raise BackendError(
            f"account {account} may not use QOS {retier.new_qos!r} (tier {retier.new_tier}); "
            f"QOS allowed there: {', '.join(allowed)}",
            hint="pick a tier whose QOS is allowed, or ask the admins to allow this one "
            f"(sacctmgr show assoc user={caps.user} format=account,partition,qos)",
        )


#: scontrol update's refusals (22.05 wording: "<error> for job <id>") → hints.
SCONTROL_HINTS = (
    (
        "no longer pending",
        "the job started meanwhile: the tier of a running job cannot change; cancel and "
        "resubmit it",
    ),
    (
        "Invalid qos",
        "the new QOS is not allowed for the job's account (sacctmgr show assoc "
        "user=$USER format=account,qos); 'hpclaunch site check' compares site and cluster",
    ),
    (
        "Invalid account",
        "the account does not exist or the job's owner is not in it; on a site with quotas "
        "the over-quota accounts come from 'hpclaunch site plan'",
    ),
    ("Access/permission denied", "only the job's owner or an admin may change it"),
    (
        "violates accounting/QOS policy",
        "the job is over a limit of the new tier's QOS (MaxWall, GPUs or jobs per user): "
        "pick another tier, or resubmit asking for less",
    ),
)


def scontrol_hint(stderr: str) -> str:
    """The hint for a refusal of ``scontrol update`` (see :data:`SCONTROL_HINTS`)."""
    for needle, hint in SCONTROL_HINTS:
        if needle.lower() in stderr.lower():
            return hint
    return "read Slurm's message above; 'hpclaunch queue --me' shows the job"
