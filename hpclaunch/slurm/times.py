"""Slurm time limits: parse the formats sbatch accepts, and print them back.

sbatch(1) ``--time`` (Slurm 22.05) accepts ``minutes``, ``minutes:seconds``,
``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes`` and
``days-hours:minutes:seconds``. A bare number means **minutes**, also in slurm.conf's
``MaxTime``. ``UNLIMITED``/``INFINITE`` mean no limit (partitions only).
"""

from __future__ import annotations

import re
from datetime import datetime

__all__ = [
    "clock_text",
    "expected_start_text",
    "format_elapsed",
    "format_time",
    "parse_cpu_time",
    "parse_elapsed",
    "parse_time",
    "parse_time_limit",
    "read_time_limit",
    "slurm_epoch",
]

_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_CLOCK = re.compile(r"^\d+(?::\d+){0,2}$")
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE"})

FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"


def parse_time(value: str | int) -> int:
    """Parse a Slurm time limit into seconds.

    Args:
        value: A Slurm time string, or an int meaning minutes (as in YAML ``time: 30``).

    Returns:
        The limit in seconds, always > 0.

    Raises:
        ValueError: The value is not a Slurm time or is zero (Slurm reads 0 as "no limit").
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a time limit ({FORMATS}), got {value!r}")
    seconds = value * 60 if isinstance(value, int) else _parse_str(value.strip())
    if seconds <= 0:
        raise ValueError("time limit must be more than zero (Slurm reads 0 as 'no limit')")
    return seconds


def parse_time_limit(value: str | int | None) -> int | None:
    """Like :func:`parse_time`, but ``None``, ``UNLIMITED`` and ``INFINITE`` give ``None``."""
    if value is None or (isinstance(value, str) and value.strip().upper() in _UNLIMITED):
        return None
    return parse_time(value)


def read_time_limit(value: str | None) -> int | None:
    """A time limit as Slurm prints one (sacct ``Timelimit``, sacctmgr ``GraceTime`` and
    ``MaxWall``) in seconds; ``None`` when unlimited, unset or not a time
    (``Partition_Limit``)."""
    try:
        return parse_time_limit(value)
    except ValueError:
        return None


def _parse_str(text: str) -> int:
    days = _DAYS.match(text)
    if days:
        d, h, m, s = (int(g) if g else 0 for g in days.groups())
        return _checked(((d * 24 + h) * 60 + m) * 60 + s, h, m, s, text)
    if _CLOCK.match(text):
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:  # minutes
            return parts[0] * 60
        if len(parts) == 2:  # minutes:seconds
            return _checked(parts[0] * 60 + parts[1], 0, 0, parts[1], text)
        h, m, s = parts
        return _checked((h * 60 + m) * 60 + s, 0, m, s, text)
    raise ValueError(f"{text!r} is not a Slurm time; use {FORMATS}{_guess(text)}")


_UNIT = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|hours?|d|days?)$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _guess(text: str) -> str:
    """``2h`` → ``: for 2h write 02:00:00`` (units are not Slurm's); else nothing."""
    match = _UNIT.match(text.strip())
    if match is None:
        return ""
    seconds = round(float(match.group(1)) * _UNIT_SECONDS[match.group(2)[0].lower()])
    if seconds <= 0:
        return ""
    return f": for {text.strip()} write {format_time(seconds)}"


def _checked(total: int, hours: int, minutes: int, seconds: int, text: str) -> int:
    # Slurm itself rolls over e.g. 90 minutes, but in a D-HH form it is surely a typo.
    if hours > 23 and "-" in text:
        raise ValueError(f"{text!r}: hours must be below 24 after 'D-'")
    if minutes > 59 or seconds > 59:
        raise ValueError(f"{text!r}: minutes and seconds must be below 60")
    return total


def format_time(seconds: int) -> str:
    """Format seconds as ``HH:MM:SS``, or ``D-HH:MM:SS`` from one day on."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def parse_elapsed(text: str | None) -> int | None:
    """A run time as squeue (``[D-][H:]M:SS``) or sacct (``[D-]HH:MM:SS``) prints it, in
    seconds; ``None`` when unreadable."""
    if not text:
        return None
    days, _, clock = text.strip().rpartition("-")
    try:
        seconds = 0
        for part in clock.split(":"):
            seconds = seconds * 60 + int(part)
        return (int(days) * 86400 if days else 0) + seconds
    except ValueError:
        return None


def parse_cpu_time(text: str | None) -> float | None:
    """CPU time as sacct prints it (``TotalCPU``: ``[D-][HH:]MM:SS[.mmm]``) in seconds;
    ``None`` when empty or unreadable."""
    if not text:
        return None
    whole, _, fraction = text.strip().partition(".")
    seconds = parse_elapsed(whole)
    if seconds is None or (fraction and not fraction.isdigit()):
        return None
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


def format_elapsed(seconds: int | None) -> str:
    """``1-02:03:04`` / ``2:03:04`` / ``3:04``, like squeue's time columns (``""``: unknown)."""
    if seconds is None:
        return ""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def slurm_epoch(text: str | None) -> float | None:
    """A time as squeue, sacct and scontrol print it (``2026-11-28T10:00:05``: the cluster's
    local time, no zone) in unix seconds, read as this machine's local time; ``None`` for
    none, ``Unknown``, ``N/A`` and the like."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def clock_text(when: float, now: float | None = None) -> str:
    """``14:20`` on the day of ``now`` (default: the wall clock), ``11-29 14:20`` on another
    day (this machine's local time)."""
    local = datetime.fromtimestamp(when)
    today = datetime.now() if now is None else datetime.fromtimestamp(now)
    same_day = local.date() == today.date()
    return local.strftime("%H:%M" if same_day else "%m-%d %H:%M")


def expected_start_text(start: str | None) -> str:
    """Slurm's expected start (:func:`slurm_epoch`'s text) as ``~15:00`` or
    ``~11-29 15:00`` (``""``: none)."""
    when = slurm_epoch(start)
    return "" if when is None else f"~{clock_text(when)}"
