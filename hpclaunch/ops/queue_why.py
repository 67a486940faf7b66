"""``hpclaunch queue --why JOB``: why a pending job is behind the jobs ranked before it, in
plain words: their priority factors against its own (``sprio``), and the fair-share
standing of the projects involved (``sshare``).

:func:`why_waiting` asks Slurm (the queue, ``sprio``, ``sprio -w``, ``sshare``: four
calls); :func:`explain_queue_wait` is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import CommandFailed, JobNotFound
from hpclaunch.ops.queue import QueueEntry, queue_entries
from hpclaunch.slurm.priority import (
    FACTORS,
    JobPriority,
    ShareRow,
    parse_sprio,
    parse_sshare,
    sprio_argv,
    sshare_argv,
)

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.ops.context import Context

__all__ = ["Ahead", "WaitExplanation", "explain_queue_wait", "why_waiting"]

#: How many of the jobs ranked before it are compared one by one.
NEAREST = 5
_WORDS = {key: words for key, _, _, words in FACTORS}


@dataclass(frozen=True)
class Ahead:
    """A pending job ranked before the one asked about, and what puts it there."""

    entry: QueueEntry
    priority: JobPriority | None
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class WaitExplanation:
    """What ``queue --why`` prints (``lines``) and its data."""

    job: QueueEntry
    priority: JobPriority | None
    weights: JobPriority | None
    ahead: tuple[Ahead, ...]
    ahead_total: int
    shares: tuple[ShareRow, ...]
    lines: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``queue --why JOB --json``)."""

        def factors(p: JobPriority | None) -> dict[str, Any] | None:
            if p is None:
                return None
            return {
                "priority": p.priority,
                "nice": p.nice,
                **p.weighted,
                "normalized": p.normalized,
            }

        return {
            "job": self.job.to_dict(),
            "factors": factors(self.priority),
            "weights": None if self.weights is None else self.weights.weighted,
            "ahead_total": self.ahead_total,
            "ahead": [
                {
                    "job": a.entry.to_dict(),
                    "factors": factors(a.priority),
                    "reasons": list(a.reasons),
                }
                for a in self.ahead
            ],
            "shares": [
                {
                    "account": s.account,
                    "user": s.user,
                    "raw_usage": s.raw_usage,
                    "effective_usage": s.effective_usage,
                    "fair_share": s.fair_share,
                }
                for s in self.shares
            ],
            "explanation": list(self.lines),
        }


def why_waiting(ctx: Context, job_id: str) -> WaitExplanation:
    """Why pending job ``job_id`` waits behind others (see the module docstring).

    Raises:
        JobNotFound: The job is not in the queue.
        CommandFailed: sprio or sshare failed (the cluster has no priority/multifactor?).
    """
    entries = queue_entries(ctx)
    runner = ctx.backend.runner
    found = _find(entries, job_id)
    if not found.row.pending:
        return explain_queue_wait(entries, found, [], None, [], ctx.site_config)
    texts = []
    for argv in (sprio_argv(), sprio_argv(weights=True)):
        result = runner.run(argv, timeout=60)
        if not result.ok:
            raise CommandFailed(
                result,
                hint="sprio needs PriorityType=priority/multifactor in slurm.conf; with "
                "priority/basic Slurm runs jobs in submission order",
            )
        texts.append(result.stdout)
    priorities = parse_sprio(texts[0])
    weights = next(iter(parse_sprio(texts[1])), None)
    accounts = sorted({e.row.account for e in entries if e.row.account and e.row.pending})
    shares: list[ShareRow] = []
    if accounts:
        result = runner.run(sshare_argv(accounts), timeout=60)
        if result.ok:  # without it the factors still explain; the standing is left out
            shares = parse_sshare(result.stdout)
    return explain_queue_wait(entries, found, priorities, weights, shares, ctx.site_config)


def _find(entries: Sequence[QueueEntry], job_id: str) -> QueueEntry:
    for entry in entries:
        if job_id in (entry.row.job_id, entry.row.base_id):
            return entry
    raise JobNotFound(
        f"job {job_id} is not pending or running",
        hint="'hpclaunch queue' lists the queue; 'hpclaunch status JOB' says how a job ended",
    )


def explain_queue_wait(
    entries: Sequence[QueueEntry],
    job: QueueEntry,
    priorities: Sequence[JobPriority],
    weights: JobPriority | None,
    shares: Sequence[ShareRow],
    site: SiteConfig,
) -> WaitExplanation:
    """Compare ``job`` with the pending jobs ranked before it that want one of its
    partitions (nearest first), factor by factor, and say it in words."""
    if not job.row.pending:
        line = f"job {job.row.job_id} is {job.row.state}: it is not waiting"
        return WaitExplanation(job, None, weights, (), 0, tuple(shares), (line,))
    by_id = {p.job_id: p for p in priorities}
    mine = _priority(by_id, job)
    ranked = [
        e
        for e in entries
        if e.rank is not None
        and job.rank is not None
        and e.rank < job.rank
        and (
            not e.row.partitions or not job.row.partitions or e.row.partitions & job.row.partitions
        )
    ]
    # sprio lists only jobs that may start: one held, or waiting for its begin time or a
    # dependency, is ranked before but does not compete (seen on 25.11 for --begin).
    factors = [(e, _priority(by_id, e)) for e in ranked]
    before = [(e, p) for e, p in factors if p is not None or mine is None]
    idle = len(ranked) - len(before)
    ahead = tuple(Ahead(e, p, _reasons(p, mine, e, job)) for e, p in reversed(before[-NEAREST:]))
    lines = [_headline(job, mine, len(before))]
    for item in ahead:
        theirs = "" if item.priority is None else f", priority {item.priority.priority}"
        row = item.entry.row
        who = f"{item.entry.project or row.account}, {item.entry.tier or row.qos}"
        lines.append(f"  job {item.entry.row.job_id} ({who}{theirs}): " + "; ".join(item.reasons))
    if len(before) > NEAREST:
        lines.append(f"  ... and {len(before) - NEAREST} more ranked before it")
    if idle:
        lines.append(
            f"({idle} more ranked before it cannot start yet: held, or waiting for their "
            "begin time or a dependency)"
        )
    lines += _standing(job, [a.entry for a in ahead], shares, site)
    if weights is not None:
        off = [_WORDS[k] for k, v in weights.weighted.items() if v == 0]
        if off:
            lines.append(
                "Not counted on this cluster (weight 0 in slurm.conf): " + ", ".join(off) + "."
            )
    return WaitExplanation(job, mine, weights, ahead, len(before), tuple(shares), tuple(lines))


def _priority(by_id: Mapping[str, JobPriority], entry: QueueEntry) -> JobPriority | None:
    return by_id.get(entry.row.job_id) or by_id.get(entry.row.base_id)


def _headline(job: QueueEntry, mine: JobPriority | None, before: int) -> str:
    prio = "" if mine is None else f", priority {mine.priority}"
    head = f"job {job.row.job_id} waits ({job.why}{prio})"
    if not before:
        return f"{head}: no pending job is ranked before it"
    return f"{head}; {before} pending job(s) ranked before it, nearest first:"


def _reasons(
    theirs: JobPriority | None, mine: JobPriority | None, entry: QueueEntry, job: QueueEntry
) -> tuple[str, ...]:
    """What the job ranked before has over ``job``: each factor it gains by, largest first."""
    if theirs is None or mine is None:
        return ("no priority factors (sprio does not list these jobs)",)
    gains = sorted(
        ((theirs.weighted[k] - mine.weighted[k], k) for k in theirs.weighted),
        reverse=True,
    )
    out = []
    for gain, key in gains:
        if gain <= 0:
            continue
        text = f"{_WORDS[key]} +{gain}"
        if key == "qos":
            text += f" ({entry.row.qos} vs {job.row.qos})"
        elif key == "fairshare":
            text += (
                f" (its fair-share factor {theirs.normalized[key]:.3f} vs "
                f"{mine.normalized[key]:.3f})"
            )
        out.append(text)
    if mine.nice > theirs.nice:
        out.append(f"nice: yours is {mine.nice - theirs.nice} higher (over-quota order)")
    if not out:
        if theirs.priority == mine.priority:
            out.append("same priority, submitted earlier")
        else:
            out.append(f"priority {theirs.priority} vs {mine.priority}")
    return tuple(out)


def _standing(
    job: QueueEntry, ahead: Sequence[QueueEntry], shares: Sequence[ShareRow], site: SiteConfig
) -> list[str]:
    """One line per project involved: its fair-share factor and charged usage."""
    users = {(s.account, s.user): s for s in shares if s.user}
    accounts = {s.account: s for s in shares if s.user is None}
    lines = []
    seen = set()
    for entry in (job, *ahead):
        key = (entry.row.account, entry.row.user)
        if key in seen or key not in users:
            continue
        seen.add(key)
        share = users[key]
        total = accounts.get(entry.row.account or "")
        usage = share.raw_usage if total is None else total.raw_usage
        lines.append(
            f"Fair share of {entry.row.user} in {entry.row.account}: factor "
            f"{share.fair_share or 0:.3f} (1 ranks first); account usage {usage} "
            "billing-seconds, decayed, charged at each QOS's usage factor"
        )
    if lines and site.has_quotas:
        lines.append(
            "Over-quota and low-tier work runs in the project's -oq account: it is charged "
            "there, not to the project's in-quota standing"
        )
    return lines
