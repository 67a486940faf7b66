"""What the measured simulator's policies share: a job's speed at a size (cached per
epoch), and placing the chosen jobs' GPUs on nodes."""

from __future__ import annotations

from hpclaunch.scheduling.simulate.measured.apps import GPUS_PER_NODE
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob, compact

__all__ = ["Speeds", "place"]


class Speeds:
    """``speeds(job, gpus)``: the job's progress per second on ``gpus`` placed compactly,
    in its current epoch (remembered: a policy asks the same many times)."""

    def __init__(self) -> None:
        self._rates: dict[tuple[str, int, int], float] = {}

    def __call__(self, job: WorkJob, gpus: int) -> float:
        epoch = job.app.epoch_at(job.progress)
        key = (job.name, epoch, gpus)
        if key not in self._rates:
            self._rates[key] = job.rate_on(compact(gpus, GPUS_PER_NODE), epoch)
        return self._rates[key]


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
