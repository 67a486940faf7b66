"""What the measured simulator's policies share: a job's speed at a size (cached per
epoch), EASY backfill's reservation and test, and placing the chosen jobs' GPUs on nodes."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob

__all__ = ["Speeds", "backfills", "place", "shadow"]


class Speeds:
    """``speeds(job, gpus)``: the job's progress per second on ``gpus`` placed compactly, as
    it predicts it from its own measurements (:meth:`WorkJob.predicted_rate`; ``None``
    before it measured anything); :meth:`ratio` compares two sizes of one job (linear
    before it measured anything: the prior, perfect scaling). Remembered per measurement
    count: a policy asks the same many times in a round."""

    def __init__(self) -> None:
        self._rates: dict[tuple[str, int, int, int], float | None] = {}

    def __call__(self, job: WorkJob, gpus: int) -> float | None:
        epoch = job.app.epoch_at(job.progress)
        key = (job.name, epoch, gpus, -1 if job.oracle else job.measured.version)
        if key not in self._rates:
            if len(self._rates) > 200_000:
                self._rates.clear()  # older measurement counts are never asked again
            self._rates[key] = job.predicted_rate(gpus)
        return self._rates[key]

    def ratio(self, job: WorkJob, gpus: int, than: int) -> float:
        """Its speed on ``gpus`` over its speed on ``than``."""
        a, b = self(job, gpus), self(job, than)
        return a / b if a and b else gpus / than


def shadow(need: int, ends: Iterable[tuple[float, int]], free: int) -> tuple[float, int]:
    """EASY: when a job needing ``need`` GPUs can start as the running jobs end (``ends``:
    each one's end and GPUs; ``free`` GPUs now), and the GPUs spare then beyond its need."""
    for end, gpus in sorted(ends):
        free += gpus
        if free >= need:
            return end, free - need
    return math.inf, 0


def backfills(
    job: WorkJob, left: int, reserved: float, spare: int, now: float, restart: float
) -> int | None:
    """EASY's test for a later job at its asked-for size: it fits in the ``left`` GPUs and
    ends (by the model) before the ``reserved`` start of the first blocked job, or takes only
    GPUs ``spare`` then. The spare GPUs left if it starts, ``None`` if it may not."""
    if job.gpus > left:
        return None
    late = now + job.remaining_seconds(restart=restart) > reserved
    if late and job.gpus > spare:
        return None
    return spare - job.gpus if late else spare


def place(
    chosen: list[WorkJob], config: RoundsConfig, sizes: dict[str, int] | None = None
) -> dict[str, tuple[int, ...]]:
    """GPUs for the chosen jobs, ``sizes[name]`` each (default: the job's ``gpus``). A job
    that keeps its size keeps its GPUs; the others, in order, get each GPU on a node with
    the most free GPUs (lowest index among equals)."""
    sizes = sizes or {}
    free = [config.gpus_per_node] * config.nodes
    out: dict[str, tuple[int, ...]] = {}
    for job in chosen:
        if job.nodes and len(job.nodes) == sizes.get(job.name, job.gpus):
            out[job.name] = job.nodes
            for node in job.nodes:
                free[node] -= 1
    for job in chosen:
        if job.name in out:
            continue
        want = sizes.get(job.name, job.gpus)
        nodes: list[int] = []
        while len(nodes) < want:
            node = max(range(config.nodes), key=lambda n: (free[n], -n))
            take = min(free[node], want - len(nodes))
            if take <= 0:
                raise AssertionError("a policy chose more GPUs than the cluster has")
            nodes += [node] * take
            free[node] -= take
        out[job.name] = tuple(nodes)
    return out
