"""Who holds which GPUs next round (:data:`POLICIES`):

* ``fifo``: rigid, at the workload's GPU count and batch, in arrival order; a job waits
  until it fits, and nothing passes it.
* ``fifo-backfill``: as ``fifo``, but later jobs start when they fit now and end (by the
  model's exact prediction) before the first waiting job could start (EASY backfill).
* ``tiresias``: rigid, two-dimensional least attained service (Tiresias, NSDI'19, with
  the parameters the Pollux artifact ran it with): a new job enters the first queue; once
  it has held ``gpus x seconds`` >= 16 GPU-hours it moves to the second; queues in order,
  each first come first served, by GPU count (any nodes); a job that no longer fits in
  the order is preempted and resumes later from where it was.
* ``elastic``: jobs in order of the GPU time they have held (least first). Each gets its
  smallest size while GPUs remain (an elastic job is shrunk before anyone waits), then
  the size it holds where that still fits, then the idle GPUs go, one decision at a
  time, to the job whose speed grows most per added GPU (its batch as its ``Elastic``
  says), while that is at least 5 % per GPU; a job grows at most once per
  ``min_interval``. Rigid jobs among them run at their size or wait. It is
  :func:`hpclaunch.scheduling.las.plan`, the live arbiter's decision; its speeds are
  each job's predictions from its own measurements, as Pollux learns them.

* ``fifo-elastic``: ``fifo-backfill`` with shrink before wait and growth into idle GPUs
  (:mod:`.fifo_elastic`).
* ``ones``: an evolutionary search over the next round's sizes, after ONES (:mod:`.ones`).
* ``optimus``: Optimus as the Pollux artifact ran it, with its oracle: a reference that
  checks the elastic path against the artifact's published results (:mod:`.optimus`).

GPUs are placed on the nodes with the most free GPUs first (lowest index among equals).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from hpclaunch.scheduling.las import Contender, plan
from hpclaunch.scheduling.simulate.measured.allocate import Speeds, backfills, place, shadow
from hpclaunch.scheduling.simulate.measured.engine import Policy, RoundsConfig
from hpclaunch.scheduling.simulate.measured.fifo_elastic import FifoElastic
from hpclaunch.scheduling.simulate.measured.jobs import Elastic, WorkJob
from hpclaunch.scheduling.simulate.measured.ones import Ones
from hpclaunch.scheduling.simulate.measured.optimus import Optimus

__all__ = ["POLICIES", "TIRESIAS_THRESHOLD", "Tiresias"]

TIRESIAS_THRESHOLD = 16 * 3600.0  # GPU-seconds of service before the second queue
#: A job's bound on growth, by its batch: this many times the GPUs it measured at (and its
#: asked-for size); ``bench/elastic_sim.py --explore`` changes it.
EXPLORE = {"fixed": 1, "adaptive": 4}


class Tiresias:
    """2D-LAS with two queues (see the module docstring); keeps its queues across rounds."""

    def __init__(self, threshold: float = TIRESIAS_THRESHOLD) -> None:
        self.threshold = threshold  # GPU-seconds of service before the second queue
        self.queues: tuple[list[str], list[str]] = ([], [])
        self.served: dict[str, float] = {}  # seconds held since it entered its queue
        self.running: set[str] = set()
        self.last = 0.0

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        by_name = {j.name: j for j in jobs}
        q0, q1 = self.queues
        q0[:] = [n for n in q0 if n in by_name]
        q1[:] = [n for n in q1 if n in by_name]
        for job in jobs:
            if job.name not in self.served:
                self.served[job.name] = 0.0
                q0.append(job.name)
        for name in list(q0):
            if name in self.running:
                self.served[name] += now - self.last
                if self.served[name] * by_name[name].gpus >= self.threshold:
                    q0.remove(name)
                    q1.append(name)
        self.last = now
        left = config.nodes * config.gpus_per_node
        chosen: list[WorkJob] = []
        for name in (*q0, *q1):
            job = by_name[name]
            if job.gpus <= left:
                chosen.append(job)
                left -= job.gpus
        self.running = {j.name for j in chosen}
        return place(chosen, config)


def _fifo(backfill: bool) -> Policy:
    def decide(now: float, jobs: list[WorkJob], config: RoundsConfig) -> dict[str, tuple[int, ...]]:
        running = [j for j in jobs if j.nodes]
        left = config.nodes * config.gpus_per_node - sum(j.gpus for j in running)
        chosen = list(running)
        reserved = math.inf  # when the first blocked job can start
        spare = 0  # GPUs free then beyond its need
        for job in jobs:
            if job.nodes:
                continue
            if math.isinf(reserved) and job.gpus <= left:
                chosen.append(job)
                left -= job.gpus
                continue
            if not backfill:
                break
            if math.isinf(reserved):
                ends = ((now + j.remaining_seconds(restart=config.restart), j.gpus) for j in chosen)
                reserved, spare = shadow(job.gpus, ends, left)
                continue
            after = backfills(job, left, reserved, spare, now, config.restart)
            if after is not None:
                spare = after
                chosen.append(job)
                left -= job.gpus
        return place(chosen, config)

    return decide


class _ElasticLAS:
    """:func:`hpclaunch.scheduling.las.plan` (the live arbiter's decision) on the workload:
    one tier, every job preemptible, each job's speed-ups as it predicts them from its
    measurements (see the module docstring)."""

    def __init__(self, threshold: float = 0.05) -> None:
        self.threshold = threshold  # growth: speed-up per added GPU, at least
        self.rate = Speeds()

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        sizes = plan(
            [self._contender(now, job) for job in jobs],
            config.nodes * config.gpus_per_node,
            threshold=self.threshold,
        )
        order = sorted(jobs, key=lambda j: (j.gpu_seconds, j.submit))
        return place([j for j in order if j.name in sizes], config, sizes)

    def _contender(self, now: float, job: WorkJob) -> Contender:
        elastic = job.elastic
        if elastic is None:
            return Contender(job.name, (job.gpus,), len(job.nodes), job.gpu_seconds, job.submit)
        top = elastic.max_gpus if job.oracle else _explored(job, elastic)
        return Contender(
            job.name,
            tuple(range(elastic.min_gpus, min(elastic.max_gpus, top) + 1)),
            held=len(job.nodes),
            attained=job.gpu_seconds,
            submitted=job.submit,
            may_grow=not job.nodes or now - job.resized_at >= elastic.min_interval,
            speedup=partial(self.rate.ratio, job),
        )


def _explored(job: WorkJob, elastic: Elastic) -> int:
    """The most GPUs a job may take by what it knows: its asked-for size (its user tuned
    it for its batch) and :data:`EXPLORE` times the most it has measured itself at
    (Pollux bounds exploration so, at 2x). With a fixed batch, more GPUs gain only what
    the sync allows, which a job cannot know before it pays a restart to measure it;
    with an adaptive one, a larger size also allows a larger batch (the figures for
    each bound: bench/RESULTS.md)."""
    most = max((s.gpus for s in job.measured.shapes), default=0)
    return max(job.gpus, EXPLORE[elastic.batch] * most, elastic.min_gpus)


#: The policies by name.
POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": lambda: _fifo(backfill=False),
    "fifo-backfill": lambda: _fifo(backfill=True),
    "tiresias": Tiresias,
    "elastic": _ElasticLAS,
    "fifo-elastic": FifoElastic,
    "ones": Ones,
    "optimus": Optimus,
}
