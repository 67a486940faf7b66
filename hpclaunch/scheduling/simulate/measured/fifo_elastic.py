"""``fifo-elastic``: today's ``ours`` on a one-tier workload (Slurm's FIFO + EASY backfill:
the arbiter preempts only across tiers), with what issue 29 adds to it: elastic jobs are
shrunk before anyone waits and grow into GPUs that stay idle.

Each round, in arrival order:

* A running job keeps its GPUs, unless it is shrunk for a waiting one.
* A waiting job starts at its asked-for size where that fits; an elastic one starts at
  the largest size that fits, its smallest at least (a moldable start).
* Where the first waiting job does not fit, running elastic jobs above their smallest
  size give up GPUs, the one that loses least speed per GPU first, until it fits (as the
  arbiter's shrink before evict, ``arbiter.decide._one_shrink``, GPU by GPU here); if
  even that cannot make room, nobody is shrunk, and later jobs backfill (EASY, by the
  model's prediction) as in ``fifo-backfill``.
* When nobody waits, idle GPUs go, one decision at a time, to the elastic job whose speed
  grows most per added GPU (at least ``threshold``), where the time it saves exceeds a
  restart (the arbiter's rule, :func:`hpclaunch.scheduling.elastic.growth_saving`, with
  the measured speeds instead of a linear speed-up), no sooner than ``min_interval``
  after its last resize.
"""

from __future__ import annotations

import math

from hpclaunch.scheduling.simulate.measured.allocate import Speeds, backfills, place, shadow
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob

__all__ = ["FifoElastic"]


class FifoElastic:
    """The policy (see the module docstring)."""

    def __init__(self, threshold: float = 0.05) -> None:
        self.threshold = threshold
        self.rate = Speeds()

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        sizes = {j.name: len(j.nodes) for j in jobs if j.nodes}
        left = config.nodes * config.gpus_per_node - sum(sizes.values())
        by_name = {j.name: j for j in jobs}
        reserved, spare = math.inf, 0  # EASY: when the first blocked job starts, GPUs spare
        waiting = False
        for job in jobs:
            if job.nodes:
                continue
            smallest = job.elastic.min_gpus if job.elastic else job.gpus
            if math.isinf(reserved):
                if smallest > left:
                    left += self._shrink(sizes, by_name, smallest - left)
                if smallest <= left:
                    sizes[job.name] = min(job.gpus, left) if job.elastic else job.gpus
                    left -= sizes[job.name]
                    continue
                waiting = True
                # It starts at its smallest size once the others end, at the sizes they
                # hold next round.
                ends = (
                    (now + by_name[n].remaining_seconds(g, restart=config.restart), g)
                    for n, g in sizes.items()
                )
                reserved, spare = shadow(smallest, ends, left)
                continue
            after = backfills(job, left, reserved, spare, now, config.restart)  # asked-for size
            if after is not None:
                spare = after
                sizes[job.name] = job.gpus
                left -= job.gpus
        if not waiting:
            self._grow(now, sizes, by_name, left, config.restart)
        chosen = [j for j in jobs if j.name in sizes]
        return place(chosen, config, sizes)

    def _shrink(self, sizes: dict[str, int], by_name: dict[str, WorkJob], need: int) -> int:
        """GPUs freed for a waiting job that needs ``need`` more: all of them or none."""

        def shrinkable() -> list[tuple[str, WorkJob, int, int]]:
            """Running elastic jobs above their smallest size: name, job, size next round,
            smallest size."""
            out = []
            for name, size in sizes.items():
                job = by_name[name]
                if job.elastic and job.nodes and size > job.elastic.min_gpus:
                    out.append((name, job, size, job.elastic.min_gpus))
            return out

        if sum(size - smallest for _, _, size, smallest in shrinkable()) < need:
            return 0
        for _ in range(need):
            _, name = max(
                (self.rate.ratio(job, size - 1, size), name) for name, job, size, _ in shrinkable()
            )
            sizes[name] -= 1
        return need

    def _grow(
        self,
        now: float,
        sizes: dict[str, int],
        by_name: dict[str, WorkJob],
        left: int,
        restart: float,
    ) -> None:
        grown: set[str] = set()
        while left > 0:
            best: tuple[float, str, int] | None = None
            for name, size in sizes.items():
                job = by_name[name]
                if job.elastic is None or size >= job.elastic.max_gpus or name in grown:
                    continue
                if not job.nodes or now - job.resized_at < job.elastic.min_interval:
                    continue  # a job that starts this round has its size
                here = job.remaining_seconds(size, restart)  # its time left at this size
                for bigger in range(size + 1, min(job.elastic.max_gpus, size + left) + 1):
                    speedup = self.rate.ratio(job, bigger, size)
                    gain = (speedup - 1) / (bigger - size)
                    if best is not None and gain <= best[0]:
                        continue
                    # (a job that measured nothing yet: unknown, taken as a saving)
                    saving = math.inf if math.isinf(here) else here - (here / speedup + restart)
                    if gain >= self.threshold and saving > 0:
                        best = (gain, name, bigger)
            if best is None:
                return
            _, name, bigger = best
            left -= bigger - sizes[name]
            sizes[name] = bigger
            grown.add(name)
