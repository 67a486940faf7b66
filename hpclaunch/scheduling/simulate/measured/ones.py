"""``ones``: an evolutionary search over the next round's sizes, after ONES (Bian et al.,
"Online Evolutionary Batch Size Orchestration for Scheduling Deep Learning Workloads in
GPU Clusters", SC'21), written from its description, not its code.

An individual gives every job a size for the next round: 0 (waits, or is preempted) or one
of its sizes (a rigid job: its own; an elastic one: its smallest, powers of two, its
asked-for, its largest; the batch per size as its :class:`~.jobs.Elastic` says). Each
round starts from seeds (the sizes held now, and least-attained-service-first at the
smallest sizes with the rest grown by speed-up), then for ``generations``:

* crossover: a child takes each job's size from one of two parents (a fair coin);
* mutation, on one job: preemption (size 0) or another of its sizes, at random;
* repair: while the sizes exceed the GPUs, a random job steps down a size (to 0 last);
* selection: the ``population`` fittest of parents and children (the best is kept).

A job keeps the size it got (or waits) for its ``min_interval`` after each change: every
change is a restart, and ONES too limits how often a job's batch changes. Small searches
(4 x 3) did best on workload 1 at load 1.0: 2,186 s against 2,347 s at 8 x 6 and 2,699 s at
16 x 12 (and 2,554 s at 8 x 6 without the interval): the fitness predicts one round ahead,
and a stronger search follows its errors further (docs/simulator.md).

Fitness (lower is better) is the predicted sum of the jobs' remaining times, built from
remaining GPU-seconds: a job given ``g`` GPUs needs ``work / speed(g)`` seconds (plus a
restart where its size changes); a job given none waits, first, for the running jobs'
remaining GPU-seconds to drain from the cluster (their sum over its GPUs), then runs at
its smallest size, a round later at the soonest. Remaining GPU-seconds alone would be
least with nothing running; the drain term makes an idle GPU cost every waiting job time
(and the round makes a lone job that waits cost more than one that starts). The random
generator is seeded per round (``seed``, the round's time): runs repeat exactly.
"""

from __future__ import annotations

import random

from hpclaunch.scheduling.simulate.measured.allocate import Speeds, place
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob

__all__ = ["Ones"]

Sizes = tuple[int, ...]  # one size per job, in the round's job order


class Ones:
    """The policy (see the module docstring)."""

    def __init__(self, population: int = 4, generations: int = 3, seed: int = 0) -> None:
        self.population = population
        self.generations = generations
        self.seed = seed
        self.speed = Speeds()
        self.sized: dict[str, float] = {}  # when each job last changed size

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        if not jobs:
            return {}
        rng = random.Random(f"{self.seed}:{now}")
        capacity = config.nodes * config.gpus_per_node
        # A job that got its size less than min_interval ago keeps it (or waits): ONES
        # limits how often a job's batch changes too; every change is a restart.
        choices = [
            [len(j.nodes)]
            if j.nodes
            and j.elastic
            and now - self.sized.get(j.name, -1e18) < j.elastic.min_interval
            else _sizes(j, capacity)
            for j in jobs
        ]
        fit = _Fitness(jobs, self.speed, capacity, config.restart, config.interval)
        held = tuple(len(j.nodes) for j in jobs)
        pool = {held: fit(held), (g := self._greedy(jobs, choices, capacity)): fit(g)}
        for _ in range(self.generations):
            parents = list(pool)
            for _ in range(self.population):
                a, b = rng.choice(parents), rng.choice(parents)
                child = [x if rng.random() < 0.5 else y for x, y in zip(a, b, strict=True)]
                at = rng.randrange(len(jobs))
                child[at] = 0 if rng.random() < 0.5 else rng.choice(choices[at])
                _repair(child, choices, capacity, rng)
                key = tuple(child)
                if key not in pool:
                    pool[key] = fit(key)
            pool = dict(sorted(pool.items(), key=lambda kv: kv[1])[: self.population])
        best = min(pool, key=lambda k: pool[k])
        sizes = {j.name: s for j, s in zip(jobs, best, strict=True) if s}
        for job in jobs:
            if sizes.get(job.name, 0) != len(job.nodes):
                self.sized[job.name] = now  # started, resized or preempted
        return place([j for j in jobs if j.name in sizes], config, sizes)

    def _greedy(self, jobs: list[WorkJob], choices: list[list[int]], capacity: int) -> Sizes:
        """Least GPU time first at the smallest size, the rest grown by speed-up per GPU."""
        sizes = [0] * len(jobs)
        left = capacity
        for i in sorted(range(len(jobs)), key=lambda i: (jobs[i].gpu_seconds, jobs[i].submit)):
            if choices[i][0] <= left:
                sizes[i] = choices[i][0]
                left -= sizes[i]
        while left > 0:
            best: tuple[float, int, int] | None = None
            for i, job in enumerate(jobs):
                if not sizes[i]:
                    continue
                for bigger in choices[i]:
                    if sizes[i] < bigger <= sizes[i] + left:
                        speedup = self.speed.ratio(job, bigger, sizes[i])
                        gain = (speedup - 1) / (bigger - sizes[i])
                        if best is None or gain > best[0]:
                            best = (gain, i, bigger)
            if best is None or best[0] < 0.05:
                break
            _, i, bigger = best
            left -= bigger - sizes[i]
            sizes[i] = bigger
        return tuple(sizes)


class _Fitness:
    """The predicted sum of remaining times of a round's sizes (module docstring)."""

    def __init__(
        self, jobs: list[WorkJob], speed: Speeds, capacity: int, restart: float, interval: float
    ):
        self.jobs, self.speed, self.capacity, self.restart = jobs, speed, capacity, restart
        self.interval = interval  # a job left out waits for the next round at least
        self.work = [j.app.total_progress - j.progress for j in jobs]
        self.held = [len(j.nodes) for j in jobs]
        self.smallest = [_sizes(j, capacity)[0] for j in jobs]
        self.order = sorted(range(len(jobs)), key=lambda i: (jobs[i].gpu_seconds, jobs[i].submit))
        # A job that measured nothing yet has no predicted time: it counts the median of
        # the others' at their smallest sizes (an hour when none measured anything).
        known = sorted(
            self.work[i] / rate
            for i, job in enumerate(jobs)
            if (rate := speed(job, self.smallest[i])) is not None
        )
        self.unknown = known[len(known) // 2] if known else 3600.0

    def seconds(self, i: int, size: int) -> float:
        """Job ``i``'s predicted time left on ``size`` GPUs."""
        rate = self.speed(self.jobs[i], size)
        if rate is None:
            return self.unknown * self.smallest[i] / size
        return self.work[i] / rate

    def __call__(self, sizes: Sizes) -> float:
        total = drain = 0.0
        for i, size in enumerate(sizes):
            if size:
                seconds = self.seconds(i, size)
                if size != self.held[i]:
                    seconds += self.restart
                total += seconds
                drain += seconds * size
        for i in self.order:  # the waiting, least GPU time held first
            if not sizes[i]:
                seconds = self.restart + self.seconds(i, self.smallest[i])
                total += self.interval + drain / self.capacity + seconds
                drain += seconds * self.smallest[i]
        return total


def _sizes(job: WorkJob, capacity: int) -> list[int]:
    """The sizes a job may get, smallest first."""
    if job.elastic is None:
        return [job.gpus]
    low, high = job.elastic.min_gpus, min(job.elastic.max_gpus, capacity)
    out = {low, min(job.gpus, high), high}
    power = 1
    while power < high:
        if power > low:
            out.add(power)
        power *= 2
    return sorted(s for s in out if low <= s <= high)


def _repair(sizes: list[int], choices: list[list[int]], capacity: int, rng: random.Random) -> None:
    """Random jobs step down a size (to 0 last) until the sizes fit the GPUs."""
    while sum(sizes) > capacity:
        i = rng.choice([i for i, s in enumerate(sizes) if s])
        smaller = [s for s in choices[i] if s < sizes[i]]
        sizes[i] = smaller[-1] if smaller else 0
