"""Who holds how many GPUs next: least attained service, elastic jobs shrunk before anyone
waits and grown into GPUs left idle. One pure function, :func:`plan`, that both simulators
run (the measured engine's ``elastic`` policy every round,
:mod:`hpclaunch.scheduling.simulate.measured.policies`; the TE/BE event engine's
``ours-las`` at every scheduling pass, :mod:`hpclaunch.scheduling.simulate.engine`) and
the live arbiter applies to the cluster (``hpclaunch arbiter --policy las``).

It sees what a live scheduler sees and nothing more: each job's sizes, what it holds, the
GPU time it has held (its attained service), its tier, and a predicted speed-up between
two of its sizes (learned from its own measurements,
:mod:`hpclaunch.scheduling.throughput`; linear when it measured nothing). No job's true
speed, no job's remaining work.

In one pass over ``capacity`` GPUs:

1. a running job that may not be preempted keeps what it holds;
2. the others, in order of tier, then the level of the GPU time they held (least first:
   :func:`level`, 0 below ``quantum``, one more each time it doubles), then submission,
   each get their smallest size while GPUs remain: an elastic job runs small rather than
   anyone waiting, and a rigid one that does not fit waits (or is preempted, when it held
   GPUs);
3. in the same order, each goes back up to the size it holds where that still fits (a
   resize is a restart: none without a reason), unless its measurements now say it runs
   slower there than at the size step 4 would grow it to from its smallest (a job grown
   to learn its speed there, which did not pay): then to that size;
4. while GPUs remain, they go, one decision at a time, to the elastic job whose predicted
   speed grows most per added GPU, while that is at least ``threshold`` (5 %) per GPU,
   among the jobs allowed to grow now (a job that changed size less than its interval ago
   is not).

On two tiers (TE and BE), step 2's order is what makes a TE job preempt BE ones; on one
tier, it is least attained service. By levels, not by the second: with a continuous order
two jobs that hold the GPUs in turn swap at every pass (on the cluster, 28 preemptions of
12 jobs in 5 minutes, each a checkpoint and an 11 s requeue: bench/RESULTS.md); with
levels a job is displaced only by one a level below, at most once per doubling of its
service. Tiresias has two levels; doubling ones did as well as a continuous order on the
Pollux workloads (docs/simulator.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["QUANTUM", "Contender", "level", "order_key", "plan"]

#: GPU-seconds of service of the first level (a quarter of a GPU-hour; see :func:`level`).
QUANTUM = 900.0


@dataclass(frozen=True)
class Contender:
    """One job as :func:`plan` sees it.

    Attributes:
        key: Its name or id.
        sizes: The GPU totals it may run at, smallest first (a rigid job: one).
        held: GPUs it holds now (0: none).
        attained: GPU-seconds it has held so far.
        submitted: When it was submitted (ties).
        tier: Its tier's rank, 0 first (one tier: all 0).
        preemptible: ``False``: while it runs, it keeps its GPUs.
        may_grow: It may take a larger size now (its interval since its last change of
            size has passed, or it is not running).
        speedup: ``speedup(a, b)``: its predicted speed on ``a`` GPUs over its speed on
            ``b``; ``None``: linear (``a / b``).
    """

    key: str
    sizes: tuple[int, ...]
    held: int = 0
    attained: float = 0.0
    submitted: float = 0.0
    tier: int = 0
    preemptible: bool = True
    may_grow: bool = True
    speedup: Callable[[int, int], float] | None = None

    def ratio(self, a: int, b: int) -> float:
        return self.speedup(a, b) if self.speedup else a / b


def plan(
    contenders: Sequence[Contender],
    capacity: int,
    *,
    threshold: float = 0.05,
    quantum: float = QUANTUM,
) -> dict[str, int]:
    """The GPUs each job holds next (a job absent holds none); see the module docstring."""
    sizes: dict[str, int] = {}
    left = capacity
    for job in contenders:  # 1. kept
        if job.held and not job.preemptible:
            sizes[job.key] = job.held
            left -= job.held
    order = sorted(
        (j for j in contenders if j.key not in sizes),
        key=lambda j: order_key(j, quantum),
    )
    for job in order:  # 2. the smallest size, in order
        if job.sizes[0] <= left:
            sizes[job.key] = job.sizes[0]
            left -= job.sizes[0]
    for job in order:  # 3. back to what it holds
        smallest = sizes.get(job.key)
        if smallest is None or job.held not in job.sizes:
            continue
        if not smallest < job.held <= smallest + left:
            continue
        back = job.held
        worth = _worth(job, smallest, back, threshold)
        if job.ratio(back, worth) < 1:  # measured there: slower than a smaller size
            back = worth
        left -= back - smallest
        sizes[job.key] = back
    by_key = {j.key: j for j in order}
    while left > 0:  # 4. growth, where one more GPU helps most
        best: tuple[float, str, int] | None = None
        for key, size in sizes.items():
            grower = by_key.get(key)
            if grower is None or not grower.may_grow:
                continue
            for bigger in grower.sizes:
                if size < bigger <= size + left:
                    gain = (grower.ratio(bigger, size) - 1) / (bigger - size)
                    if best is None or gain > best[0]:
                        best = (gain, key, bigger)
        if best is None or best[0] < threshold:
            break
        _, key, bigger = best
        left -= bigger - sizes[key]
        sizes[key] = bigger
    return sizes


def order_key(job: Contender, quantum: float = QUANTUM) -> tuple[int, int, float, str]:
    """Step 2's order: tier, level of the service held, submission, key."""
    return job.tier, level(job.attained, quantum), job.submitted, job.key


def level(attained: float, quantum: float = QUANTUM) -> int:
    """The level of ``attained`` GPU-seconds: 0 below ``quantum``, then one more each time
    the service doubles (``quantum x (2^k - 1)`` to ``quantum x (2^(k+1) - 1)``)."""
    return math.floor(math.log2(1 + max(0.0, attained) / quantum))


def _worth(job: Contender, size: int, cap: int, threshold: float) -> int:
    """The size step 4 would grow ``job`` to from ``size``, ``cap`` at most, alone."""
    while True:
        steps = [b for b in job.sizes if size < b <= cap]
        if not steps:
            return size
        best = max(steps, key=lambda b: (job.ratio(b, size) - 1) / (b - size))
        if not _pays(job, size, best, threshold):
            return size
        size = best


def _pays(job: Contender, size: int, bigger: int, threshold: float) -> bool:
    """``bigger`` GPUs make ``job`` at least ``threshold`` faster per GPU beyond ``size``."""
    return job.ratio(bigger, size) - 1 >= threshold * (bigger - size)
