"""A job of a Pollux workload: what it asked for, how it may change size, and its state
while simulated (progress, the GPUs it holds, its restarts); reading the workloads."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpclaunch.scheduling.simulate.measured.apps import (
    GPUS_PER_NODE,
    App,
    Config,
    app,
    best_config,
    data_dir,
    rigid_config,
)
from hpclaunch.scheduling.throughput import Params, Shape, Throughput, best_shape, goodput

__all__ = ["RESTART", "Elastic", "WorkJob", "compact", "read_workload", "workload_path"]

#: Seconds a job spends loading its checkpoint each time it gets GPUs it did not hold (the
#: artifact's; :class:`~.engine.RoundsConfig` ``restart``).
RESTART = 30.0


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
        replan: When an adaptive batch is chosen again within a run: after this many of
            its measurements (one a round, 60 s), as hpclaunch's runtime does when the
            trainer calls ``runtime.replan_batch`` every so many steps
            (:mod:`hpclaunch.runtime.adaptive`); ``0``: after every measurement and at
            every epoch, as Pollux's agent does; ``None``: only at a restart (a trainer
            that never calls it). A restart always chooses again. At load 1.0, adaptive:
            3,068 s with 0 or 1, 3,140 s with 2, 3,213 s with 5, 3,326 s with 10, 3,737 s
            with ``None`` (fixed batch: 3,586 s); at load 0.5 every 2 minutes was not
            below Tiresias (x1.012), every minute is (bench/RESULTS.md, 2026-12-07).
    """

    min_gpus: int = 1
    max_gpus: int = 64
    batch: str = "adaptive"
    min_interval: float = 600.0
    replan: int | None = 1


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
    #: What it measured: its step times per shape (the model of its speed) and its
    #: gradient's squared norm and variance this epoch (``None``: nothing yet).
    measured: Throughput = field(default_factory=Throughput)
    gradient: tuple[float, float] | None = None
    #: Read the model's true speeds instead (a reference run: no policy does).
    oracle: bool = False
    #: Configurations chosen, by placement and epoch, each with the measurement count it
    #: was chosen at (a learned choice is made again after a new measurement; one entry
    #: per placement and epoch, not one per measurement).
    _configs: dict[tuple[tuple[int, ...], int], tuple[int, Config]] = field(default_factory=dict)
    #: The restart and measurement count it chose its running batch at, and that batch.
    _chosen: tuple[int, int, Config] | None = None

    def __post_init__(self) -> None:
        self.config = rigid_config(self.app, self.gpus, self.batch)

    def config_on(self, placement: tuple[int, ...], epoch: int) -> Config:
        """The batch configuration it runs with on ``placement`` in ``epoch``: a rigid
        job's own; ``fixed``: its batch over these GPUs; ``adaptive``: the most progress
        per second its measurements predict (its asked-for batch before it measured
        anything), or, with the ``oracle``, by the model's true speeds."""
        if self.elastic is None:
            return self.config
        adaptive = self.elastic.batch == "adaptive"
        replan = self.elastic.replan
        if adaptive and replan != 0 and placement == self.placement:
            # The batch its runtime chose at its last restart or re-plan, kept until the next.
            chosen, version = self._chosen, self.measured.version
            if (
                chosen is None
                or chosen[0] != self.restarts
                or (replan is not None and version - chosen[1] >= replan)
            ):
                chosen = self._chosen = (self.restarts, version, self._choose(placement, epoch))
            return chosen[2]
        key = (placement, epoch) if adaptive else ((sum(placement),), 0)
        stamp = self.measured.version if adaptive and not self.oracle else -1
        found = self._configs.get(key)
        if found is None or found[0] != stamp:
            found = self._configs[key] = (stamp, self._choose(placement, epoch))
        return found[1]

    def _choose(self, placement: tuple[int, ...], epoch: int) -> Config:
        assert self.elastic is not None
        if self.elastic.batch != "adaptive":
            return rigid_config(self.app, sum(placement), self.batch)
        if self.oracle:
            return best_config(self.app, placement, epoch)
        return self._learned_config(placement)

    def _learned_config(self, placement: tuple[int, ...]) -> Config:
        gpus = sum(placement)
        params = self.measured.params()
        if params is None or self.gradient is None:
            return rigid_config(self.app, gpus, self.batch)
        configs = self.app.configs(gpus) or [self.app.fallback_config(gpus)]
        shapes = {_shape(placement, c): c for c in configs}
        chosen = best_shape(
            params, list(shapes), self.app.init_batch, self.gradient, self.measured.shapes
        )
        return shapes[chosen]

    def _goodput(self, params: Params, placement: tuple[int, ...], config: Config) -> float:
        """Predicted progress per second (its measured speed and gradient statistics)."""
        assert self.gradient is not None
        return goodput(params, _shape(placement, config), self.app.init_batch, self.gradient)

    def observe(self, noise: float = 1.0) -> None:
        """Measure what it runs at now, as its runtime would report it: one step time on
        its placement and its gradient statistics, each off by the factor ``noise``."""
        if not self.nodes or self.done:
            return
        placement = self.placement
        epoch = self.app.epoch_at(self.progress)
        config = self.config_on(placement, epoch)
        self.measured.measure(
            _shape(placement, config), self.app.step_seconds(placement, config) * noise
        )
        sqr, var = self.app.gradient(config.batch, epoch)
        self.gradient = (sqr * noise, var / noise)

    def predicted_rate(self, gpus: int) -> float | None:
        """Progress per second on ``gpus`` placed compactly, as it predicts it from what it
        measured (the true one with the ``oracle``); ``None``: it measured nothing yet."""
        placement = compact(gpus, GPUS_PER_NODE)
        if self.oracle:
            return self.rate_on(placement)
        params = self.measured.params()
        if params is None or self.gradient is None:
            return None
        config = self.config_on(placement, self.app.epoch_at(self.progress))
        return self._goodput(params, placement, config)

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

    def remaining_seconds(self, gpus: int | None = None, restart: float = RESTART) -> float:
        """Run time left on ``gpus`` (its size by default) placed compactly, the ``restart``
        (the engine's, :class:`RoundsConfig`) included when it holds no GPUs (backfill's
        prediction): the work it has left (a job knows its epochs and where it is) at
        the speed it predicts now (:meth:`predicted_rate`); infinite before it measured
        anything, as a Slurm job without a time limit is to backfill. With the ``oracle``:
        the model's true run time."""
        gpus = gpus or len(self.nodes) or self.gpus
        start = self.delay if self.nodes else restart
        if self.oracle:  # the true run time, epoch by epoch
            application, progress = self.app, self.progress
            placement = compact(gpus, GPUS_PER_NODE)
            for epoch in range(application.epoch_at(progress), application.max_epochs):
                goal = application.epoch_end(epoch)
                start += (goal - progress) / self.rate_on(placement, epoch)
                progress = goal
            return start
        rate = self.predicted_rate(gpus)
        if not rate:
            return math.inf
        return start + (self.app.total_progress - self.progress) / rate


def compact(gpus: int, per_node: int) -> tuple[int, ...]:
    """``gpus`` on as few nodes of ``per_node`` as they fill (e.g. 10, 4 -> (4, 4, 2))."""
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def read_workload(
    path: Path | str, elastic: Elastic | None = None, *, oracle: bool = False
) -> list[WorkJob]:
    """The jobs of a Pollux workload CSV (``name,time,application,num_replicas,batch_size``),
    each ``elastic`` if given (its largest size bounded by what its batch allows); with
    ``oracle``, its policy sees the model's true speeds (a reference run)."""
    with open(path, newline="") as fh:
        return [
            WorkJob(
                name=row["name"],
                app=app(row["application"]),
                submit=float(row["time"]),
                gpus=int(row["num_replicas"]),
                batch=int(row["batch_size"]),
                elastic=_bounded(elastic, row["application"], int(row["batch_size"])),
                oracle=oracle,
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


def _shape(placement: tuple[int, ...], config: Config) -> Shape:
    return Shape(sum(placement), len(placement), config.atomic, config.accum)
