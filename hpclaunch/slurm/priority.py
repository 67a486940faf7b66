"""Why Slurm orders pending jobs as it does: ``sprio`` (each job's priority factors) and
``sshare`` (each association's fair-share standing), read as text.

With ``priority/multifactor`` a pending job's priority is the sum of weighted factors
(slurm.conf ``PriorityWeight*``): age, fair share, job size, partition, QOS (and site,
association and TRES, which hpclaunch does not explain), minus its nice. ``sprio -w``
prints the weights; a factor whose weight is 0 is not computed at all (sprio prints 0).
``sshare`` gives each association's ``FairShare`` factor (0-1, higher ranks first) and
its decayed ``RawUsage`` (TRES-billing seconds, each job's use times its QOS
``UsageFactor``). pyslurm (25.11) has neither (a job's ``priority`` and ``nice``, an
association's raw ``shares``; no factors, no usage), so both backends run these commands.

Formats are given explicitly, ``|``-separated; the fields used exist in 22.05 and later
(recorded: 22.05.8, 25.11.7).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpclaunch.slurm.tres import to_int

__all__ = [
    "FACTORS",
    "SHARE_FIELDS",
    "SPRIO_FORMAT",
    "JobPriority",
    "ShareRow",
    "parse_sprio",
    "parse_sshare",
    "sprio_argv",
    "sshare_argv",
]

#: The factors explained, in sprio's order: (key, weighted letter, normalized letter, words).
FACTORS = (
    ("age", "A", "a", "age (time waited)"),
    ("fairshare", "F", "f", "fair share"),
    ("jobsize", "J", "j", "job size"),
    ("partition", "P", "p", "partition"),
    ("qos", "Q", "q", "QOS (tier)"),
)
_HEAD = "%i|%r|%u|%Y|%N"
#: sprio's format: id, partition, user, priority, nice, then each factor weighted and
#: normalized. Not the account (%o) nor the QOS (%n): 22.05's sprio has neither (it says
#: "Invalid job format specification" and exits 0 without them); squeue has both.
SPRIO_FORMAT = _HEAD + "".join(f"|%{w}|%{n}" for _, w, n, _ in FACTORS)
SHARE_FIELDS = "Account,User,RawShares,RawUsage,EffectvUsage,FairShare,LevelFS"


@dataclass(frozen=True)
class JobPriority:
    """One pending job's line of ``sprio`` (the ``-w`` line: ``job_id`` ``Weights``).

    Attributes:
        weighted: Factor key → its weighted value (what it adds to the priority).
        normalized: Factor key → its value between 0 and 1.
    """

    job_id: str
    partition: str
    user: str
    priority: int
    nice: int
    weighted: dict[str, int]
    normalized: dict[str, float]


@dataclass(frozen=True)
class ShareRow:
    """One association of ``sshare``: an account's own line has ``user`` ``None``.

    Attributes:
        raw_usage: Decayed usage, TRES-billing seconds times the QOS usage factors.
        effective_usage: Its share of its parent's usage (0-1).
        fair_share: The fair-share factor (users' lines; ``None`` on account lines).
    """

    account: str
    user: str | None
    raw_shares: int | None
    raw_usage: int
    effective_usage: float
    fair_share: float | None


def sprio_argv(*, weights: bool = False) -> list[str]:
    """Every pending job's factors (``weights``: the weights line instead)."""
    return ["sprio", *(["-w"] if weights else []), "--noheader", f"--format={SPRIO_FORMAT}"]


def sshare_argv(accounts: list[str]) -> list[str]:
    """The standing of ``accounts`` and of all their users (``-a``)."""
    return [
        "sshare",
        "--parsable2",
        "--noheader",
        "--all",
        f"--accounts={','.join(accounts)}",
        f"--format={SHARE_FIELDS}",
    ]


def parse_sprio(text: str) -> list[JobPriority]:
    """``sprio --format=SPRIO_FORMAT`` lines; the weights line too (job id ``Weights``)."""
    out = []
    head = _HEAD.count("|") + 1
    for line in text.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) != head + 2 * len(FACTORS) or not cols[0]:
            continue
        values = cols[head:]
        out.append(
            JobPriority(
                job_id=cols[0],
                partition=cols[1],
                user=cols[2],
                priority=to_int(cols[3]) or 0,
                nice=to_int(cols[4]) or 0,
                weighted={key: _int(values[2 * i]) for i, (key, *_) in enumerate(FACTORS)},
                normalized={key: _float(values[2 * i + 1]) for i, (key, *_) in enumerate(FACTORS)},
            )
        )
    return out


def parse_sshare(text: str) -> list[ShareRow]:
    """``sshare --parsable2 --format=SHARE_FIELDS`` lines (accounts indented by depth)."""
    out = []
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) < 7 or not cols[0].strip():
            continue
        out.append(
            ShareRow(
                account=cols[0].strip(),
                user=cols[1].strip() or None,
                raw_shares=to_int(cols[2]),
                raw_usage=_int(cols[3]),
                effective_usage=_float(cols[4]),
                fair_share=_float(cols[5]) if cols[5].strip() else None,
            )
        )
    return out


def _int(text: str) -> int:
    try:
        return round(float(text))
    except ValueError:
        return 0


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
