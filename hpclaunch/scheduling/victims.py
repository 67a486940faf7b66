"""Whom to preempt for a waiting job: the choice the simulator's ``ours`` policy and the live
arbiter share.

:func:`choose_victims` is pure: it sees only a :class:`Request`, the :class:`Candidate`
running jobs (placement, time since their last committed checkpoint, costs) and the free
GPUs per node, so the simulator (:mod:`hpclaunch.scheduling.simulate.policies`) calls it
with simulated state and the arbiter (:mod:`hpclaunch.scheduling.arbiter.decide`) with the
live cluster's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hpclaunch.scheduling.placement import Placement

__all__ = [
    "MIN_RUN",
    "Candidate",
    "Request",
    "VictimChoice",
    "capped",
    "choose_victims",
    "too_young",
]

#: Seconds a job preempted before runs again before ``ours`` may choose it again (the
#: synthetic workload's restart costs 60 s: every later run makes 4 minutes of progress).
MIN_RUN = 300.0


@dataclass(frozen=True)
class Request:
    """What the waiting job needs: ``nodes`` nodes with ``gpus_per_node`` free GPUs each."""

    gpus_per_node: int
    nodes: int = 1


@dataclass(frozen=True)
class Candidate:
    """A running preemptible job, as a victim choice sees it.

    Attributes:
        job_id: The job.
        placement: Node index -> GPUs it holds there.
        since_commit: Seconds of its current run a kill now would throw away.
        ckpt_write: Seconds it needs to write a checkpoint on request.
        restart_cost: Extra run time its restart will cost.
        preemptions: How often it was preempted already.
        tier: Its tier (Slurm's order uses the QOS priority).
        start: When its current run started (Slurm's ``preempt_youngest_first``).
        honours_request: Whether it commits a checkpoint on request within the grace time.
        ran: Seconds its current run has lasted (restart included).
    """

    job_id: int
    placement: Placement
    since_commit: float
    ckpt_write: float
    restart_cost: float
    preemptions: int = 0
    tier: str = "low"
    start: float = 0.0
    honours_request: bool = True
    ran: float = math.inf

    @property
    def gpus(self) -> int:
        return sum(self.placement.values())


@dataclass(frozen=True)
class VictimChoice:
    """Victims to preempt, and whether to ask them to checkpoint first."""

    victims: tuple[int, ...]
    checkpoint_request: bool


def choose_victims(
    request: Request,
    candidates: Sequence[Candidate],
    free: Sequence[int],
    *,
    min_run: float = 0.0,
    max_preemptions: int | None = None,
    inexact_factor: float = 1.5,
) -> tuple[int, ...] | None:
    """Our choice: the victim set that frees what ``request`` needs at the least cost.

    The cost of a victim is the GPU time its preemption wastes: its GPUs x (the work it
    loses + its restart cost). With a checkpoint request it honours, the work it loses is
    the write time; otherwise it is the time since its last committed checkpoint. Per node,
    a 0/1 knapsack over the victims there finds the cheapest set freeing exactly k GPUs for
    every k; the node's best option is the cheapest exact fit (free + freed == need) unless
    an inexact one costs less than ``1 / inexact_factor`` of it (an exact fit leaves no
    fragment behind). Multi-node requests take the best ``nodes`` nodes (a victim spanning
    several of them is counted once).

    How often one job is preempted is capped by run time: a job preempted before is not
    chosen again until its current run has lasted ``min_run`` seconds, so every run after a
    preemption gets that far (set it above the restart cost) and no job is starved, while no
    waiting job is held off by a victim for longer than ``min_run``. A cap by count
    (``max_preemptions``) is there too, off by default: once reached it protects a job for
    good, and a big job protected so holds every GPU it has until it ends.

    Args:
        request: GPUs per node and node count of the waiting job.
        candidates: Running preemptible jobs that are not already being preempted.
        free: Free GPUs per node index.
        min_run: Seconds a preempted job runs again before it may be chosen again.
        max_preemptions: Jobs preempted this often are never chosen (``None``: no cap).
        inexact_factor: How much cheaper an inexact fit must be to beat an exact one.

    Returns:
        The victims' job ids (sorted), ``()`` when the job fits without preemption, or
        ``None`` when no allowed victim set frees enough.
    """
    need = request.gpus_per_node
    by_node: dict[int, list[tuple[int, float, int]]] = {}
    for c in candidates:
        if too_young(c, min_run) or capped(c, max_preemptions):
            continue
        lost = c.ckpt_write if c.honours_request else c.since_commit
        cost = c.gpus * (lost + c.restart_cost)
        for node, g in c.placement.items():
            by_node.setdefault(node, []).append((g, cost, c.job_id))
    options: list[tuple[float, int, tuple[int, ...]]] = []
    for node, f in enumerate(free):
        if f >= need:
            options.append((0.0, node, ()))
            continue
        best = _cheapest_cover(need - f, by_node.get(node, []), inexact_factor)
        if best is not None:
            options.append((best[0], node, best[1]))
    if len(options) < request.nodes:
        return None
    options.sort()
    chosen = {victim for _, _, vs in options[: request.nodes] for victim in vs}
    return tuple(sorted(chosen))


def too_young(c: Candidate, min_run: float) -> bool:
    """Preempted before, and its new run has not lasted ``min_run`` yet."""
    return c.preemptions > 0 and c.ran < min_run


def capped(c: Candidate, max_preemptions: int | None) -> bool:
    """Preempted ``max_preemptions`` times already (never, without a cap by count)."""
    return max_preemptions is not None and c.preemptions >= max_preemptions


def _cheapest_cover(
    deficit: int, items: list[tuple[int, float, int]], inexact_factor: float
) -> tuple[float, tuple[int, ...]] | None:
    """Cheapest set of ``items`` (gpus, cost, id) freeing at least ``deficit`` GPUs, with
    the exact-fit preference; ``(effective cost, ids)`` or ``None``."""
    top = sum(g for g, _, _ in items)
    if top < deficit:
        return None
    # best[k]: (cost, ids) of the cheapest subset freeing exactly k GPUs.
    best: list[tuple[float, tuple[int, ...]] | None] = [None] * (top + 1)
    best[0] = (0.0, ())
    for g, cost, job_id in sorted(items, key=lambda it: (it[1], it[2])):
        for k in range(top, g - 1, -1):
            prev = best[k - g]
            if prev is not None and (best[k] is None or prev[0] + cost < best[k][0]):  # type: ignore[index]
                best[k] = (prev[0] + cost, (*prev[1], job_id))
    exact = best[deficit]
    inexact = min((b for b in best[deficit + 1 :] if b is not None), default=None)
    if exact is not None and (inexact is None or exact[0] <= inexact[0] * inexact_factor):
        return exact[0], tuple(sorted(exact[1]))
    if inexact is None:
        return None
    return inexact[0] * inexact_factor, tuple(sorted(inexact[1]))
