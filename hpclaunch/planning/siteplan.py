"""``hpclaunch site plan|apply``: make the cluster's QOS and accounts match a site config.

:func:`hpclaunch.slurm.accounting.read_live` reads the accounting state as it is now (three
``sacctmgr`` calls). :func:`plan_site` is pure: it compares the state the site config asks
for (below) with that live state and returns the :class:`Change` s that close the gap, in
the order they must run; nothing when the cluster already matches. :func:`apply` runs them.

What a site config asks for:

1. Each tier's QOS exists, with the tier's ``Priority``; ``Preempt`` = every preemptible
   QOS (the preemptible tiers', and the over-quota QOS with quotas) when the tier
   ``may_preempt`` and the site leaves preemption to Slurm, else none (``preemption:
   arbiter``: ``hpclaunch arbiter`` preempts instead); preemptible tiers:
   ``PreemptMode=requeue`` and ``GraceTime``; ``MaxWall``/``MaxTRESPerUser``/
   ``MaxJobsPerUser`` when set; ``UsageFactor`` (half for preemptible tiers unless set).
2. With quotas, the over-quota QOS: preemptible, requeued, its priority, grace and
   ``UsageFactor``.
3. With quotas, each project ``P``: account ``P`` with ``GrpTRES=gres/gpu=<quota>`` whose
   QOS list includes every non-preemptible tier's QOS (others are never removed); a
   sibling account ``P-oq`` (same parent) allowing exactly the over-quota and preemptible
   QOS, default the over-quota QOS, with an association for every user of ``P``.
4. slurm.conf settings preemption, priorities and limits depend on. sacctmgr cannot change
   them: they are listed as ``slurm.conf`` changes and never run.

Ownership: what hpclaunch creates carries the description ``hpclaunch: ... (site NAME)``.
Things without the ``hpclaunch:`` prefix are never deleted nor have their QOS lists cut;
owned QOS and accounts of *this* site that the config no longer names are deleted.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from hpclaunch.errors import CommandFailed
from hpclaunch.slurm.accounting import COMMAND_TIMEOUT, LiveAssoc, LiveQos, LiveState
from hpclaunch.slurm.capabilities import EXPEDITED_REQUEUE_SINCE
from hpclaunch.slurm.times import format_time, parse_time_limit
from hpclaunch.slurm.tres import tres_value
from hpclaunch.transport.base import CommandResult, Runner

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.slurm.capabilities import Capabilities

__all__ = [
    "OWNED_PREFIX",
    "Change",
    "apply",
    "plan_site",
]

OWNED_PREFIX = "hpclaunch:"
_SACCTMGR = ("sacctmgr", "-i")  # -i: commit without asking (sacctmgr(1) --immediate)


def is_owned(description: str) -> bool:
    """Whether hpclaunch created the QOS/account with this description."""
    return description.startswith(OWNED_PREFIX)


# -- changes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One step towards the site config.

    Attributes:
        kind: ``sacctmgr``: ``argv`` is run by :func:`apply`; ``slurm.conf``: an admin must
            edit slurm.conf (``setting``) and run ``scontrol reconfigure``.
        reason: Why, in one line.
        argv: The command (never a shell string); empty for ``slurm.conf``.
        setting: For ``slurm.conf``: ``Key=Value  (now: ...)``.
    """

    kind: Literal["sacctmgr", "slurm.conf"]
    reason: str
    argv: tuple[str, ...] = ()
    setting: str = ""

    @property
    def command(self) -> str:
        """The line to show: the shell-quoted argv, or ``slurm.conf: Key=Value (now: ...)``."""
        return shlex.join(self.argv) if self.kind == "sacctmgr" else f"slurm.conf: {self.setting}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {**asdict(self), "argv": list(self.argv), "command": self.command}


def _sacctmgr(reason: str, *args: str) -> Change:
    return Change("sacctmgr", reason, (*_SACCTMGR, *args))


@dataclass(frozen=True)
class _QosWant:
    """A QOS as the site wants it; ``None``: leave the live value alone."""

    name: str
    what: str
    priority: int | None = None
    preempt: tuple[str, ...] = ()
    requeue: bool = False
    grace: int | None = None
    max_wall: int | None = None
    max_gpus: int | None = None
    max_jobs: int | None = None
    usage_factor: float | None = None


def _wanted_qos(site: SiteConfig) -> dict[str, _QosWant]:
    preemptible = {p.qos for p in site.tiers.values() if p.preemptible}
    if site.has_quotas:
        preemptible.add(site.overquota.qos)
    wanted: dict[str, _QosWant] = {}
    for tier, policy in site.tiers.items():
        if policy.qos in wanted:
            continue  # two tiers share a QOS: the first one's settings win
        wanted[policy.qos] = _QosWant(
            name=policy.qos,
            what=f"tier {tier}",
            priority=policy.priority,
            # With the arbiter, Slurm must not preempt as well: it would pick victims first.
            preempt=tuple(sorted(preemptible))
            if policy.may_preempt and site.preemption == "slurm"
            else (),
            requeue=policy.preemptible,
            grace=policy.grace if policy.preemptible else None,
            max_wall=parse_time_limit(policy.max_wall) if policy.max_wall else None,
            max_gpus=policy.max_gpus_per_user,
            max_jobs=policy.max_jobs_per_user,
            usage_factor=policy.charged_factor,
        )
    if site.has_quotas:
        over = site.overquota
        wanted[over.qos] = _QosWant(
            over.qos,
            "over-quota work",
            over.priority,
            (),
            True,
            over.grace,
            usage_factor=over.usage_factor,
        )
    return wanted


def _qos_settings(want: _QosWant, live: LiveQos, gres: str) -> list[tuple[str, str]]:
    """(``Key=Value`` to set, ``was X``) for each setting that differs."""
    out: list[tuple[str, str]] = []
    if want.priority is not None and live.priority != want.priority:
        out.append((f"Priority={want.priority}", str(live.priority)))
    if set(live.preempt) != set(want.preempt):
        # "Preempt=" (empty) clears the list (sacctmgr(1): "Setting a Preempt to ''").
        out.append((f"Preempt={','.join(want.preempt)}", ",".join(live.preempt) or "none"))
    if want.requeue and live.preempt_mode.lower() != "requeue":
        out.append(("PreemptMode=requeue", live.preempt_mode))
    if want.grace is not None and live.grace != want.grace:
        # A bare number is seconds for GraceTime (sacctmgr(1), 22.05).
        out.append((f"GraceTime={want.grace}", f"{live.grace} s"))
    if want.max_wall is not None and live.max_wall != want.max_wall:
        was = "unlimited" if live.max_wall is None else format_time(live.max_wall)
        out.append((f"MaxWall={format_time(want.max_wall)}", was))
    if want.max_gpus is not None:
        have = tres_value(live.max_tres_per_user, f"gres/{gres}")
        if have != want.max_gpus:
            # Only the TRES named is changed; others in the limit stay (sacctmgr(1) TRES).
            out.append((f"MaxTRESPerUser=gres/{gres}={want.max_gpus}", str(have)))
    if want.max_jobs is not None and live.max_jobs_per_user != want.max_jobs:
        out.append((f"MaxJobsPerUser={want.max_jobs}", str(live.max_jobs_per_user)))
    # sacctmgr keeps 6 decimals (prints 0.500000): compare at that precision.
    if want.usage_factor is not None and round(live.usage_factor - want.usage_factor, 6):
        out.append((f"UsageFactor={want.usage_factor:g}", f"{live.usage_factor:g}"))
    return out


def _qos_changes(site: SiteConfig, live: LiveState) -> tuple[list[Change], list[Change]]:
    """(creations, modifications): every creation runs before any modification, so a
    ``Preempt`` list may name a QOS created in the same plan."""
    creates, modifies = [], []
    tag = _tag(site)
    for name, want in _wanted_qos(site).items():
        have = live.qos_named(name)
        if have is None:
            desc = f"{OWNED_PREFIX} {want.what} {tag}"
            creates.append(
                _sacctmgr(
                    f"QOS {name} ({want.what}) does not exist",
                    "add",
                    "qos",
                    name,
                    f"Description={desc}",
                )
            )
            have = LiveQos(name)
        settings = _qos_settings(want, have, site.gres_name)
        if settings:
            what = ", ".join(f"{s} (was {was})" for s, was in settings)
            modifies.append(
                _sacctmgr(
                    f"QOS {name} ({want.what}): {what}",
                    "modify",
                    "qos",
                    name,
                    "set",
                    *(s for s, _ in settings),
                )
            )
    return creates, modifies


def _tag(site: SiteConfig) -> str:
    return f"(site {site.name})"


def _account_changes(site: SiteConfig, live: LiveState) -> list[list[Change]]:
    """[account creations, account modifications, user additions, user modifications]."""
    adds: list[Change] = []
    mods: list[Change] = []
    user_adds: list[Change] = []
    user_mods: list[Change] = []
    cluster, tag, gres, over = live.cluster, _tag(site), site.gres_name, site.overquota
    in_quota = sorted({p.qos for p in site.tiers.values() if not p.preemptible})
    oq_qos = sorted({over.qos} | {p.qos for p in site.tiers.values() if p.preemptible})
    root = live.account_assoc("root")
    for project, quota in site.quotas.items():
        acct = live.account_assoc(project)
        if acct is None:
            desc = f"{OWNED_PREFIX} project {project} {tag}"
            adds.append(
                _add_account(f"account {project} (project) does not exist", project, cluster, desc)
            )
            # A new account inherits its parent's QOS list (sacctmgr(1), 22.05).
            acct = LiveAssoc(project, parent="root", qos=root.qos if root else ())
        sets = []
        have = tres_value(acct.grp_tres, f"gres/{gres}")
        if have != quota:
            sets.append(
                (f"GrpTRES=gres/{gres}={quota}", f"guarantee {quota} GPUs, was {_none(have)}")
            )
        missing = [q for q in in_quota if q not in acct.qos]
        if missing:
            # "+=" adds to the list, inherited or not, and never removes (checked on 22.05).
            sets.append((f"QOS+={','.join(missing)}", f"allow in-quota QOS {','.join(missing)}"))
        if sets:
            mods.append(_modify_account(project, cluster, sets))
        oq = over.account_for(project)
        parent = acct.parent or "root"
        record, oq_acct = live.account_named(oq), live.account_assoc(oq)
        owned = record is None or is_owned(record.description)
        if oq_acct is None:
            desc = f"{OWNED_PREFIX} over-quota work of {project} {tag}"
            why = f"over-quota account {oq} of project {project} does not exist"
            adds.append(_add_account(why, oq, cluster, desc, parent))
            oq_acct = LiveAssoc(oq, parent=parent)
        sets = []
        if owned and oq_acct.parent != parent:
            # A child's jobs count towards its parent's GrpTRES: a sibling of the project.
            sets.append((f"Parent={parent}", f"a sibling of {project}, was under {oq_acct.parent}"))
        qos_sets = _oq_qos_sets(oq_acct, oq_qos, over.qos, owned=owned)
        if qos_sets:
            sets += qos_sets
        if sets:
            mods.append(_modify_account(oq, cluster, sets))
        mine = {(a.user, a.partition): a for a in live.user_assocs(oq)}
        for user, partition in sorted(
            {(a.user or "", a.partition or "") for a in live.user_assocs(project)}
        ):
            part = (f"partition={partition}",) if partition else ()
            have_user = mine.get((user, partition or None))
            if have_user is None:
                why = f"user {user} of project {project} has no association with {oq}"
                user_adds.append(
                    _sacctmgr(
                        why, "add", "user", user, f"account={oq}", f"cluster={cluster}", *part
                    )
                )
                continue
            qos_sets = _oq_qos_sets(have_user, oq_qos, over.qos, owned=owned)
            if qos_sets:
                why = f"user {user} in {oq}: " + "; ".join(w for _, w in qos_sets)
                where = ("where", f"name={user}", f"account={oq}", f"cluster={cluster}", *part)
                user_mods.append(
                    _sacctmgr(why, "modify", "user", *where, "set", *(s for s, _ in qos_sets))
                )
    return [adds, mods, user_adds, user_mods]


def _oq_qos_sets(
    assoc: LiveAssoc, want: list[str], default: str, *, owned: bool
) -> list[tuple[str, str]]:
    """QOS list and default of an over-quota association: exactly ``want`` when
    hpclaunch owns the account, only the missing ones added when it does not."""
    sets = []
    if owned and set(assoc.qos) != set(want):
        was = ",".join(assoc.qos) or "none"
        sets.append((f"QOS={','.join(want)}", f"QOS exactly {','.join(want)}, was {was}"))
    elif not owned and (missing := [q for q in want if q not in assoc.qos]):
        sets.append((f"QOS+={','.join(missing)}", f"allow {','.join(missing)}"))
    if assoc.default_qos != default:
        sets.append(
            (f"DefaultQOS={default}", f"default QOS {default}, was {_none(assoc.default_qos)}")
        )
    return sets


def _add_account(
    reason: str, name: str, cluster: str, description: str, parent: str | None = None
) -> Change:
    args = ["add", "account", name, f"cluster={cluster}"]
    if parent:
        args.append(f"parent={parent}")
    return _sacctmgr(reason, *args, f"Description={description}", "Organization=hpclaunch")


def _modify_account(name: str, cluster: str, sets: list[tuple[str, str]]) -> Change:
    reason = f"account {name}: " + "; ".join(why for _, why in sets)
    where = ("where", f"name={name}", f"cluster={cluster}")
    return _sacctmgr(reason, "modify", "account", *where, "set", *(s for s, _ in sets))


def _deletions(site: SiteConfig, live: LiveState) -> list[Change]:
    """Owned accounts, then owned QOS, of this site that the config no longer names."""
    tag = _tag(site)
    wanted_accounts = set(site.quotas) | {site.overquota.account_for(p) for p in site.quotas}
    out = []
    for acct in live.accounts:
        if (
            is_owned(acct.description)
            and acct.description.endswith(tag)
            and acct.name not in wanted_accounts
            and live.account_assoc(acct.name) is not None
        ):
            why = f"account {acct.name} was made by hpclaunch and the site no longer names it"
            # Deleting an account deletes its user associations too (checked on 22.05).
            out.append(
                _sacctmgr(
                    why,
                    "delete",
                    "account",
                    "where",
                    f"name={acct.name}",
                    f"cluster={live.cluster}",
                )
            )
    wanted_qos = _wanted_qos(site)
    for qos in live.qos:
        if (
            is_owned(qos.description)
            and qos.description.endswith(tag)
            and qos.name not in wanted_qos
        ):
            why = f"QOS {qos.name} was made by hpclaunch and the site no longer names it"
            out.append(_sacctmgr(why, "delete", "qos", qos.name))
    return out


def _conf(key: str, value: str, now: str, why: str) -> Change:
    return Change("slurm.conf", why, setting=f"{key}={value}  (now: {now or 'unset'})")


def _slurm_conf_changes(site: SiteConfig, caps: Capabilities) -> list[Change]:
    out = []
    preempting = site.has_quotas or any(p.preemptible for p in site.tiers.values())
    if preempting:
        if caps.preempt_type != "preempt/qos":
            why = "preemptible tiers and over-quota work are preempted by QOS"
            out.append(_conf("PreemptType", "preempt/qos", caps.preempt_type, why))
        # OFF disables preemption whatever the QOS say (slurm.conf(5) PreemptMode); any
        # other mode is fine, as every preemptible QOS gets its own PreemptMode=requeue.
        if "OFF" in caps.preempt_mode.upper().split(","):
            out.append(
                _conf("PreemptMode", "REQUEUE", caps.preempt_mode, "preempted jobs are requeued")
            )
        if not caps.signals_at_preemption:
            # Otherwise the batch shell gets --signal=B:... only when GraceTime ends.
            key, _, option = caps.send_user_signal_setting.partition("=")
            have = (
                caps.preempt_parameters if key == "PreemptParameters" else caps.slurmctld_parameters
            )
            value = ",".join((*have, option))
            out.append(_conf(key, value, ",".join(have), "signal jobs at preemption"))
    if any(p.priority is not None for p in site.tiers.values()):
        if caps.priority_type != "priority/multifactor":
            why = "QOS priorities order the queue only with the multifactor plugin"
            out.append(_conf("PriorityType", "priority/multifactor", caps.priority_type, why))
        if caps.priority_weight_qos <= 0:
            why = "the QOS factor must weigh in the job priority"
            out.append(_conf("PriorityWeightQOS", "100000", str(caps.priority_weight_qos), why))
    if site.tiers or site.has_quotas:
        enforce = list(caps.accounting_storage_enforce)
        missing = [e for e in ("associations", "limits", "qos") if e not in enforce]
        if missing:
            why = "QOS lists, GrpTRES and QOS limits are enforced only then"
            out.append(
                _conf(
                    "AccountingStorageEnforce", ",".join(enforce + missing), ",".join(enforce), why
                )
            )
    if site.has_quotas:
        tres = list(caps.accounting_storage_tres)
        if f"gres/{site.gres_name}" not in tres:
            why = f"GrpTRES=gres/{site.gres_name} quotas need the TRES tracked"
            value = ",".join([*tres, f"gres/{site.gres_name}"])
            out.append(_conf("AccountingStorageTRES", value, ",".join(tres), why))
    if (
        site.expedited_requeue
        and not caps.expedited_requeue
        and caps.version >= EXPEDITED_REQUEUE_SINCE
    ):
        have = caps.slurmctld_parameters
        value = ",".join((*have, "enable_expedited_requeue"))
        why = "jobs ask --requeue=expedite (site expedited_requeue)"
        out.append(_conf("SlurmctldParameters", value, ",".join(have), why))
    return out


def plan_site(site: SiteConfig, live: LiveState, caps: Capabilities) -> list[Change]:
    """The changes that make the cluster match ``site``, in the order they must run.

    Pure; empty when the cluster matches. Order: QOS creations, QOS settings, accounts
    created, account settings, user associations added, their settings, deletions of
    owned accounts and QOS, and last the slurm.conf settings (never run).
    """
    creates, modifies = _qos_changes(site, live)
    changes = creates + modifies
    if site.has_quotas:
        for group in _account_changes(site, live):
            changes += group
    changes += _deletions(site, live)
    changes += _slurm_conf_changes(site, caps)
    return changes


def apply(
    changes: Sequence[Change],
    runner: Runner,
    *,
    progress: Callable[[Change], None] | None = None,
) -> list[CommandResult]:
    """Run the ``sacctmgr`` changes in order (``slurm.conf`` ones are skipped).

    Args:
        changes: From :func:`plan_site`.
        runner: Where sacctmgr runs.
        progress: Called with each change before it runs.

    Raises:
        CommandFailed: A command failed; the ones before it were applied, none after it.
    """
    steps = [c for c in changes if c.kind == "sacctmgr"]
    results = []
    for number, change in enumerate(steps, 1):
        if progress is not None:
            progress(change)
        res = runner.run(change.argv, timeout=COMMAND_TIMEOUT)
        if not res.ok:
            raise CommandFailed(
                res,
                hint=f"step {number} of {len(steps)} failed ({change.reason}); the steps "
                "before it were applied. Fix the cause, then run hpclaunch site apply again "
                "(it plans from the cluster as it is then)",
            )
        results.append(res)
    return results


def _none(value: object) -> str:
    return "none" if value is None else str(value)
