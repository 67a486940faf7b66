"""What each attempt of a job used, from one ``sacct`` call (``hpclaunch cost``).

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

The grouping and the money are :mod:`hpclaunch.ops.cost`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hpclaunch.slurm.tres import tres_gpus

__all__ = [
    "COST_FIELDS",
    "AttemptUsage",
    "cost_argv",
    "parse_age",
    "parse_usage",
    "parse_when",
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


def parse_age(text: str) -> timedelta:
    """A length of time as the command line takes it: ``30min``, ``12h``, ``7d``, ``2w``.

    Raises:
        ValueError: Not one of these.
    """
    match = _RELATIVE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a length of time: use 30min, 12h, 7d or 2w")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


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
    if _RELATIVE.match(text):
        return now - parse_age(text)
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
