"""GPU-hours (and money) per project, tier and user, from one ``sacct`` call.

``hpclaunch cost`` asks ``sacct -X -D -n -P -S SINCE -E UNTIL --format=COST_FIELDS`` (with
``-a`` for all users, else ``--user=<you>``) and reads one line per *attempt*: with
``--allocations`` alone, Slurm 22.05 prints only a requeued job's last run (checked on the
local cluster: a job requeued after 3 s and then run 6 s shows ``ElapsedRaw`` 6 without
``--duplicates``, and two lines, 3 and 6, with it). Every attempt held its GPUs, so each is
counted once.

GPU-hours of an attempt = ``gres/gpu`` count in ``AllocTRES`` x seconds / 3600. The seconds
are ``ElapsedRaw`` for an attempt inside the period. One that straddles it is clipped to the
overlap of [Start, End] with [SINCE, UNTIL) (a running attempt ends at Start + ElapsedRaw,
sacct's elapsed time up to now), and never counted above ``ElapsedRaw`` (suspended time is
not in it). Times are sacct's: the cluster's local time.

Grouping: *project* is the account, with a project's over-quota account (``P-oq``) counted
towards ``P``; *tier* is the tier whose QOS the attempt ran with, ``over-quota`` for the
over-quota QOS, else ``qos:<name>``; *user* is Slurm's user. Attempts without GPUs are left
out. Money uses the site's ``prices`` (per GPU type where ``AllocTRES`` names the type).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hpclaunch.config.site import SiteConfig
from hpclaunch.slurm.tres import tres_gpus

__all__ = [
    "COST_FIELDS",
    "GROUP_KEYS",
    "AttemptUsage",
    "CostReport",
    "CostRow",
    "cost_argv",
    "parse_usage",
    "parse_when",
    "report",
    "tier_of_qos",
]

COST_FIELDS = (
    "JobID",
    "User",
    "Account",
    "QOS",
    "State",
    "ElapsedRaw",
    "AllocTRES",
    "Start",
    "End",
)
GROUP_KEYS = ("project", "tier", "user")
#: sacct's time format for -S/-E (local time of the cluster).
SACCT_TIME = "%Y-%m-%dT%H:%M:%S"
_RELATIVE = re.compile(r"^(\d+)\s*(min|h|d|w)$")
_UNITS = {"min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class AttemptUsage:
    """One sacct line: one attempt of one job (or array task).

    Attributes:
        gpus: The allocated GPUs (untyped ``gres/gpu`` total).
        typed: GPUs per type, where ``AllocTRES`` names types (``gres/gpu:a100=2``).
        start, end: ``None`` when sacct says ``Unknown`` (pending; running).
    """

    job_id: str
    user: str
    account: str
    qos: str
    state: str
    elapsed: int
    gpus: int
    start: datetime | None
    end: datetime | None
    typed: Mapping[str, int] = field(default_factory=dict)

    def seconds_in(self, since: datetime, until: datetime) -> float:
        """The attempt's run time inside [since, until) (see the module docstring)."""
        if self.elapsed <= 0 or self.start is None:
            return 0.0
        end = self.end if self.end is not None else self.start + timedelta(seconds=self.elapsed)
        overlap = (min(end, until) - max(self.start, since)).total_seconds()
        return float(min(max(overlap, 0.0), self.elapsed))


@dataclass(frozen=True)
class CostRow:
    """One group: its key values (in ``by`` order), jobs, GPU-hours, and money."""

    keys: tuple[str, ...]
    jobs: int
    gpu_hours: float
    cost: float | None


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

    def to_dict(self) -> dict[str, object]:
        """The JSON shape of ``hpclaunch cost --json``."""

        def row(r: CostRow) -> dict[str, object]:
            out: dict[str, object] = dict(zip(self.by, r.keys, strict=True))
            out.update(jobs=r.jobs, gpu_hours=r.gpu_hours)
            if self.currency is not None:
                out["cost"] = r.cost
            return out

        return {
            "since": self.since.strftime(SACCT_TIME),
            "until": self.until.strftime(SACCT_TIME),
            "by": list(self.by),
            "currency": self.currency,
            "groups": [row(r) for r in self.rows],
            "total": {k: v for k, v in row(self.total).items() if k not in self.by},
            "attempts": list(self.attempts),
        }


def parse_when(text: str, now: datetime) -> datetime:
    """A time given on the command line, as a naive local datetime.

    ``now``, ``today``, ``7d``/``12h``/``30min``/``2w`` (that long before ``now``), or ISO
    8601 (``2026-11-01``, ``2026-11-01T08:00``; an offset is converted to local time).

    Raises:
        ValueError: None of these.
    """
    text = text.strip()
    if text == "now":
        return now
    if text == "today":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    match = _RELATIVE.match(text)
    if match:
        return now - timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use 2026-11-01, 2026-11-01T08:00, today, now, "
            "or 7d / 12h / 30min / 2w ago"
        ) from None
    return when.astimezone().replace(tzinfo=None) if when.tzinfo else when


def cost_argv(
    since: datetime, until: datetime, *, all_users: bool, user: str | None = None
) -> list[str]:
    """The one sacct call: every attempt (``-D``) of every allocation (``-X``) that was
    around in [since, until); all users', or ``user``'s (default: whoever runs sacct)."""
    who = ["-a"] if all_users else ([f"--user={user}"] if user else [])
    return [
        "sacct",
        *who,
        "-X",
        "-D",
        "-n",
        "-P",
        "-S",
        since.strftime(SACCT_TIME),
        "-E",
        until.strftime(SACCT_TIME),
        f"--format={','.join(COST_FIELDS)}",
    ]


def parse_usage(stdout: str, gres: str = "gpu") -> list[AttemptUsage]:
    """Parse :func:`cost_argv`'s lines; lines of another shape are skipped."""
    usages = []
    for line in stdout.splitlines():
        cols = line.split("|")
        if len(cols) != len(COST_FIELDS) or not cols[0].strip():
            continue
        job_id, user, account, qos, state, elapsed, tres, start, end = (c.strip() for c in cols)
        gpus, typed = tres_gpus(tres, gres)
        usages.append(
            AttemptUsage(
                job_id=job_id,
                user=user,
                account=account,
                qos=qos,
                state=state.split(" ")[0],  # "CANCELLED by 0"
                elapsed=int(elapsed) if elapsed.isdigit() else 0,
                gpus=gpus,
                start=_time(start),
                end=_time(end),
                typed=typed,
            )
        )
    return usages


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # Unknown, None
        return None


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
    groups: dict[tuple[str, ...], tuple[set[str], float, float]] = {}
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
        money = prices.cost(usage.gpus, usage.typed, seconds / 3600) if prices else 0.0
        key = tuple(values[k] for k in by)
        jobs, used, cost = groups.get(key, (set(), 0.0, 0.0))
        groups[key] = (jobs | {usage.job_id}, used + hours, cost + money)
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
            }
        )
    rows = tuple(
        CostRow(key, len(jobs), hours, cost if prices else None)
        for key, (jobs, hours, cost) in sorted(groups.items())
    )
    all_jobs = set().union(*(g[0] for g in groups.values())) if groups else set()
    total = CostRow(
        ("TOTAL",) + ("",) * (len(by) - 1),
        len(all_jobs),
        sum(r.gpu_hours for r in rows),
        sum(r.cost or 0.0 for r in rows) if prices else None,
    )
    currency = prices.currency if prices else None
    return CostReport(since, until, tuple(by), rows, total, currency, tuple(attempts))
