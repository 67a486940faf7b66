"""An elastic job's adaptive batch (the spec's ``elastic.batch: adaptive``): at each size,
the batch with the most progress per second, from what the job measured.

This is Pollux's choice (OSDI'21, section 3.1) made with what a Slurm job's ledger holds.
Each attempt's end records, from the trainer's ``runtime.report_progress``, the samples per
second it trained at with its batch plan (world size, per-rank batch, accumulation) and the
gradient statistics it measured (``runtime.gradient_noise``). From those:

* the step-time model of :mod:`hpclaunch.scheduling.throughput` is fitted to every attempt's
  speed (its shape: GPUs, nodes, per-GPU batch, accumulation);
* the newest gradient statistics give each batch's statistical efficiency;
* the plan at ``world`` ranks is the per-rank batch (at most ``max_batch_per_gpu``, within
  :data:`~hpclaunch.scheduling.throughput.TRUST_REGION` of those measured) and accumulation
  whose global batch, between ``global_batch`` and ``max_global_batch``, has the most
  goodput (:func:`~hpclaunch.scheduling.throughput.best_shape`, the simulator's too);
* its learning rate is scaled by that batch's efficiency, AdaScale's gain (Johnson et al.
  2020, which Pollux uses): a step at ``s`` times the base batch counts as ``gain`` base
  steps, ``1 <= gain <= s``.

Before the job measured a speed and its gradient (its first attempt), the plan is the
``fixed`` one at ``global_batch``. The batch is chosen at each attempt's start, from the
ended attempts' lines that every rank reads alike, and, where the trainer asks, every so
many steps within an attempt (:mod:`hpclaunch.runtime.adaptive`: rank 0 records what the
batch since its last choice measured, chooses, and gives the plan to the other ranks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hpclaunch.jobspec.batchplan import BatchPlan, plan_batch
from hpclaunch.scheduling.throughput import (
    Params,
    Shape,
    Throughput,
    best_shape,
    efficiency,
    goodput,
)

__all__ = ["MAX_ACCUMULATION", "Adaptive", "Measured", "measured_in"]

#: The most micro-steps per optimizer step a chosen plan has: beyond, the step-time model
#: (linear in passes) is extrapolated far from anything a job measured, and a step grows
#: long against the checkpoint interval.
MAX_ACCUMULATION = 8


@dataclass(frozen=True)
class Measured:
    """What one attempt measured: its shape, its seconds per optimizer step and its
    gradient statistics (squared norm, per-sample variance; ``None``: not reported)."""

    shape: Shape
    step_seconds: float
    gradient: tuple[float, float] | None


#: Ledger lines that carry a measurement: an attempt's end, and a re-plan within one
#: (the batch it ran since its last choice: :mod:`hpclaunch.runtime.adaptive`).
MEASURING = frozenset({"attempt_end", "batch_measured"})


def measured_in(events: Iterable[Mapping[str, Any]], ranks_per_node: int) -> list[Measured]:
    """The measurements in the ledger (``attempt_end`` and ``batch_measured`` lines with a
    speed and a batch plan), oldest first."""
    out = []
    for event in events:
        if event.get("event") not in MEASURING:
            continue
        try:
            world = int(event["world_size"])
            per_rank = int(event["per_rank_batch"])
            accumulation = int(event["accumulation"])
            speed = float(event["samples_per_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if world < 1 or per_rank < 1 or accumulation < 1 or not speed > 0:
            continue
        shape = Shape(world, max(1, world // ranks_per_node), per_rank, accumulation - 1)
        out.append(Measured(shape, shape.samples / speed, _gradient(event)))
    return out


def _gradient(event: Mapping[str, Any]) -> tuple[float, float] | None:
    sqr, var = event.get("grad_sqr"), event.get("grad_var")
    if not isinstance(sqr, (int, float)) or not isinstance(var, (int, float)):
        return None
    if not (math.isfinite(sqr) and math.isfinite(var)) or sqr <= 0:
        return None
    return float(sqr), max(0.0, float(var))


@dataclass(frozen=True)
class Adaptive:
    """The spec's batch limits (``elastic:``) and what the job measured so far."""

    global_batch: int
    max_global_batch: int
    max_batch_per_gpu: int
    max_lr_factor: float
    measured: tuple[Measured, ...] = ()

    def plan(self, world: int, nodes: int) -> BatchPlan:
        """The plan at ``world`` ranks on ``nodes`` (see the module docstring)."""
        chosen = self._choice(world, nodes)
        if chosen is None:  # nothing learned yet: fixed's split of the global batch
            return plan_batch(
                global_batch=self.global_batch,
                max_batch_per_gpu=self.max_batch_per_gpu,
                policy="adaptive",
                base_world=world,
                world=world,
            )
        shape, gradient = chosen
        gain = efficiency(shape.samples, self.global_batch, *gradient)
        return BatchPlan(
            world,
            int(shape.per_gpu),
            shape.accum + 1,
            int(shape.samples),
            min(gain, self.max_lr_factor),
            "adaptive",
        )

    def goodput(self, world: int, nodes: int) -> float | None:
        """Predicted progress per second at ``world`` ranks with its best plan (base steps
        per second); ``None`` before it measured a speed and its gradient."""
        chosen = self._choice(world, nodes)
        if chosen is None or self._params is None:
            return None
        return goodput(self._params, chosen[0], self.global_batch, chosen[1])

    def _choice(self, world: int, nodes: int) -> tuple[Shape, tuple[float, float]] | None:
        gradient = next((m.gradient for m in reversed(self.measured) if m.gradient), None)
        params = self._params
        if gradient is None or params is None:
            return None
        at_base = (gradient[0], gradient[1] / self.global_batch)  # the variance of a base batch
        options = self._options(world, nodes)
        if not options:
            return None
        shapes = tuple(m.shape for m in self.measured)
        return best_shape(params, options, self.global_batch, at_base, shapes), at_base

    @cached_property
    def _params(self) -> Params | None:
        """The step-time model fitted to every measurement, once (the arbiter asks for
        the goodput at several sizes per pass)."""
        model = Throughput()
        for m in self.measured:
            model.measure(m.shape, m.step_seconds)
        return model.params()

    def _options(self, world: int, nodes: int) -> list[Shape]:
        """Every per-rank batch and accumulation whose global batch lies within the limits,
        largest per-rank batches first (fewest passes among equals)."""
        out = []
        for per_rank in range(self.max_batch_per_gpu, 0, -1):
            for accumulation in range(1, MAX_ACCUMULATION + 1):
                total = world * per_rank * accumulation
                if total > self.max_global_batch:
                    break
                if total >= self.global_batch:
                    out.append(Shape(world, nodes, per_rank, accumulation - 1))
        return out
