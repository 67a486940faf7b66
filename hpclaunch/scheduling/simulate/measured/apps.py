"""Training jobs as measured work: step times per placement, and progress per epoch.

The data are the Pollux artifact's measurements (``data/pollux-osdi21/``, its README): six
applications, each with step times measured per placement (GPUs on each of up to 4 nodes)
and per-GPU batch, more at 6-16 nodes, and real training runs at several total batch sizes
with one row per epoch.

A job's work is counted in *progress*: optimizer steps at the application's smallest
measured batch (``init_batch``), discounted by statistical efficiency. A step at total batch
``B`` makes ``gain = (var + sqr) / (var / s + sqr)`` of progress, ``s = B / init_batch``,
where ``sqr`` and ``var`` are the gradient's squared norm and variance measured in that
epoch (the gradient noise scale: a larger batch is worth more steps of the small one, but
fewer than ``s``). Epoch ``e`` ends when progress reaches the smallest progress any run had
after ``e`` epochs; a job is done after its application's epoch cap (bert 2, cifar10 100,
ncf 10, imagenet 90, deepspeech2 80, yolov3 50), the artifact's completion rule. Values
between measured batch sizes, per-GPU batches and node or GPU counts are interpolated
linearly.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TypeVar

from hpclaunch.scheduling.throughput import efficiency

__all__ = [
    "APPLICATIONS",
    "GPUS_PER_NODE",
    "App",
    "Config",
    "app",
    "best_config",
    "data_dir",
    "rigid_config",
]

#: Epoch caps, and yolov3's per-GPU batch limit (8), as the artifact set them.
APPLICATIONS: dict[str, dict[str, int]] = {
    "bert": {"max_epochs": 2},
    "cifar10": {"max_epochs": 100},
    "ncf": {"max_epochs": 10},
    "imagenet": {"max_epochs": 90},
    "deepspeech2": {"max_epochs": 80},
    "yolov3": {"max_epochs": 50, "max_local_bsz": 8},
}

#: GPUs per node of the machines the step times were measured on (16 nodes x 4).
GPUS_PER_NODE = 4

#: Measured points: (per-GPU batch, step seconds, of which gradient sync seconds).
Points = list[tuple[float, float, float]]
Level = TypeVar("Level", int, float)


def data_dir() -> Path:
    """The shipped Pollux data (``data/pollux-osdi21``)."""
    return Path(str(resources.files("hpclaunch.scheduling.simulate") / "data" / "pollux-osdi21"))


@dataclass(frozen=True)
class Epoch:
    """One row of a validation run: progress and gradient statistics of an epoch."""

    progress: float
    sqr: float
    var: float


@dataclass(frozen=True)
class Config:
    """How a job runs on its GPUs: per-GPU ("atomic") batch and gradient accumulation.

    Attributes:
        atomic: Samples per GPU per forward/backward pass.
        accum: Extra passes accumulated before each optimizer step (0: none).
        batch: Total batch per optimizer step (GPUs x atomic x (accum + 1)).
    """

    atomic: int
    accum: int
    batch: int


class App:
    """One application's measurements (see the module docstring)."""

    def __init__(self, directory: Path, max_epochs: int, max_local_bsz: int | None = None):
        self.name = directory.name
        self.validation: dict[int, list[Epoch]] = {}
        for path in directory.glob("validation-*.csv"):
            batch = int(path.stem.split("-")[-1])
            with path.open() as fh:
                self.validation[batch] = [
                    Epoch(float(r["progress"]), float(r["grad_sqr"]), float(r["grad_var"]))
                    for r in csv.DictReader(fh)
                ]
        self.batches = sorted(self.validation)
        self.placements: dict[str, Points] = defaultdict(list)
        by_shape: dict[tuple[int, int, float], list[tuple[float, float]]] = defaultdict(list)
        with (directory / "placements.csv").open() as fh:
            for r in csv.DictReader(fh):
                point = (float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
                self.placements[r["placement"]].append(point)
                digits = [int(d) for d in r["placement"]]
                by_shape[len(digits), sum(digits), point[0]].append(point[1:])
        # The shape grid (nodes, GPUs) -> points: placements averaged per shape, plus the
        # measurements at 6-16 nodes.
        self.grid: dict[tuple[int, int], Points] = defaultdict(list)
        for (nodes, gpus, bsz), times in by_shape.items():
            step = sum(t[0] for t in times) / len(times)
            sync = sum(t[1] for t in times) / len(times)
            self.grid[nodes, gpus].append((bsz, step, sync))
        with (directory / "scalability.csv").open() as fh:
            for r in csv.DictReader(fh):
                key = (int(r["num_nodes"]), int(r["num_replicas"]))
                self.grid[key].append(
                    (float(r["local_bsz"]), float(r["step_time"]), float(r["sync_time"]))
                )
        for points in (*self.placements.values(), *self.grid.values()):
            points.sort()
        self.init_batch = self.batches[0]
        self.max_batch = self.batches[-1]
        local = sorted({p[0] for points in self.placements.values() for p in points})
        self.min_local_bsz = int(local[0])
        self.max_local_bsz = int(max_local_bsz or local[-1])
        #: The measured per-GPU batches within the per-GPU limit (adaptive batch choices).
        self.local_sizes = [b for b in local if b <= self.max_local_bsz] or [self.max_local_bsz]
        self.max_epochs = max_epochs
        self._ends = [
            min(rows[e].progress for rows in self.validation.values()) for e in range(max_epochs)
        ]

    # -- work -------------------------------------------------------------------------
    @property
    def total_progress(self) -> float:
        """The progress at which a job of this application is done."""
        return self._ends[-1]

    def epoch_end(self, epoch: int) -> float:
        """The progress at the end of ``epoch`` (0-based)."""
        return self._ends[epoch]

    def epoch_at(self, progress: float) -> int:
        """The epoch (0-based) a job with ``progress`` is in (the last one when done)."""
        return min(bisect.bisect_right(self._ends, progress), self.max_epochs - 1)

    def gain(self, batch: float, epoch: int) -> float:
        """Progress per optimizer step at total ``batch`` in ``epoch``."""
        return efficiency(batch, self.init_batch, *self.gradient(batch, epoch))

    def gradient(self, batch: float, epoch: int) -> tuple[float, float]:
        """The gradient's squared norm and variance a run at total ``batch`` measures in
        ``epoch`` (between measured batches: linear)."""
        lo, hi, w = _bracket(self.batches, batch)
        a, b = self.validation[lo][epoch], self.validation[hi][epoch]
        return a.sqr + w * (b.sqr - a.sqr), a.var + w * (b.var - a.var)

    def step_seconds(self, placement: Sequence[int], config: Config) -> float:
        """Seconds per optimizer step on ``placement`` with ``config``."""
        step, sync = self.step_time(placement, config.atomic)
        return step + config.accum * (step - sync)  # accumulation passes skip the sync

    # -- speed ------------------------------------------------------------------------
    def step_time(self, placement: Sequence[int], atomic: float) -> tuple[float, float]:
        """(Seconds per pass, of which gradient sync) on ``placement`` (GPUs per node, in
        allocation order) with ``atomic`` samples per GPU."""
        counts = tuple(c for c in placement if c)
        key = "".join(map(str, min(counts[i:] + counts[:i] for i in range(len(counts)))))
        if key in self.placements:
            return _along(self.placements[key], atomic)
        return self._from_grid(min(len(counts), 16), sum(counts), atomic)

    def _from_grid(self, nodes: int, gpus: int, atomic: float) -> tuple[float, float]:
        """Linear in node count, then GPU count, then per-GPU batch, between measured
        shapes (the nearest ones where the query lies outside them)."""
        levels = sorted({n for n, _ in self.grid})
        n_lo, n_hi, wn = _bracket(levels, nodes)

        def at_nodes(n: int) -> tuple[float, float]:
            gpu_levels = sorted(g for m, g in self.grid if m == n)
            g_lo, g_hi, wg = _bracket(gpu_levels, gpus)
            lo = _along(self.grid[n, g_lo], atomic)
            hi = _along(self.grid[n, g_hi], atomic)
            return lo[0] + wg * (hi[0] - lo[0]), lo[1] + wg * (hi[1] - lo[1])

        lo, hi = at_nodes(n_lo), at_nodes(n_hi)
        return lo[0] + wn * (hi[0] - lo[0]), lo[1] + wn * (hi[1] - lo[1])

    def rate(self, placement: Sequence[int], config: Config, epoch: int) -> float:
        """Progress per second on ``placement`` with ``config`` in ``epoch``."""
        return self.gain(config.batch, epoch) / self.step_seconds(placement, config)

    def configs(self, gpus: int) -> list[Config]:
        """The batch configurations an adaptive job may run with on ``gpus``: measured
        per-GPU batches and up to 3 accumulation passes, the total between the
        application's smallest and largest measured batch (a job's declared range)."""
        out = []
        for atomic in self.local_sizes:
            for accum in range(4):
                batch = int(gpus * atomic * (accum + 1))
                if self.init_batch <= batch <= self.max_batch:
                    out.append(Config(int(atomic), accum, batch))
        return out

    def fallback_config(self, gpus: int) -> Config:
        """The configuration where :meth:`configs` has none: the smallest per-GPU batch."""
        atomic = max(1, min(self.min_local_bsz, self.max_batch // gpus))
        return Config(atomic, 0, gpus * atomic)


def rigid_config(application: App, gpus: int, batch: int) -> Config:
    """The per-GPU batch and accumulation a rigid job of ``batch`` on ``gpus`` GPUs uses:
    the batch split evenly, in as few passes as the per-GPU limit allows. As in the
    artifact, one GPU with a batch above the application's smallest always accumulates at
    least once, and the total stays within the largest measured batch."""
    local = math.ceil(batch / gpus - 1e-8)
    accum = math.ceil(local / application.max_local_bsz - 1e-8) - 1
    if gpus == 1 and batch > application.init_batch:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    atomic = min(atomic, int(application.max_batch / (gpus * (accum + 1))))
    return Config(atomic, accum, gpus * atomic * (accum + 1))


def best_config(application: App, placement: tuple[int, ...], epoch: int) -> Config:
    """The batch configuration with the most progress per second on ``placement`` in
    ``epoch`` by the model's true speeds (Pollux's adaptive batch with an oracle: the
    reference the learned choice, :meth:`~.jobs.WorkJob.config_on`, is measured against)."""
    configs = application.configs(sum(placement))
    if not configs:
        return application.fallback_config(sum(placement))
    return max(configs, key=lambda c: application.rate(placement, c, epoch))


@cache
def app(name: str, directory: Path | None = None) -> App:
    """The application ``name`` (one of :data:`APPLICATIONS`), read once."""
    if name not in APPLICATIONS:
        raise ValueError(f"unknown application {name!r}: one of {', '.join(APPLICATIONS)}")
    return App((directory or data_dir()) / "traces" / name, **APPLICATIONS[name])


def _bracket(levels: Sequence[Level], x: float) -> tuple[Level, Level, float]:
    """(lower, upper, weight of upper) of ``x`` among sorted ``levels``; outside them the
    nearest level, weight 0."""
    i = bisect.bisect_left(levels, x)
    if i < len(levels) and levels[i] == x:
        return levels[i], levels[i], 0.0
    if i == 0:
        return levels[0], levels[0], 0.0
    if i == len(levels):
        return levels[-1], levels[-1], 0.0
    lo, hi = levels[i - 1], levels[i]
    return lo, hi, (x - lo) / (hi - lo)


def _along(points: Points, atomic: float) -> tuple[float, float]:
    """Step and sync time at per-GPU batch ``atomic``, linear between measured batches
    (the nearest one outside them)."""
    sizes = [p[0] for p in points]
    lo, hi, w = _bracket(sizes, atomic)
    a = points[sizes.index(lo)]
    b = points[sizes.index(hi)]
    return a[1] + w * (b[1] - a[1]), a[2] + w * (b[2] - a[2])
