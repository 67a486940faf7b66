"""An elastic job's batch at one size: per-rank batch, accumulation and learning-rate factor.

Pure arithmetic shared by the spec's checks (every allowed size must have a plan) and the
runtime (:func:`hpclaunch.runtime.elastic.batch_plan` tells the trainer its plan for this
attempt). No pydantic here: training code imports it.

Policies (the spec's ``elastic.batch``):

* ``fixed``: the global batch stays; each rank takes the largest micro-batch at most
  ``max_batch_per_gpu`` that divides it evenly, and gradient accumulation makes up the rest
  (``world x per_rank x accumulation == global_batch``). The samples of each global step,
  and so the trajectory, do not depend on the size (up to float reduction order).
* ``linear`` / ``sqrt``: the per-rank batch and accumulation stay as at the submitted size
  and the global batch grows with the world; the learning rate is scaled by the batch ratio
  (``linear``) or its square root (``sqrt``), capped at ``max_lr_factor``, as ONES (SC'21)
  and the linear-scaling rule (Goyal et al. 2017) do. The trainer warms up to the new rate
  over ``warmup_steps`` after each resize.
* ``adaptive``: the batch with the most progress per second at each size, chosen from
  what the job measured (:mod:`hpclaunch.scheduling.adaptive_batch`); here, before any
  measurement, it is ``fixed``'s plan at the global batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["BatchPlan", "BatchPolicy", "plan_batch"]

BatchPolicy = Literal["fixed", "linear", "sqrt", "adaptive"]


@dataclass(frozen=True)
class BatchPlan:
    """The batch of one attempt.

    Attributes:
        world_size: Ranks (processes) training together.
        per_rank_batch: Samples each rank takes per micro-step (forward/backward).
        accumulation: Micro-steps per optimizer step.
        global_batch: Samples per optimizer step, all ranks together.
        lr_factor: What the base learning rate is multiplied by at this size.
        policy: The spec's batch policy.
    """

    world_size: int
    per_rank_batch: int
    accumulation: int
    global_batch: int
    lr_factor: float
    policy: BatchPolicy


def plan_batch(
    *,
    global_batch: int,
    max_batch_per_gpu: int,
    policy: BatchPolicy,
    base_world: int,
    world: int,
    max_lr_factor: float = 8.0,
) -> BatchPlan:
    """The plan at ``world`` ranks for a job whose spec says ``global_batch`` at
    ``base_world`` ranks (the submitted size).

    Raises:
        ValueError: No per-rank batch of at most ``max_batch_per_gpu`` fits (the message
            says what would).
    """
    if policy in ("fixed", "adaptive"):
        per_rank, accumulation = _split(global_batch, world, max_batch_per_gpu)
        return BatchPlan(world, per_rank, accumulation, global_batch, 1.0, policy)
    per_rank, accumulation = _split(global_batch, base_world, max_batch_per_gpu)
    grown = world * per_rank * accumulation
    ratio = grown / global_batch
    factor = ratio if policy == "linear" else math.sqrt(ratio)
    return BatchPlan(world, per_rank, accumulation, grown, min(factor, max_lr_factor), policy)


def _split(total: int, world: int, limit: int) -> tuple[int, int]:
    """(per-rank batch, accumulation) with ``world * per_rank * accumulation == total``,
    the per-rank batch as large as ``limit`` allows (fewest accumulation steps)."""
    if total % world:
        raise ValueError(
            f"a global batch of {total} cannot be split evenly over {world} ranks; "
            f"use a multiple of {world}"
        )
    share = total // world
    for accumulation in range(max(1, math.ceil(share / limit)), share + 1):
        if share % accumulation == 0:
            return share // accumulation, accumulation
    raise AssertionError("unreachable: accumulation == share always divides")  # pragma: no cover
