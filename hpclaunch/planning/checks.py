"""Plans and site configs checked against the live cluster (:mod:`hpclaunch.slurm.capabilities`).

:func:`check_plan` finds what sbatch would reject (or silently mis-schedule) before the job
is submitted; :func:`check_site` lists every difference between a site YAML and the cluster.
Both are pure: they compare two values and return :class:`Problem` s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import PlanError
from hpclaunch.slurm.capabilities import (
    EXPEDITED_REQUEUE_SINCE,
    Capabilities,
    NodeInfo,
    PartitionInfo,
    names,
    slurm_release,
)
from hpclaunch.slurm.times import format_time, parse_time_limit

if TYPE_CHECKING:
    from hpclaunch.config.site import Partition, SiteConfig
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.siteplan import Change

__all__ = ["Problem", "check_plan", "check_site", "pending_problems", "raise_for_problems"]


@dataclass(frozen=True)
class Problem:
    """One mismatch with the cluster.

    Attributes:
        what: What is wrong, naming the item (``partition 'gpu2' does not exist``).
        allowed: What the cluster does allow, when that is a list of values.
        fix: What to change.
        where: The field it is about (``partition``, ``tiers.low.qos``, ...).
    """

    what: str
    fix: str
    where: str
    allowed: tuple[str, ...] = ()

    def __str__(self) -> str:
        allowed = f" (cluster has: {', '.join(self.allowed) or 'none'})" if self.allowed else ""
        return f"{self.where}: {self.what}{allowed}; fix: {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _fmt(seconds: int | None) -> str:
    return "UNLIMITED" if seconds is None else format_time(seconds)


# -- plans ------------------------------------------------------------------------------


def check_plan(plan: SubmissionPlan, caps: Capabilities) -> list[Problem]:
    """What in ``plan`` the cluster ``caps`` describes would refuse.

    Checks: the partition exists and is up; the QOS exists, is allowed on the partition and
    for the user's account; the account is one of the user's; some node of the partition has
    the GRES asked for (name, type, count), on enough nodes; the time is within MaxTime;
    the node count within MaxNodes; array indices below MaxArraySize; an expedited requeue
    only where the cluster offers it.
    """
    problems: list[Problem] = []
    part = caps.partition(plan.partition)
    if part is None:
        problems.append(
            Problem(
                f"partition {plan.partition!r} does not exist",
                "fix the partitions in the site config (hpclaunch site check)",
                "partition",
                tuple(names(caps.partitions)),
            )
        )
    else:
        problems += _partition_problems(plan, part, caps)
    problems += _qos_problems(plan, part, caps)
    problems += _account_problems(plan, caps)
    problems += _array_problems(plan, caps)
    if plan.expedited and not caps.expedited_requeue:
        problems.append(_no_expedite(caps, "expedited_requeue (site config)"))
    return problems


def _no_expedite(caps: Capabilities, where: str) -> Problem:
    """The site asks ``--requeue=expedite`` of a cluster that refuses it."""
    if caps.version < EXPEDITED_REQUEUE_SINCE:
        why = f"cluster {caps.cluster} runs Slurm {caps.slurm_version}, older than 25.11"
        fix = "set expedited_requeue: false in the site config"
    else:
        why = "its SlurmctldParameters lack enable_expedited_requeue (slurmctld refuses the job)"
        fix = (
            "add enable_expedited_requeue to SlurmctldParameters in slurm.conf (hpclaunch "
            "site plan shows the line), or set expedited_requeue: false in the site config"
        )
    return Problem(f"jobs ask Slurm's expedited requeue, but {why}", fix, where)


def _option(plan: SubmissionPlan, flag: str) -> str | None:
    try:
        return plan.option(flag)
    except KeyError:
        return None


def _partition_problems(
    plan: SubmissionPlan, part: PartitionInfo, caps: Capabilities
) -> list[Problem]:
    problems = []
    if part.state != "UP":
        problems.append(
            Problem(
                f"partition {part.name!r} is {part.state}, jobs will not start",
                "wait for the admins, or use another partition",
                "partition",
            )
        )
    time_opt = _option(plan, "--time")
    seconds = parse_time_limit(time_opt) if time_opt else None
    if seconds is not None and part.max_time is not None and seconds > part.max_time:
        problems.append(
            Problem(
                f"time {time_opt} is over partition {part.name}'s MaxTime {_fmt(part.max_time)}",
                f"ask for at most {_fmt(part.max_time)}, and checkpoint to continue after requeue",
                "resources.time",
            )
        )
    nodes = int(_option(plan, "--nodes") or 1)
    if nodes > part.node_limit:
        problems.append(
            Problem(
                f"{nodes} nodes asked, partition {part.name} allows {part.node_limit}",
                f"ask for at most {part.node_limit} nodes",
                "resources.nodes",
            )
        )
    problems += _gres_problems(plan, part, caps, nodes)
    return problems


_GRES_OPT = re.compile(r"^(?P<name>[^:]+)(?::(?P<type>[^:]+))?:(?P<count>\d+)$")
_GPN_OPT = re.compile(r"^(?:(?P<type>[^:]+):)?(?P<count>\d+)$")


def _gres_request(plan: SubmissionPlan) -> tuple[str, str | None, int] | None:
    gres = _option(plan, "--gres")
    if gres and (m := _GRES_OPT.match(gres)):
        return m["name"], m["type"], int(m["count"])
    gpn = _option(plan, "--gpus-per-node")
    if gpn and (m := _GPN_OPT.match(gpn)):
        return "gpu", m["type"], int(m["count"])
    return None


def _gres_problems(
    plan: SubmissionPlan, part: PartitionInfo, caps: Capabilities, nodes: int
) -> list[Problem]:
    wanted = _gres_request(plan)
    if wanted is None:
        return []
    name, gpu_type, count = wanted
    members = caps.nodes_of(part.name)
    have = sorted({_gres_label(n, name) for n in members} - {""})
    fitting = [n for n in members if n.gpus(name, gpu_type) >= count]
    label = f"{name}:{gpu_type}:{count}" if gpu_type else f"{name}:{count}"
    if not fitting:
        return [
            Problem(
                f"no node of partition {part.name} has {label} per node",
                "ask for a GRES type and count the partition has, or fix the site config",
                "resources.gpus_per_node",
                tuple(have),
            )
        ]
    if len(fitting) < nodes:
        return [
            Problem(
                f"{nodes} nodes with {label} asked, partition {part.name} has {len(fitting)}",
                f"ask for at most {len(fitting)} nodes",
                "resources.nodes",
            )
        ]
    return []


def _gres_label(node: NodeInfo, name: str) -> str:
    return ",".join(
        f"{g.name}:{g.type}:{g.count}" if g.type else f"{g.name}:{g.count}"
        for g in node.gres
        if g.name == name
    )


def _qos_problems(
    plan: SubmissionPlan, part: PartitionInfo | None, caps: Capabilities
) -> list[Problem]:
    if not plan.qos:
        return []
    problems = []
    if caps.qos is not None and caps.qos_named(plan.qos) is None:
        problems.append(
            Problem(
                f"QOS {plan.qos!r} (tier {plan.tier}) does not exist",
                "map the tier to an existing QOS in the site config's tiers",
                "qos",
                tuple(names(caps.qos)),
            )
        )
    if part is not None and (
        (part.allow_qos is not None and plan.qos not in part.allow_qos) or plan.qos in part.deny_qos
    ):
        problems.append(
            Problem(
                f"partition {part.name} does not accept QOS {plan.qos!r}",
                "use a tier whose QOS the partition allows",
                "qos",
                part.allow_qos or (),
            )
        )
    return problems


def _account_problems(plan: SubmissionPlan, caps: Capabilities) -> list[Problem]:
    if caps.associations is None:
        return []  # accounting unknown: sbatch will tell
    account = plan.account or caps.default_account
    accounts = sorted({a.account for a in caps.associations})
    mine = [
        a
        for a in caps.associations
        if account in (None, a.account) and a.partition in (None, plan.partition)
    ]
    if not mine:
        where = "project" if plan.account else "default account"
        return [
            Problem(
                f"user {caps.user} has no association with account {account!r}"
                + (f" on partition {plan.partition}" if account in accounts else ""),
                "set the spec's project (or the site's default_account) to one of your "
                "accounts, or ask the admins to add you (sacctmgr add user)",
                where,
                tuple(accounts),
            )
        ]
    allowed = sorted({q for a in mine if a.qos for q in a.qos})
    if plan.qos and allowed and plan.qos not in allowed:
        return [
            Problem(
                f"account {account} may not use QOS {plan.qos!r} (tier {plan.tier})",
                "pick a tier whose QOS your association allows, or another project",
                "qos",
                tuple(allowed),
            )
        ]
    return []


def _array_problems(plan: SubmissionPlan, caps: Capabilities) -> list[Problem]:
    array = _option(plan, "--array")
    if not array or caps.max_array_size is None:
        return []
    # Slurm: every index must be < MaxArraySize (slurm.conf(5), 22.05).
    top = max((int(n) for n in re.findall(r"\d+", array.split("%")[0])), default=0)
    if top < caps.max_array_size:
        return []
    return [
        Problem(
            f"array index {top} is not below MaxArraySize {caps.max_array_size}",
            f"use indices 0..{caps.max_array_size - 1}, or split the sweep",
            "array",
        )
    ]


def raise_for_problems(problems: Sequence[Problem], caps: Capabilities) -> None:
    """Raise one :class:`~hpclaunch.errors.PlanError` listing ``problems`` (if any)."""
    if not problems:
        return
    lines = "\n".join(f"  - {p}" for p in problems)
    raise PlanError(
        f"the job would not run on cluster {caps.cluster} as planned:\n{lines}",
        hint="fix the spec or the site config; hpclaunch site check lists site mismatches; "
        "--no-check skips this check (the cluster view may be up to a few minutes old: "
        "hpclaunch site show --refresh)",
    )


# -- site configs -----------------------------------------------------------------------


def check_site(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    """Every difference between ``site`` and the cluster ``caps`` describes."""
    problems = _version_problems(site, caps)
    problems += _partition_set_problems(site, caps)
    for yaml_part in site.partitions:
        part = caps.partition(yaml_part.name)
        if part is not None:
            problems += _site_partition_problems(site, yaml_part, part, caps)
    problems += _tier_problems(site, caps)
    problems += _preemption_problems(site, caps)
    problems += _overquota_order_problems(site, caps)
    problems += _default_account_problems(site, caps)
    if site.expedited_requeue and not caps.expedited_requeue:
        problems.append(_no_expedite(caps, "expedited_requeue"))
    return problems


def _version_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    """The login node's Slurm commands should be the controller's release: Slurm supports
    older clients only within its protocol window, and their options and output formats
    differ between releases (the formats hpclaunch reads are tested per release)."""
    client = slurm_release(caps.client_version)
    if client == (0, 0) or client == caps.version:
        return []
    where = f"slurm_bin {site.slurm_bin}" if site.slurm_bin else "PATH"
    return [
        Problem(
            f"the Slurm commands found on {where} are {caps.client_version}, but the cluster "
            f"runs {caps.slurm_version}",
            "use the cluster's own release of the client commands: put them first on PATH, "
            "or set slurm_bin in the site config to their directory",
            "slurm_bin",
        )
    ]


def _partition_set_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    ours = {p.name for p in site.partitions}
    theirs = {p.name for p in caps.partitions}
    problems = [
        Problem(
            f"partition {name!r} is in the site config but not on the cluster",
            "remove it or rename it to a cluster partition",
            f"partitions.{name}",
            tuple(sorted(theirs)),
        )
        for name in sorted(ours - theirs)
    ]
    problems += [
        Problem(
            f"partition {name!r} is on the cluster but not in the site config",
            "add it under partitions: (or ignore this if jobs must not use it)",
            f"partitions.{name}",
        )
        for name in sorted(theirs - ours)
    ]
    ours_default = next((p.name for p in site.partitions if p.default), None)
    theirs_default = next((p.name for p in caps.partitions if p.default), None)
    if ours_default != theirs_default and theirs_default in ours | {None}:
        problems.append(
            Problem(
                f"default partition is {ours_default!r} in the site config, "
                f"{theirs_default!r} on the cluster",
                f"mark {theirs_default} as default: true",
                "partitions.default",
            )
        )
    return problems


def _site_partition_problems(
    site: SiteConfig, ours: Partition, part: PartitionInfo, caps: Capabilities
) -> list[Problem]:
    where = f"partitions.{ours.name}"
    problems = []
    if part.state != "UP":
        problems.append(Problem(f"partition {part.name} is {part.state}", "none", where))
    if ours.max_time_seconds != part.max_time:
        problems.append(
            Problem(
                f"max_time {_fmt(ours.max_time_seconds)} differs from the cluster's MaxTime "
                f"{_fmt(part.max_time)}",
                f"set max_time: {_fmt(part.max_time)}",
                f"{where}.max_time",
            )
        )
    if ours.max_nodes is not None and ours.max_nodes != part.node_limit:
        problems.append(
            Problem(
                f"max_nodes {ours.max_nodes} differs from the cluster's limit "
                f"{part.node_limit} (MaxNodes, or the partition's node count)",
                f"set max_nodes: {part.node_limit}",
                f"{where}.max_nodes",
            )
        )
    members = caps.nodes_of(part.name)
    gpus = sorted({n.gpus(site.gres_name) for n in members})
    if members and gpus != [ours.gpus_per_node]:
        problems.append(
            Problem(
                f"gpus_per_node {ours.gpus_per_node} differs from the nodes' "
                f"{site.gres_name} GRES count ({', '.join(map(str, gpus))})",
                f"set gpus_per_node: {min(gpus)} (the smallest node)",
                f"{where}.gpus_per_node",
            )
        )
    types = sorted({g.type or "" for n in members for g in n.gres if g.name == site.gres_name})
    if ours.gpus_per_node and types and (ours.gpu_type or "") not in types:
        problems.append(
            Problem(
                f"gpu_type {ours.gpu_type!r} is not the nodes' GRES type",
                "set gpu_type to the type the nodes report (drop it for untyped GRES)",
                f"{where}.gpu_type",
                tuple(t or "(untyped)" for t in types),
            )
        )
    cpus = sorted({n.cpus for n in members if n.cpus is not None})
    if cpus and cpus != [ours.cpus_per_node]:
        problems.append(
            Problem(
                f"cpus_per_node {ours.cpus_per_node} differs from the nodes' CPUs "
                f"({', '.join(map(str, cpus))})",
                f"set cpus_per_node: {min(cpus)}",
                f"{where}.cpus_per_node",
            )
        )
    return problems


def _preempted_by(qos: str, caps: Capabilities) -> list[str]:
    return sorted(q.name for q in caps.qos or () if qos in q.preempt)


def _tier_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    if caps.qos is None:
        return []
    problems = []
    for tier, policy in site.tiers.items():
        where = f"tiers.{tier}"
        qos = caps.qos_named(policy.qos)
        if qos is None:
            problems.append(
                Problem(
                    f"QOS {policy.qos!r} does not exist",
                    "name an existing QOS (sacctmgr show qos)",
                    f"{where}.qos",
                    tuple(names(caps.qos)),
                )
            )
            continue
        by = _preempted_by(policy.qos, caps)
        if policy.preemptible and not by:
            problems.append(
                Problem(
                    f"tier is preemptible, but no QOS lists {policy.qos} in its Preempt",
                    "set preemptible: false, or have the admins add it to a higher QOS's Preempt",
                    f"{where}.preemptible",
                )
            )
        if not policy.preemptible and by:
            problems.append(
                Problem(
                    f"tier is not preemptible, but QOS {', '.join(by)} can preempt {policy.qos}",
                    "set preemptible: true (and a grace), so jobs get --requeue and --signal",
                    f"{where}.preemptible",
                )
            )
        grace = qos.grace_time or 0
        if policy.preemptible and policy.grace != grace:
            problems.append(
                Problem(
                    f"grace {policy.grace} s differs from QOS {qos.name}'s GraceTime {grace} s",
                    f"set grace: {grace}",
                    f"{where}.grace",
                )
            )
        if caps.associations:
            allowed = {q for a in caps.associations if a.qos for q in a.qos}
            if allowed and policy.qos not in allowed:
                problems.append(
                    Problem(
                        f"user {caps.user} may not use QOS {policy.qos}",
                        "map the tier to a QOS your associations allow",
                        f"{where}.qos",
                        tuple(sorted(allowed)),
                    )
                )
    return problems


def _overquota_order_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    """Over-quota jobs keep their tiers' order by ``--nice`` steps under one QOS
    (:func:`hpclaunch.planning.quota.place`). priority/multifactor (22.05) adds ``PriorityWeightQOS
    * QOS priority / the highest QOS priority`` and subtracts the nice; a priority under 1 is
    raised to 1, so when the steps eat the over-quota QOS's share, medium and high over-quota
    jobs tie with each other or fall to the preemptible tiers' level."""
    over = site.overquota
    if not site.has_quotas or over.nice_step == 0 or not caps.priority_weight_qos:
        return []
    priorities = [q.priority for q in caps.qos or ()] or [
        p.priority or 0 for p in site.tiers.values()
    ]
    top = max([*priorities, over.priority, 1])
    share = caps.priority_weight_qos * over.priority / top
    floor = max(
        [
            caps.priority_weight_qos * (p.priority or 0) / top
            for p in site.tiers.values()
            if p.preemptible
        ]
        or [0.0]
    )
    lowest = share - 2 * over.nice_step  # medium over-quota: two steps below critical
    if lowest > max(floor, 0):
        return []
    fits = int((share - max(floor, 0)) // 2)
    return [
        Problem(
            f"over-quota jobs of tiers critical, high and medium get --nice 0, {over.nice_step} "
            f"and {2 * over.nice_step} under QOS {over.qos}, whose priority share is only "
            f"{share:.0f} (PriorityWeightQOS {caps.priority_weight_qos} x {over.priority}/{top}): "
            "medium over-quota jobs would not stay above the preemptible tiers, or tie with high",
            f"set overquota.nice_step below {max(fits, 1)}, or raise the QOS's priority or "
            "PriorityWeightQOS",
            "overquota.nice_step",
        )
    ]


def _preemption_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    preemptible = [tier for tier, p in site.tiers.items() if p.preemptible]
    if not preemptible:
        return []
    tiers = ", ".join(preemptible)
    problems = []
    if caps.preempt_type != "preempt/qos":
        problems.append(
            Problem(
                f"tiers {tiers} rely on QOS preemption, but PreemptType is {caps.preempt_type}",
                "have the admins set PreemptType=preempt/qos, or make no tier preemptible",
                "tiers",
            )
        )
    if caps.preempt_mode.split(",")[0].upper() not in {"REQUEUE"} and not _qos_requeue(site, caps):
        problems.append(
            Problem(
                f"tiers {tiers} expect requeue on preemption, but PreemptMode is "
                f"{caps.preempt_mode}",
                "have the admins set PreemptMode=REQUEUE (cluster or QOS)",
                "tiers",
            )
        )
    # Without it the batch shell gets --signal=B:... only at the end of GraceTime, not at
    # preemption (slurm.conf(5); tested on the local cluster, 22.05 and 25.11).
    if not caps.signals_at_preemption:
        setting = caps.send_user_signal_setting
        problems.append(
            Problem(
                f"tiers {tiers} use --signal at preemption, but slurm.conf lacks "
                f"{setting}: the job is signalled only when GraceTime ends",
                f"have the admins add {setting}",
                "tiers",
            )
        )
    return problems


def _qos_requeue(site: SiteConfig, caps: Capabilities) -> bool:
    modes = [
        q.preempt_mode.upper()
        for t in site.tiers.values()
        if t.preemptible and (q := caps.qos_named(t.qos)) is not None
    ]
    return bool(modes) and all(m == "REQUEUE" for m in modes)


def _default_account_problems(site: SiteConfig, caps: Capabilities) -> list[Problem]:
    if site.default_account is None or caps.associations is None:
        return []
    accounts = sorted({a.account for a in caps.associations})
    if site.default_account in accounts:
        return []
    return [
        Problem(
            f"default_account {site.default_account!r} is not one of user {caps.user}'s accounts",
            "set default_account to one of them",
            "default_account",
            tuple(accounts),
        )
    ]


def pending_problems(changes: Sequence[Change]) -> list[Problem]:
    """The changes ``hpclaunch site plan`` still has to make, as problems."""
    problems = []
    for change in changes:
        if change.kind == "sacctmgr":
            fix = f"hpclaunch site apply (runs: {change.command})"
        else:
            fix = f"set {change.setting.split()[0]} in slurm.conf, then scontrol reconfigure"
        problems.append(Problem(change.reason, fix, f"site plan ({change.kind})"))
    return problems
