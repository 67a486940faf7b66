"""The site against the live cluster (``hpclaunch site check|plan|apply``,
``session.site.check``, ``.plan``, ``.apply``).

``check``: the site config against the cluster's capabilities (partitions, GRES, QOS,
accounts), where accounting can be read the sacctmgr changes still pending, and when the
site offers containers whether their runtimes are on a compute node (one short srun,
:mod:`hpclaunch.slurm.runtime_probe`). ``plan``:
those changes (:mod:`hpclaunch.planning.siteplan`). ``apply``: run them, then plan again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpclaunch.errors import TransportError
from hpclaunch.planning.checks import Problem, check_site, pending_problems
from hpclaunch.planning.siteplan import apply, plan_site
from hpclaunch.slurm.accounting import read_live
from hpclaunch.slurm.runtime_probe import probe_runtimes

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.planning.siteplan import Change
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.slurm.runtime_probe import RuntimeProbe

__all__ = ["SiteCheck", "SitePlan", "apply_site", "check_site_live", "plan_site_live"]


@dataclass(frozen=True)
class SiteCheck:
    """What ``site check`` found.

    Attributes:
        caps: The cluster as discovered (or cached).
        problems: Where the site config and the cluster differ (empty: they match).
        plan_not_checked: Why the pending sacctmgr changes were not read (``None``: read).
        runtimes: The container runtimes found on a node (``None``: the site has none).
    """

    caps: Capabilities
    problems: list[Problem]
    plan_not_checked: str | None = None
    runtimes: RuntimeProbe | None = None


@dataclass(frozen=True)
class SitePlan:
    """The sacctmgr commands (and slurm.conf settings) that make the cluster match."""

    caps: Capabilities
    changes: list[Change]

    @property
    def commands(self) -> list[Change]:
        """The changes sacctmgr makes (the rest are slurm.conf settings for an admin)."""
        return [c for c in self.changes if c.kind == "sacctmgr"]


def check_site_live(ctx: Context, *, refresh: bool = False) -> SiteCheck:
    """The site config against the cluster (``refresh``: ask it now, not the cache)."""

    caps = ctx.capabilities(refresh=refresh)
    problems = check_site(ctx.site_config, caps)
    runtimes = _probe_runtimes(ctx)
    if runtimes is not None:
        problems += runtime_problems(runtimes)
    if caps.accounting_problem is not None:
        return SiteCheck(caps, problems, runtimes=runtimes)
    # The accounting state is not cached: read now (three sacctmgr calls).
    try:
        problems += pending_problems(_changes(ctx, caps))
    except TransportError as exc:
        return SiteCheck(caps, problems, exc.message.splitlines()[0], runtimes)
    return SiteCheck(caps, problems, runtimes=runtimes)


def _probe_runtimes(ctx: Context) -> RuntimeProbe | None:
    """The site's container runtimes looked for on a node of its default partition, with
    its default account and the medium tier's QOS (the probe is an ordinary small job)."""
    site = ctx.site_config
    if site.containers is None:
        return None

    default = next((p.name for p in site.partitions if p.default), None)
    medium = site.tiers.get("medium")
    return probe_runtimes(
        ctx.runner,
        site.containers.runtimes,
        partition=default,
        account=site.default_account,
        qos=medium.qos if medium else None,
    )


def runtime_problems(probe: RuntimeProbe) -> list[Problem]:
    """Each runtime the probe did not find, as a problem of ``containers.runtimes``."""

    return [
        Problem(
            what=f"container runtime {f.runtime!r} is not usable on {f.node}: {f.detail}",
            fix=f"install it on the nodes, or remove {f.runtime!r} from containers.runtimes",
            where="containers.runtimes",
        )
        for f in probe.findings
        if not f.ok
    ]


def plan_site_live(ctx: Context) -> SitePlan:
    """What would make the cluster's QOS and accounts match the site (asked now)."""
    caps = ctx.capabilities(refresh=True)
    return SitePlan(caps, _changes(ctx, caps))


def apply_site(
    ctx: Context, plan: SitePlan, *, progress: Callable[[Change], None] | None = None
) -> SitePlan:
    """Run ``plan``'s sacctmgr commands in order; then what is left to do (asked again).

    Raises:
        CommandFailed: A command failed (those before it stay applied).
    """

    try:
        apply(plan.changes, ctx.runner, progress=progress)
    finally:
        caps = ctx.capabilities(refresh=True)  # the cached QOS and accounts are stale now
    return SitePlan(caps, _changes(ctx, caps))


def _changes(ctx: Context, caps: Capabilities) -> list[Change]:
    return plan_site(ctx.site_config, read_live(ctx.runner, caps.cluster), caps)
