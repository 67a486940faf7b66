"""``hpclaunch cost``: GPU-hours (and money) per project, tier and user in a period.

The usage comes from the backend, one line per attempt (:mod:`hpclaunch.slurm.usage`).
Grouping: *project* is the account, with a project's over-quota account (``P-oq``) counted
towards ``P``; *tier* is the tier whose QOS the attempt ran with, ``over-quota`` for the
over-quota QOS, else ``qos:<name>``; *user* is Slurm's user. Attempts without GPUs are left
out. Money uses the site's ``prices`` (per GPU type where ``AllocTRES`` names the type).

Charged GPU-hours are the GPU-hours times the usage factor of the attempt's QOS (the site
config's ``usage_factor``, which ``site apply`` sets as the QOS ``UsageFactor``): what
Slurm's fair share counts. Money is on the raw GPU-hours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hpclaunch.backends.abilities import accounting_of
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import ConfigError
from hpclaunch.ops.context import Context, slurm_user
from hpclaunch.slurm.usage import SACCT_TIME, AttemptUsage

__all__ = ["GROUP_KEYS", "CostReport", "CostRow", "gpu_cost", "report", "tier_of_qos"]

GROUP_KEYS = ("project", "tier", "user")


@dataclass(frozen=True)
class CostRow:
    """One group: its key values (in ``by`` order), jobs, GPU-hours, and money."""

    keys: tuple[str, ...]
    jobs: int
    gpu_hours: float
    cost: float | None
    charged_hours: float = 0.0


@dataclass(frozen=True)
class CostReport:
    """The grouped usage of a period; ``cost``/``currency`` are ``None`` without prices."""

    since: datetime
    until: datetime
    by: tuple[str, ...]
    rows: tuple[CostRow, ...]
    total: CostRow
    currency: str | None
    attempts: tuple[dict[str, object], ...]
    #: Whose jobs: the Slurm user, or ``None`` for everyone's.
    user: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON shape of ``hpclaunch cost --json``."""

        def row(r: CostRow) -> dict[str, object]:
            out: dict[str, object] = dict(zip(self.by, r.keys, strict=True))
            out.update(jobs=r.jobs, gpu_hours=r.gpu_hours, charged_gpu_hours=r.charged_hours)
            if self.currency is not None:
                out["cost"] = r.cost
            return out

        return {
            "since": self.since.strftime(SACCT_TIME),
            "until": self.until.strftime(SACCT_TIME),
            "by": list(self.by),
            "user": self.user,
            "currency": self.currency,
            "groups": [row(r) for r in self.rows],
            "total": {k: v for k, v in row(self.total).items() if k not in self.by},
            "attempts": list(self.attempts),
        }


def gpu_cost(
    ctx: Context,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    by: Sequence[str] = ("project",),
    all_users: bool = False,
) -> CostReport:
    """GPU-hours and money of your jobs (``all_users``: everyone's) from ``since`` (default:
    the first of this month) to ``until`` (default: now), naive local times, grouped ``by``.

    Raises:
        ConfigError: The period is empty.
    """

    now = datetime.now().replace(microsecond=0)
    until = until or now
    since = since or now.replace(day=1, hour=0, minute=0, second=0)
    if since >= until:
        raise ConfigError(
            f"the period is empty: --since {since:%Y-%m-%dT%H:%M:%S} is not before "
            f"--until {until:%Y-%m-%dT%H:%M:%S}",
            hint="give --since an earlier time than --until",
        )
    user = None if all_users else slurm_user(ctx)
    usage = report(
        accounting_of(ctx.backend).usage(since, until, user),
        ctx.site_config,
        since,
        until,
        tuple(by),
    )
    return dataclasses.replace(usage, user=user)


def tier_of_qos(site: SiteConfig, qos: str) -> str:
    """The tier of a QOS (``over-quota`` for the over-quota QOS, else ``qos:<name>``)."""
    tier = site.tier_of_qos(qos)
    if tier is not None:
        return tier
    if site.has_quotas and qos == site.overquota.qos:
        return "over-quota"
    return f"qos:{qos}"


def report(
    usages: Iterable[AttemptUsage],
    site: SiteConfig,
    since: datetime,
    until: datetime,
    by: Sequence[str] = ("project",),
) -> CostReport:
    """Group the attempts' GPU-hours (and money, with the site's ``prices``) by ``by``."""
    bad = [key for key in by if key not in GROUP_KEYS]
    if bad or not by:
        raise ValueError(f"group by {', '.join(GROUP_KEYS)}; got {', '.join(bad) or 'nothing'}")
    prices = site.prices
    groups: dict[tuple[str, ...], tuple[set[str], float, float, float]] = {}
    attempts: list[dict[str, object]] = []
    for usage in usages:
        seconds = usage.seconds_in(since, until)
        if usage.gpus <= 0 or seconds <= 0:
            continue
        values = {
            "project": site.project_of(usage.account),
            "tier": tier_of_qos(site, usage.qos),
            "user": usage.user,
        }
        hours = usage.gpus * seconds / 3600
        charged = hours * site.usage_factor_of(usage.qos)
        money = prices.cost(usage.gpus, usage.typed, seconds / 3600) if prices else 0.0
        key = tuple(values[k] for k in by)
        jobs, used, cost, counted = groups.get(key, (set(), 0.0, 0.0, 0.0))
        groups[key] = (jobs | {usage.job_id}, used + hours, cost + money, counted + charged)
        attempts.append(
            {
                "job_id": usage.job_id,
                **values,
                "account": usage.account,
                "qos": usage.qos,
                "state": usage.state,
                "gpus": usage.gpus,
                "seconds": seconds,
                "gpu_hours": hours,
                "charged_gpu_hours": charged,
            }
        )
    rows = tuple(
        CostRow(key, len(jobs), hours, cost if prices else None, charged)
        for key, (jobs, hours, cost, charged) in sorted(groups.items())
    )
    all_jobs = set().union(*(g[0] for g in groups.values())) if groups else set()
    total = CostRow(
        ("TOTAL",) + ("",) * (len(by) - 1),
        len(all_jobs),
        sum(r.gpu_hours for r in rows),
        sum(r.cost or 0.0 for r in rows) if prices else None,
        sum(r.charged_hours for r in rows),
    )
    currency = prices.currency if prices else None
    return CostReport(since, until, tuple(by), rows, total, currency, tuple(attempts))
