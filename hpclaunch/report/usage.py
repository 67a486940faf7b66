"""What a job was given against what it used, from Slurm's accounting of each attempt (the
figures seff and reportseff print): GPU-hours, CPU and memory efficiency, the share of the
time limit it ran, and advice when the ask was far above the use.

From :class:`~hpclaunch.slurm.jobs.Attempt` (``sacct --duplicates``: ``Elapsed``,
``Timelimit``, ``AllocCPUS``, ``TotalCPU``, ``AllocTRES`` and the steps' ``TRESUsageInTot``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch.slurm.times import format_elapsed, parse_elapsed
from hpclaunch.slurm.tres import parse_size, tres_gpus, tres_text

if TYPE_CHECKING:
    from hpclaunch.slurm.jobs import Attempt

__all__ = ["JobUsage", "advise_usage", "format_size", "summarise_usage"]

#: Below this share of what was asked, the ask is worth cutting (seff-style reports use
#: similar lines; Princeton's jobstats flags memory under a quarter used).
_FAR_BELOW = 0.25
#: Smaller asks are not worth a line of advice.
_MIN_MEM_ASKED = 4 << 30
_MIN_LIMIT_SPARE = 30 * 60
_MIN_CPUS = 4


@dataclass(frozen=True)
class JobUsage:
    """A job's use of what it was given, over all its attempts.

    Attributes:
        ran_s: Seconds its attempts ran, together.
        gpu_hours: GPUs allocated x hours run, every attempt (what the GPUs cost).
        cpus: The most CPUs an attempt was allocated.
        cpu_efficiency: CPU time used / (CPUs allocated x time run), 0 to 1 (``None``:
            unknown).
        mem_peak: The most memory a step held at once, in bytes (``None``: no job
            accounting).
        mem_asked: The memory allocated to the job, in bytes: the limit its cgroup
            enforced (the sidecar's ``mem_limit``) where known, else ``AllocTRES`` ``mem``.
        mem_enforced: ``mem_asked`` is the limit the node enforced (task/cgroup).
        out_of_memory: The last attempt ended out of memory.
        time_limit: The last attempt's time limit in seconds (``None``: unlimited).
        longest_s: The longest attempt's run time.
        limit_used: The longest attempt's share of its time limit, 0 to 1.
        completed: The last attempt ended COMPLETED.
    """

    ran_s: int
    gpu_hours: float
    cpus: int | None
    cpu_efficiency: float | None
    mem_peak: int | None
    mem_asked: int | None
    time_limit: int | None
    longest_s: int
    limit_used: float | None
    completed: bool
    mem_enforced: bool = False
    out_of_memory: bool = False

    @property
    def mem_efficiency(self) -> float | None:
        """Peak memory / memory asked, 0 to 1 (``None``: either unknown)."""
        if self.mem_peak is None or not self.mem_asked:
            return None
        return self.mem_peak / self.mem_asked

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mem_efficiency": self.mem_efficiency}

    def lines(self) -> list[str]:
        """The figures as text, a line each."""
        out = [f"GPU-hours: {self.gpu_hours:.2f} ({format_elapsed(self.ran_s)} run)"]
        if self.cpu_efficiency is not None:
            cpus = f"{self.cpus} CPU{'' if self.cpus == 1 else 's'}" if self.cpus else "the CPUs"
            out.append(f"CPU efficiency: {self.cpu_efficiency:.0%} of the time of {cpus}")
        if self.mem_asked:
            peak = format_size(self.mem_peak) if self.mem_peak is not None else "unknown"
            share = f" ({self.mem_efficiency:.0%})" if self.mem_efficiency is not None else ""
            of = "limit" if self.mem_enforced else "asked"
            out.append(f"memory: peak {peak} of {format_size(self.mem_asked)} {of}{share}")
        if self.time_limit is not None and self.limit_used is not None:
            out.append(
                f"time limit: the longest attempt ran {format_elapsed(self.longest_s)} of "
                f"{format_elapsed(self.time_limit)} ({self.limit_used:.0%})"
            )
        return out


def summarise_usage(
    attempts: Sequence[Attempt],
    gres: str = "gpu",
    ledger: Sequence[Mapping[str, Any]] = (),
) -> JobUsage | None:
    """The attempts' use, summed (``None``: no attempt has run). The sidecar's ends in
    ``ledger`` add what the job's cgroup measured on the first node (``mem_peak``: exact,
    where accounting samples every 30 s; ``mem_limit``: the limit enforced)."""
    ran = [(a, parse_elapsed(a.elapsed) or 0) for a in attempts if a.start]
    if not ran:
        return None
    ends = [e for e in ledger if e.get("event") == "attempt_end"]
    measured = [e["mem_peak"] for e in ends if isinstance(e.get("mem_peak"), int)]
    limits = [e["mem_limit"] for e in ends if isinstance(e.get("mem_limit"), int)]
    gpu_seconds = sum(tres_gpus(a.tres or "", gres)[0] * s for a, s in ran)
    with_cpu = [(a, s) for a, s in ran if a.cpus and a.cpu_seconds is not None]
    offered = sum((a.cpus or 0) * s for a, s in with_cpu)
    cpu = sum(a.cpu_seconds or 0.0 for a, _ in with_cpu) / offered if offered else None
    peaks = [a.mem_peak for a, _ in ran if a.mem_peak is not None] + measured
    asked = [m for a, _ in ran if (m := parse_size(tres_text(a.tres or "", "mem"))) is not None]
    if limits:
        asked = limits[-1:]  # the last attempt's: an OOM retry may have raised it
    longest_s = max(s for _, s in ran)
    limit = attempts[-1].time_limit
    shares = [s / a.time_limit for a, s in ran if a.time_limit]
    return JobUsage(
        ran_s=sum(s for _, s in ran),
        gpu_hours=gpu_seconds / 3600,
        cpus=max((a.cpus for a, _ in ran if a.cpus), default=None),
        cpu_efficiency=None if cpu is None else min(1.0, cpu),
        mem_peak=max(peaks) if peaks else None,
        mem_asked=max(asked) if asked else None,
        time_limit=limit,
        longest_s=longest_s,
        limit_used=max(shares) if shares else None,
        completed=attempts[-1].state.value == "COMPLETED",
        mem_enforced=bool(limits),
        out_of_memory=attempts[-1].state.value == "OUT_OF_MEMORY"
        or bool(ends and ends[-1].get("reason") == "oom"),
    )


def advise_usage(usage: JobUsage | None) -> list[str]:
    """Advice from the accounting: a time limit far above the run, memory asked far above
    what was used, many CPUs mostly idle."""
    if usage is None:
        return []
    advice = []
    limit = usage.time_limit
    if (
        usage.completed
        and limit is not None
        and usage.longest_s <= _FAR_BELOW * limit
        and limit - usage.longest_s >= _MIN_LIMIT_SPARE
    ):
        suggested = max(300, math.ceil(usage.longest_s * 1.5 / 300) * 300)
        advice.append(
            f"it ran {format_elapsed(usage.longest_s)} of a {format_elapsed(limit)} time limit: "
            f"ask for about {format_elapsed(suggested)} (resources.time); a limit far above "
            "the run keeps a job out of backfill's gaps, so it waits longer"
        )
    if usage.out_of_memory and usage.mem_asked:
        more = math.ceil(usage.mem_asked * 1.5 / (1 << 20))
        peak = f" (peak {format_size(usage.mem_peak)})" if usage.mem_peak is not None else ""
        which = "limit" if usage.mem_enforced else "ask"
        advice.append(
            f"memory: it ran out at its {format_size(usage.mem_asked)} {which}{peak}: ask "
            f"for about {more}M (resources.mem), or let a retry ask for more: retry: "
            "{times: 2, when: [oom], oom_memory_factor: 1.5}"
        )
    efficiency = usage.mem_efficiency
    if (
        efficiency is not None
        and usage.mem_asked is not None
        and usage.mem_peak is not None
        and usage.mem_asked >= _MIN_MEM_ASKED
        and efficiency < _FAR_BELOW
    ):
        suggested_mem = max(1 << 30, math.ceil(usage.mem_peak * 1.5 / (1 << 30)) * (1 << 30))
        advice.append(
            f"memory: at most {format_size(usage.mem_peak)} used of "
            f"{format_size(usage.mem_asked)} asked: ask for about "
            f"{format_size(suggested_mem)} (resources.mem); what is held idle is charged "
            "and keeps other jobs off the node"
        )
    cpus, busy = usage.cpus, usage.cpu_efficiency
    if cpus is not None and busy is not None and cpus >= _MIN_CPUS and busy < _FAR_BELOW:
        advice.append(
            f"CPUs: {busy:.0%} busy on average over {cpus}: ask for fewer "
            "(resources.cpus_per_task), or give the data loader more workers"
        )
    return advice


def format_size(size: int | None) -> str:
    """``1.5 GiB``, ``250 MiB``, ``12 KiB`` (``-``: unknown)."""
    if size is None:
        return "-"
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{size} B"
