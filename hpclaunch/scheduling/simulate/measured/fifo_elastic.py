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

from hpclaunch.scheduling.simulate.measured.allocate import Speeds, place
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
        shadow, spare = math.inf, 0  # EASY: when the first blocked job starts, GPUs spare then
        waiting = False
        for job in jobs:
            if job.nodes:
                continue
            smallest = job.elastic.min_gpus if job.elastic else job.gpus
            if math.isinf(shadow):
                if smallest > left:
                    left += self._shrink(sizes, by_name, smallest - left)
                if smallest <= left:
                    sizes[job.name] = min(job.gpus, left) if job.elastic else job.gpus
                    left -= sizes[job.name]
                    continue
                waiting = True
                running = [by_name[n] for n in sizes]
                shadow, spare = _shadow(job, running, sizes, left, now, config.restart)
                continue
            if job.gpus > left:  # backfill at the asked-for size only
                continue
            late = now + job.remaining_seconds(restart=config.restart) > shadow
            if not late or job.gpus <= spare:
                if late:
                    spare -= job.gpus
                sizes[job.name] = job.gpus
                left -= job.gpus
        if not waiting:
            self._grow(now, sizes, by_name, left, config.restart)
        chosen = [j for j in jobs if j.name in sizes]
        return place(chosen, config, sizes)

    def _shrink(self, sizes: dict[str, int], by_name: dict[str, WorkJob], need: int) -> int:
        """GPUs freed for a waiting job that needs ``need`` more: all of them or none."""
        room = sum(
            size - job.elastic.min_gpus
            for name, size in sizes.items()
            if (job := by_name[name]).elastic and job.nodes and size > job.elastic.min_gpus
        )
        if room < need:
            return 0
        freed = 0
        while freed < need:
            _, name = max(
                (self.rate(job, size - 1) / self.rate(job, size), name)
                for name, size in sizes.items()
                if (job := by_name[name]).elastic and job.nodes and size > job.elastic.min_gpus
            )
            sizes[name] -= 1
            freed += 1
        return freed

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
                here = self.rate(job, size)
                for bigger in range(size + 1, min(job.elastic.max_gpus, size + left) + 1):
                    there = self.rate(job, bigger)
                    gain = (there / here - 1) / (bigger - size)
                    if best is not None and gain <= best[0]:
                        continue
                    work = job.app.total_progress - job.progress
                    saving = work / here - (work / there + restart)
                    if gain >= self.threshold and saving > 0:
                        best = (gain, name, bigger)
            if best is None:
                return
            _, name, bigger = best
            left -= bigger - sizes[name]
            sizes[name] = bigger
            grown.add(name)


def _shadow(
    job: WorkJob,
    running: list[WorkJob],
    sizes: dict[str, int],
    free: int,
    now: float,
    restart: float,
) -> tuple[float, int]:
    """EASY: when ``job`` can start at its smallest size as the running jobs end (at the
    sizes they hold next round), and the GPUs spare then."""
    need = job.elastic.min_gpus if job.elastic else job.gpus
    ends = sorted(
        (now + j.remaining_seconds(sizes[j.name], restart=restart), sizes[j.name]) for j in running
    )
    for end, gpus in ends:
        free += gpus
        if free >= need:
            return end, free - need
    return math.inf, 0
