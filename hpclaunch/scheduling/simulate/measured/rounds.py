"""A round-based simulator for jobs whose work is measured (:mod:`.apps`), as the Pollux
artifact runs its workloads: every ``interval`` seconds (60) the jobs advance, then the
policy decides who holds which GPUs for the next round. A job that gets GPUs it did not
hold (started, resumed, moved or resized) first spends ``restart`` seconds (30) without
progress: loading its checkpoint and warming up. Jobs are gang-scheduled: all their GPUs
or none.

Policies (:data:`POLICIES`):

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

GPUs are placed on the nodes with the most free GPUs first (lowest index among equals).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpclaunch.scheduling.simulate.measured.apps import (
    App,
    Config,
    app,
    best_config,
    data_dir,
    rigid_config,
)

__all__ = ["POLICIES", "RoundsConfig", "WorkJob", "read_workload", "simulate_rounds"]

TIRESIAS_THRESHOLD = 16 * 3600.0  # GPU-seconds of service before the second queue


@dataclass(frozen=True)
class Elastic:
    """How an elastic job may change size.

    Attributes:
        min_gpus: The fewest GPUs it runs on.
        max_gpus: The most.
        batch: ``fixed``: the global batch stays the job's, accumulation makes up for fewer
            GPUs (the trajectory does not depend on the size); ``adaptive``: the batch with
            the most progress per second at each size and epoch (Pollux's).
        min_interval: Seconds between two changes of size the policy makes to grow it
            (shrinking to make room for others is never delayed).
    """

    min_gpus: int = 1
    max_gpus: int = 64
    batch: str = "adaptive"
    min_interval: float = 600.0


@dataclass(eq=False)
class WorkJob:
    """One job of a Pollux workload, and its state while simulated. ``gpus`` and ``batch``
    are what its user asked for (a rigid job's size); an ``elastic`` one may run on other
    sizes."""

    name: str
    app: App
    submit: float
    gpus: int
    batch: int
    elastic: Elastic | None = None
    config: Config = field(init=False)
    progress: float = 0.0
    nodes: tuple[int, ...] = ()  # the node of each GPU it holds (allocation order)
    delay: float = 0.0  # restart seconds left before progress resumes
    finish: float = -1.0
    restarts: int = -1  # -1: never started
    gpu_seconds: float = 0.0  # GPU time held
    evicted_seconds: float = 0.0  # time without GPUs after its first start
    started: float = -1.0  # when it first got GPUs

    resized_at: float = -math.inf  # when it last got a new size
    _configs: dict[tuple[tuple[int, ...], int], Config] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.config = rigid_config(self.app, self.gpus, self.batch)

    def config_on(self, placement: tuple[int, ...], epoch: int) -> Config:
        """The batch configuration it runs with on ``placement`` in ``epoch``."""
        if self.elastic is None:
            return self.config
        key = (placement, epoch) if self.elastic.batch == "adaptive" else ((sum(placement),), 0)
        found = self._configs.get(key)
        if found is None:
            found = self._configs[key] = (
                best_config(self.app, placement, epoch)
                if self.elastic.batch == "adaptive"
                else rigid_config(self.app, sum(placement), self.batch)
            )
        return found

    def rate_on(self, placement: tuple[int, ...], epoch: int | None = None) -> float:
        """Progress per second on ``placement`` (in its current epoch by default)."""
        epoch = self.app.epoch_at(self.progress) if epoch is None else epoch
        return self.app.rate(placement, self.config_on(placement, epoch), epoch)

    @property
    def done(self) -> bool:
        return self.finish >= 0

    @property
    def placement(self) -> tuple[int, ...]:
        """GPUs per node, nodes in the order they were allocated."""
        counts: dict[int, int] = {}
        for node in self.nodes:
            counts[node] = counts.get(node, 0) + 1
        return tuple(counts.values())

    def jct(self) -> float:
        """Completion time: finish - submit."""
        return self.finish - self.submit

    def first_wait(self) -> float:
        """Time from submission to its first GPUs."""
        return self.started - self.submit

    def advance(self, start: float, seconds: float) -> None:
        """Run on its GPUs from ``start`` for ``seconds`` (nothing when it holds none)."""
        if self.done:
            return
        if not self.nodes:
            if self.restarts >= 0:
                self.evicted_seconds += seconds
            return
        self.gpu_seconds += seconds * len(self.nodes)
        pause = min(self.delay, seconds)
        self.delay -= pause
        now, left = start + pause, seconds - pause
        placement = self.placement
        application = self.app
        while left > 0:
            epoch = application.epoch_at(self.progress)
            rate = self.rate_on(placement, epoch)
            goal = application.epoch_end(epoch)
            need = (goal - self.progress) / rate
            if need > left:
                self.progress += rate * left
                return
            self.progress = goal
            now += need
            left -= need
            if epoch == application.max_epochs - 1:
                self.finish = now
                self.gpu_seconds -= left * len(self.nodes)  # it frees its GPUs at once
                return

    def remaining_seconds(self, gpus: int | None = None) -> float:
        """Run time left on ``gpus`` (its size by default) placed compactly, restart
        included when it holds no GPUs (backfill's prediction)."""
        application = self.app
        placement = _compact(gpus or len(self.nodes) or self.gpus, 4)
        seconds, progress = self.delay if self.nodes else 30.0, self.progress
        for epoch in range(application.epoch_at(progress), application.max_epochs):
            goal = application.epoch_end(epoch)
            seconds += (goal - progress) / self.rate_on(placement, epoch)
            progress = goal
        return seconds


@dataclass(frozen=True)
class RoundsConfig:
    """Cluster shape and round mechanics (the artifact's: 16 x 4 GPUs, 60 s, 30 s)."""

    nodes: int = 16
    gpus_per_node: int = 4
    interval: float = 60.0
    restart: float = 30.0
    horizon: float = 60 * 86400.0  # a guard against a policy that never finishes


#: A policy: (now, the jobs arrived and not done in arrival order, config) -> the GPUs
#: each job holds next round (its node ids). Jobs absent hold none.
Policy = Callable[[float, list[WorkJob], RoundsConfig], dict[str, tuple[int, ...]]]


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
        return _place(chosen, config)


def _fifo(backfill: bool) -> Policy:
    def decide(now: float, jobs: list[WorkJob], config: RoundsConfig) -> dict[str, tuple[int, ...]]:
        running = [j for j in jobs if j.nodes]
        left = config.nodes * config.gpus_per_node - sum(j.gpus for j in running)
        chosen = list(running)
        shadow = math.inf  # when the first blocked job can start
        spare = 0  # GPUs free then beyond its need
        for job in jobs:
            if job.nodes:
                continue
            if math.isinf(shadow) and job.gpus <= left:
                chosen.append(job)
                left -= job.gpus
                continue
            if not backfill:
                break
            if math.isinf(shadow):
                shadow, spare = _shadow(job, chosen, left, now)
                continue
            if job.gpus <= left and (now + job.remaining_seconds() <= shadow or job.gpus <= spare):
                if now + job.remaining_seconds() > shadow:
                    spare -= job.gpus
                chosen.append(job)
                left -= job.gpus
        return _place(chosen, config)

    return decide


def _shadow(job: WorkJob, running: list[WorkJob], free: int, now: float) -> tuple[float, int]:
    """EASY: when ``job`` can start as the running jobs end, and the GPUs spare then."""
    for end, gpus in sorted((now + j.remaining_seconds(), j.gpus) for j in running):
        free += gpus
        if free >= job.gpus:
            return end, free - job.gpus
    return math.inf, 0


class _ElasticLAS:
    """Least attained service first, elastic jobs shrunk before anyone waits and grown
    into GPUs left idle (see the module docstring). Rigid jobs among them run at their
    size or wait."""

    def __init__(self, threshold: float = 0.05) -> None:
        self.threshold = threshold  # growth: speed-up per added GPU, at least
        self._rates: dict[tuple[str, int, int], float] = {}

    def rate(self, job: WorkJob, gpus: int) -> float:
        epoch = job.app.epoch_at(job.progress)
        key = (job.name, epoch, gpus)
        if key not in self._rates:
            self._rates[key] = job.rate_on(_compact(gpus, 4), epoch)
        return self._rates[key]

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
        return _place(chosen, config, sizes)


#: The policies by name.
POLICIES: dict[str, Callable[[], Policy]] = {
    "fifo": lambda: _fifo(backfill=False),
    "fifo-backfill": lambda: _fifo(backfill=True),
    "tiresias": _Tiresias,
    "elastic": _ElasticLAS,
}


def _place(
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


def _compact(gpus: int, per_node: int) -> tuple[int, ...]:
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def read_workload(path: Path | str, elastic: Elastic | None = None) -> list[WorkJob]:
    """The jobs of a Pollux workload CSV (``name,time,application,num_replicas,batch_size``),
    each ``elastic`` if given (its largest size bounded by what its batch allows)."""
    with open(path, newline="") as fh:
        return [
            WorkJob(
                name=row["name"],
                app=app(row["application"]),
                submit=float(row["time"]),
                gpus=int(row["num_replicas"]),
                batch=int(row["batch_size"]),
                elastic=_bounded(elastic, row["application"], int(row["batch_size"])),
            )
            for row in csv.DictReader(fh)
        ]


def _bounded(elastic: Elastic | None, application: str, batch: int) -> Elastic | None:
    """``elastic`` with at most the GPUs the batch can spread over (a fixed batch: the
    job's; adaptive: the largest measured one) at the smallest per-GPU batch."""
    if elastic is None:
        return None
    a = app(application)
    most = (batch if elastic.batch == "fixed" else a.max_batch) // a.min_local_bsz
    return replace(elastic, max_gpus=max(elastic.min_gpus, min(elastic.max_gpus, most)))


def workload_path(number: int, load: float = 1.0) -> Path:
    """The shipped workload ``number`` (1-8) at relative ``load`` (0.5, 1.0, 1.5, 2.0)."""
    folder = "workloads" if load == 1.0 else f"workloads-{load:.1f}"
    return data_dir() / folder / f"workload-{number}.csv"


def simulate_rounds(
    jobs: Sequence[WorkJob], policy: Policy, config: RoundsConfig | None = None
) -> list[WorkJob]:
    """Run ``jobs`` (fresh ones: they keep their state) under ``policy`` to the end."""
    config = config or RoundsConfig()
    pending = sorted(jobs, key=lambda j: (j.submit, j.name))
    now = 0.0
    while any(not j.done for j in pending):
        if now > config.horizon:
            raise RuntimeError(f"jobs still running after {config.horizon:.0f} s")
        for job in pending:
            job.advance(now, config.interval)
        now += config.interval
        active = [j for j in pending if j.submit <= now and not j.done]
        for job in pending:
            if job.done:
                job.nodes = ()
        decided = policy(now, active, config)
        for job in active:
            nodes = decided.get(job.name, ())
            if nodes != job.nodes:
                if nodes and job.nodes and len(nodes) != len(job.nodes):
                    job.resized_at = now
                job.nodes = nodes
                if nodes:
                    job.delay = config.restart
                    job.restarts += 1
                    if job.started < 0:
                        job.started = now
    return list(pending)
