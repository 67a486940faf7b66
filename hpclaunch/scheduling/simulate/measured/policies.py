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
  ``min_interval``. Rigid jobs among them run at their size or wait. Its speeds come
  from the model itself: an oracle, where Pollux learns them as the job runs.

* ``fifo-elastic``: ``fifo-backfill`` with shrink before wait and growth into idle GPUs
  (:mod:`.fifo_elastic`).
* ``ones``: an evolutionary search over the next round's sizes, after ONES (:mod:`.ones`).

GPUs are placed on the nodes with the most free GPUs first (lowest index among equals).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hpclaunch.scheduling.simulate.measured.allocate import Speeds, backfills, place, shadow
from hpclaunch.scheduling.simulate.measured.engine import Policy, RoundsConfig
from hpclaunch.scheduling.simulate.measured.fifo_elastic import FifoElastic
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob
from hpclaunch.scheduling.simulate.measured.ones import Ones

__all__ = ["POLICIES", "TIRESIAS_THRESHOLD"]

TIRESIAS_THRESHOLD = 16 * 3600.0  # GPU-seconds of service before the second queue


class _Tiresias:
    """2D-LAS with two queues (see the module docstring); keeps its queues across rounds."""

    def __init__(self) -> None:
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
                if self.served[name] * by_name[name].gpus >= TIRESIAS_THRESHOLD:
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
    """Least attained service first, elastic jobs shrunk before anyone waits and grown
    into GPUs left idle (see the module docstring). Rigid jobs among them run at their
    size or wait."""

    def __init__(self, threshold: float = 0.05) -> None:
        self.threshold = threshold  # growth: speed-up per added GPU, at least
        self.rate = Speeds()

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        # Least GPU time held first (a continuous LAS: on workloads 1, 2 and 7 at load 1.0
        # it beat Tiresias's two queues here, 1,949/2,894/3,512 s against 1,958/3,235/3,560).
        order = sorted(jobs, key=lambda j: (j.gpu_seconds, j.submit))
        left = config.nodes * config.gpus_per_node
        sizes: dict[str, int] = {}
        for job in order:  # everyone that fits at its smallest, in priority order
            smallest = job.elastic.min_gpus if job.elastic else job.gpus
            if smallest <= left:
                sizes[job.name] = smallest
                left -= smallest
        by_name = {j.name: j for j in order}
        for name, size in sizes.items():  # back to what it holds, where that still fits
            held = len(by_name[name].nodes)
            if held > size and held - size <= left:
                left -= held - size
                sizes[name] = held
        while left > 0:  # grow where one more GPU helps most, relative to the job's speed
            best: tuple[float, str, int] | None = None
            for name, size in sizes.items():
                job = by_name[name]
                if job.elastic is None or size >= job.elastic.max_gpus:
                    continue
                if job.nodes and now - job.resized_at < job.elastic.min_interval:
                    continue
                here = self.rate(job, size)
                top = min(job.elastic.max_gpus, size + left)
                for bigger in range(size + 1, top + 1):
                    gain = (self.rate(job, bigger) / here - 1) / (bigger - size)
                    if best is None or gain > best[0]:
                        best = (gain, name, bigger)
            if best is None or best[0] < self.threshold:
                break
            _, name, bigger = best
            left -= bigger - sizes[name]
            sizes[name] = bigger
        chosen = [j for j in order if j.name in sizes]
        return place(chosen, config, sizes)


#: The policies by name.
POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": lambda: _fifo(backfill=False),
    "fifo-backfill": lambda: _fifo(backfill=True),
    "tiresias": _Tiresias,
    "elastic": _ElasticLAS,
    "fifo-elastic": FifoElastic,
    "ones": Ones,
}
