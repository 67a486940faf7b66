"""A job's attempts as its report shows them: how long each waited and ran, how it ended
(Slurm's state and the sidecar's reason), the steps it reached, committed and lost.

From Slurm's accounting of each attempt (``sacct --duplicates``: :class:`Attempt`) and the
sidecar's ledger (``events.jsonl``). An attempt waited from the job's submission (the first)
or from the previous attempt's end (a requeued job is pending again from then on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpclaunch.slurm.times import parse_elapsed
from hpclaunch.slurm.tres import tres_gpus, tres_value
from hpclaunch.supervise.ledger import COMMIT_EVENTS

if TYPE_CHECKING:
    from hpclaunch.slurm.jobs import Attempt

__all__ = ["AttemptSummary", "size_of", "summarise_attempts"]


@dataclass(frozen=True)
class AttemptSummary:
    """One attempt of a job.

    Attributes:
        index: 0 for the first.
        state: Slurm's state of that attempt (``PREEMPTED``, ``COMPLETED``, ...).
        ended: The sidecar's reason (``preempted``, ``time_limit``, ``success``, ...;
            ``restart_refused`` for a run Slurm started after the job had ended; ``None``
            without a ledger, or while it runs).
        start, end: As sacct prints them (the cluster's local time).
        queued_s: Seconds it waited to start (``None``: unknown, or not started).
        ran_s: Seconds it ran.
        nodes: Where.
        last_step, committed_step, steps_lost: What the trainer reached, the newest
            checkpoint committed, and the steps the next attempt redoes.
        checkpoints: Checkpoints committed during the attempt.
        size: What it ran on (``2 nodes x 2 GPUs``, from AllocTRES).
    """

    index: int
    state: str
    ended: str | None
    start: str | None
    end: str | None
    queued_s: int | None
    ran_s: int | None
    nodes: str | None
    last_step: int | None = None
    committed_step: int | None = None
    steps_lost: int | None = None
    checkpoints: int = 0
    size: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_of(tres: str | None) -> str | None:
    """``2 nodes x 2 GPUs`` from an attempt's AllocTRES (``node=2,gres/gpu=4``); an elastic
    job's attempts differ in it. ``None``: not allocated (or not known)."""
    if not tres:
        return None
    nodes = tres_value(tres, "node")
    if not nodes:
        return None
    gpus, _ = tres_gpus(tres)
    head = f"{nodes} node{'' if nodes == 1 else 's'}"
    if not gpus:
        return head
    each = gpus // nodes if gpus % nodes == 0 else None
    return f"{head} x {each} GPU{'' if each == 1 else 's'}" if each else f"{head}, {gpus} GPUs"


def _when(text: str | None) -> datetime | None:
    """A sacct time (``2026-11-28T08:33:31``); ``None`` for ``Unknown``, ``None``, ``""``."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _seconds(later: datetime | None, earlier: datetime | None) -> int | None:
    if later is None or earlier is None:
        return None
    return max(0, round((later - earlier).total_seconds()))


def _committed(end: Mapping[str, Any], steps: set[object]) -> int | None:
    """The attempt's newest committed step: its ``attempt_end``'s, else the highest of its
    commits (ledgers written before ``attempt_end`` counted the trainer's own)."""
    said = _int(end.get("committed_step"))
    if said is not None:
        return said
    numbers = [n for n in (_int(s) for s in steps) if n is not None]
    return max(numbers, default=None)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summarise_attempts(
    attempts: Sequence[Attempt], ledger: Sequence[Mapping[str, Any]] = ()
) -> list[AttemptSummary]:
    """Each attempt Slurm accounted, oldest first, with what the ledger says of it."""
    ends = {e.get("attempt"): e for e in ledger if e.get("event") == "attempt_end"}
    for event in ledger:  # a run Slurm started after the job had ended: nothing ran
        if event.get("event") == "restart_refused":
            ends.setdefault(event.get("attempt"), {"reason": "restart_refused"})
    steps: dict[object, set[object]] = {}
    for event in ledger:
        if event.get("event") in COMMIT_EVENTS:  # the sidecar's and the trainer's own
            steps.setdefault(event.get("attempt"), set()).add(event.get("step"))
    commits = {attempt: len(committed) for attempt, committed in steps.items()}
    found: list[AttemptSummary] = []
    previous_end: datetime | None = None
    for attempt in attempts:
        start, end = _when(attempt.start), _when(attempt.end)
        waited_from = (
            _when(attempt.submit) if attempt.index == 0 or previous_end is None else previous_end
        )
        last = ends.get(attempt.index, {})
        found.append(
            AttemptSummary(
                index=attempt.index,
                state=attempt.state.value,
                ended=str(last["reason"]) if last.get("reason") else None,
                start=attempt.start,
                end=attempt.end,
                queued_s=_seconds(start, waited_from),
                ran_s=parse_elapsed(attempt.elapsed),
                nodes=attempt.nodes,
                last_step=_int(last.get("last_step")),
                committed_step=_committed(last, steps.get(attempt.index, set())),
                steps_lost=_int(last.get("steps_lost")),
                checkpoints=commits.get(attempt.index, 0),
                size=size_of(attempt.tres),
            )
        )
        previous_end = end or previous_end
    return found
