"""Scheduling policies: queue order, backfill, and whom to preempt for a waiting TE job.

Each policy is a small class: ``order`` (``fifo``: submission order; ``priority``: TE
before BE, then submission), ``backfill`` (EASY backfill behind the first blocked job) and
one decision method, :meth:`Policy.victims`, called for a waiting TE job that does not fit.

The victim choice of ``ours`` is the pure function :func:`choose_victims`: it sees only a
:class:`Request`, the :class:`Candidate` running jobs (placement, time since their last
committed checkpoint, costs) and the free GPUs per node, so the arbiter can call it with
the live cluster's state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from hpclaunch.scheduling.simulate.model import Placement, best_fit

__all__ = [
    "MIN_RUN",
    "POLICIES",
    "Candidate",
    "Decision",
    "Policy",
    "Request",
    "choose_victims",
    "make_policy",
    "slurm_order",
]

#: QOS priority of each tier, as hpclaunch's site configs order them (only the order
#: matters to Slurm's preemption candidate sort).
QOS_PRIORITY = {"critical": 4, "high": 3, "medium": 2, "low": 1}

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
class Decision:
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
        if _too_young(c, min_run) or _capped(c, max_preemptions):
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


def _too_young(c: Candidate, min_run: float) -> bool:
    """Preempted before, and its new run has not lasted ``min_run`` yet."""
    return c.preemptions > 0 and c.ran < min_run


def _capped(c: Candidate, max_preemptions: int | None) -> bool:
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


def slurm_order(
    candidates: Sequence[Candidate], *, youngest_first: bool = False
) -> list[Candidate]:
    """Slurm 22.05's preemption candidate order for ``PreemptType=preempt/qos``.

    ``slurm_find_preemptable_jobs`` (src/slurmctld/preempt.c) sorts the candidates with
    ``_sort_by_prio``: ascending by the plugin's ``PREEMPT_DATA_PRIO``, which preempt/qos
    computes in ``_gen_job_prio`` as ``(QOS priority << 16) + node count``: lowest QOS
    first, then the jobs on fewest nodes. With ``SchedulerParameters=preempt_youngest_first``
    (or ``PreemptParameters=youngest_first``) it sorts by start time, newest first instead.
    Equal keys keep the controller's job list order, which we take as job id order.
    """
    if youngest_first:
        return sorted(candidates, key=lambda c: (-c.start, c.job_id))
    return sorted(
        candidates, key=lambda c: (QOS_PRIORITY.get(c.tier, 0), len(c.placement), c.job_id)
    )


def walk_candidates(
    request: Request, ordered: Sequence[Candidate], free: Sequence[int]
) -> tuple[int, ...] | None:
    """What select/cons_tres ``_run_now`` does with the ordered candidates.

    It removes them from a copy of the node usage one at a time, in order, until the job
    fits; places the job on that simulated state (we use best fit); and preempts every
    removed candidate running on a chosen node (``job_overlap_and_running``) — including
    ones whose GPUs the job does not need there. (Its ``preempt_reorder_count`` second pass
    that re-sorts candidates to preempt fewer jobs is not modelled.)
    """
    sim = list(free)
    removed: list[Candidate] = []
    for c in ordered:
        for node, g in c.placement.items():
            sim[node] += g
        removed.append(c)
        placement = best_fit(sim, request.gpus_per_node, request.nodes)
        if placement is not None:
            return tuple(sorted(c.job_id for c in removed if set(c.placement) & set(placement)))
    return None


class Policy:
    """Base: no preemption. Subclasses override :meth:`victims`.

    Attributes:
        name: Registry name.
        order: ``fifo`` or ``priority``.
        backfill: EASY backfill behind the first blocked job.
        preempts: Whether :meth:`victims` is ever called.
    """

    name = "priority"
    order = "priority"
    backfill = True
    preempts = False

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> Decision | None:
        """Whom to preempt so a waiting TE job of ``request`` can start (``None``: wait)."""
        return None

    def eligible_at(self, candidates: Sequence[Candidate], now: float) -> float | None:
        """When the first candidate this policy protects now becomes a victim it may
        choose (``None``: it protects none, or none ever becomes eligible)."""
        return None


class Fifo(Policy):
    """Strict FIFO: submission order, the first job that does not fit blocks the rest."""

    name = "fifo"
    order = "fifo"
    backfill = False


class FifoBackfill(Policy):
    """FIFO with EASY backfill (later jobs start if they do not delay the first blocked)."""

    name = "fifo-backfill"
    order = "fifo"


class SlurmNative(Policy):
    """Slurm 22.05 ``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``, as we model it.

    * The pending job's QOS (TE tiers) lists the BE tiers' QOS in its ``Preempt``; every
      running BE job is a candidate (jobs already being preempted are not counted twice).
    * Candidates are ordered as :func:`slurm_order` says (QOS priority, then node count;
      optional ``preempt_youngest_first``) and removed as :func:`walk_candidates` says.
    * Victims get no checkpoint request: Slurm sends SIGCONT+SIGTERM at the start of the
      QOS ``GraceTime`` and kills them at its end (``_job_check_grace_internal``); they
      lose the work since their last periodic checkpoint, grace time included.
    * A requeued job may not start again before the requeue delay: Slurm sets its begin
      time to now + ``cred_expire`` + 1 (``AuthInfo=cred_expire``, default 120 s).
    """

    name = "slurm-native"
    preempts = True

    def __init__(self, youngest_first: bool = False) -> None:
        self.youngest_first = youngest_first

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> Decision | None:
        ordered = slurm_order(candidates, youngest_first=self.youngest_first)
        found = walk_candidates(request, ordered, free)
        return Decision(found, checkpoint_request=False) if found else None


class RandomVictim(Policy):
    """Like Slurm's walk, but over the candidates in a seeded random order; no request."""

    name = "random"
    preempts = True

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> Decision | None:
        ordered = list(candidates)
        self.rng.shuffle(ordered)
        found = walk_candidates(request, ordered, free)
        return Decision(found, checkpoint_request=False) if found else None


class Ours(Policy):
    """Least wasted GPU time, exact fits first, a run-time cap, a checkpoint request."""

    name = "ours"
    preempts = True

    def __init__(
        self,
        min_run: float = MIN_RUN,
        max_preemptions: int | None = None,
        inexact_factor: float = 1.5,
    ) -> None:
        self.min_run = min_run
        self.max_preemptions = max_preemptions
        self.inexact_factor = inexact_factor

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> Decision | None:
        found = choose_victims(
            request,
            candidates,
            free,
            min_run=self.min_run,
            max_preemptions=self.max_preemptions,
            inexact_factor=self.inexact_factor,
        )
        return Decision(found, checkpoint_request=True) if found else None

    def eligible_at(self, candidates: Sequence[Candidate], now: float) -> float | None:
        waits = [
            self.min_run - c.ran
            for c in candidates
            if _too_young(c, self.min_run) and not _capped(c, self.max_preemptions)
        ]
        return now + min(waits) if waits else None


#: Registry: name -> class (constructed with a seed for ``random``).
POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (Fifo, FifoBackfill, Policy, SlurmNative, RandomVictim, Ours)
}


def make_policy(name: str, seed: int = 0) -> Policy:
    """A fresh policy by registry name (``random`` is seeded with ``seed``)."""
    if name not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; policies: {', '.join(POLICIES)}")
    if name == "random":
        return RandomVictim(seed)
    return POLICIES[name]()
