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

import random
from collections.abc import Sequence

from hpclaunch.scheduling.las import QUANTUM
from hpclaunch.scheduling.placement import best_fit
from hpclaunch.scheduling.victims import (
    MIN_RUN,
    Candidate,
    Request,
    VictimChoice,
    capped,
    choose_victims,
    too_young,
)

__all__ = [
    "POLICIES",
    "Policy",
    "make_policy",
    "slurm_order",
]

#: QOS priority of each tier, as hpclaunch's site configs order them (only the order
#: matters to Slurm's preemption candidate sort).
QOS_PRIORITY = {"critical": 4, "high": 3, "medium": 2, "low": 1}


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
    #: Elastic jobs (``Job.sizes``) start at the largest size that fits and grow into
    #: idle GPUs, no sooner than ``min_interval`` seconds after their last start.
    elastic = False
    min_interval = 600.0
    #: The share of the cluster's GPUs an elastic start or growth leaves idle for the
    #: next arrivals (TE jobs then seldom need a preemption: 1/16 measured best of 0,
    #: 8, 16 and 32 GPUs on the 256-GPU synthetic workload, docs/simulator.md).
    headroom = 1 / 16
    #: The engine's pass is :func:`hpclaunch.scheduling.las.plan` instead of the queue
    #: walk (order, backfill, victims): ``ours-las``.
    las = False
    quantum = QUANTUM  # the first level's GPU-seconds (las.level)

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> VictimChoice | None:
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
    ) -> VictimChoice | None:
        ordered = slurm_order(candidates, youngest_first=self.youngest_first)
        found = walk_candidates(request, ordered, free)
        return VictimChoice(found, checkpoint_request=False) if found else None


class RandomVictim(Policy):
    """Like Slurm's walk, but over the candidates in a seeded random order; no request."""

    name = "random"
    preempts = True

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def victims(
        self, request: Request, candidates: Sequence[Candidate], free: Sequence[int]
    ) -> VictimChoice | None:
        ordered = list(candidates)
        self.rng.shuffle(ordered)
        found = walk_candidates(request, ordered, free)
        return VictimChoice(found, checkpoint_request=False) if found else None


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
    ) -> VictimChoice | None:
        found = choose_victims(
            request,
            candidates,
            free,
            min_run=self.min_run,
            max_preemptions=self.max_preemptions,
            inexact_factor=self.inexact_factor,
        )
        return VictimChoice(found, checkpoint_request=True) if found else None

    def eligible_at(self, candidates: Sequence[Candidate], now: float) -> float | None:
        waits = [
            self.min_run - c.ran
            for c in candidates
            if too_young(c, self.min_run) and not capped(c, self.max_preemptions)
        ]
        return now + min(waits) if waits else None


class OursElastic(Ours):
    """``ours``, with elastic BE jobs: a preempted one restarts at the largest of its sizes
    that fits (it shrinks instead of waiting for its full size), a waiting one starts so
    too, and idle GPUs that nobody waits for go to the running job that gains most by
    growing into them (``hpclaunch resize``'s restart: a checkpoint, the requeue delay and
    the restart cost)."""

    name = "ours-elastic"
    elastic = True


class OursLas(Policy):
    """The live arbiter's ``--policy las`` on the TE/BE workload: least attained service
    within each class (TE before BE), elastic BE jobs shrunk before anyone waits and grown
    into idle GPUs, all by :func:`hpclaunch.scheduling.las.plan` (the measured
    simulator's ``elastic`` policy too)."""

    name = "ours-las"
    preempts = True
    elastic = True
    las = True

    def __init__(self, quantum: float = QUANTUM) -> None:
        self.quantum = quantum


#: Registry: name -> class (constructed with a seed for ``random``).
POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (Fifo, FifoBackfill, Policy, SlurmNative, RandomVictim, Ours, OursElastic, OursLas)
}


def make_policy(name: str, seed: int = 0) -> Policy:
    """A fresh policy by registry name (``random`` is seeded with ``seed``)."""
    if name not in POLICIES:
        raise KeyError(f"unknown policy {name!r}; policies: {', '.join(POLICIES)}")
    if name == "random":
        return RandomVictim(seed)
    return POLICIES[name]()
