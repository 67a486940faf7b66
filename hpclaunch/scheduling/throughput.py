"""A job's speed at sizes it has not run at, learned from what it measured where it ran,
and the statistical efficiency of a batch from its measured gradient statistics.

The policies that size elastic jobs (:mod:`hpclaunch.scheduling.las`, the simulator's) see
only this: no true speed, no true remaining work. The model is Pollux's (OSDI'21, section
3.2) in its simplest form, a compute part and a communication part, both linear:

* a forward/backward pass of ``m`` samples per GPU takes ``alpha + beta * m`` seconds;
* an optimizer step on ``g`` GPUs on ``n`` nodes adds a gradient sync of ``sync_local +
  sync_node * (n - 1)`` seconds when ``g > 1`` (none on one GPU); accumulation passes
  skip it, so a step with ``accum`` extra passes takes ``(accum + 1) * (alpha + beta * m)
  + sync`` seconds.

Pollux overlaps compute and sync with a fitted exponent and has per-node and per-GPU
sync slopes; with the few sizes a job runs at on a Slurm cluster, four parameters are
what its measurements can pin down. They are fitted by least squares over the mean step
time of each shape the job ran (every measurement counts), with a ridge pulling the
parameters a job's measurements do not determine towards the prior: **no fixed overhead
and no sync** (perfect scaling), as Pollux assumes before a job has run on several GPUs
or nodes. The prior is optimistic on purpose: a policy grows a job it knows nothing
about, measures it at the larger size, and learns its real scaling from there. Negative
parameters are dropped (fixed at 0) and the rest fitted again.

The statistical efficiency of a batch is Pollux's (McCandlish et al.'s gradient noise
scale): a step at total batch ``B`` makes ``(var + sqr) / (var / s + sqr)`` of the
progress of ``s = B / base`` steps at the base batch, ``sqr`` and ``var`` the gradient's
squared norm and variance the job measured (at its current batch, this epoch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "TRUST_REGION",
    "Params",
    "Shape",
    "Throughput",
    "best_shape",
    "efficiency",
    "goodput",
    "trusted",
]

#: An adaptive batch keeps its per-GPU batch within this factor of those the job measured
#: (the pass-time model is linear in the per-GPU batch: far outside what a job measured, its
#: errors chose batches at a third of the best speed, ncf's in the Pollux workloads;
#: bench/RESULTS.md, 2026-12-07).
TRUST_REGION = 1.5

#: The ridge's weight, relative to one measured shape: small, so that any shape measured
#: outweighs the prior in the directions it determines.
RIDGE = 1e-3


@dataclass(frozen=True)
class Shape:
    """How a job runs: ``gpus`` on ``nodes``, ``per_gpu`` samples per GPU per pass and
    ``accum`` extra passes accumulated before each optimizer step."""

    gpus: int
    nodes: int
    per_gpu: float
    accum: int = 0

    @property
    def samples(self) -> float:
        """Samples per optimizer step (the total batch)."""
        return self.gpus * self.per_gpu * (self.accum + 1)

    def features(self) -> tuple[float, float, float, float]:
        """The step time's coefficients of (alpha, beta, sync_local, sync_node)."""
        passes = self.accum + 1.0
        synced = 1.0 if self.gpus > 1 else 0.0
        return passes, passes * self.per_gpu, synced, synced * (self.nodes - 1)


@dataclass(frozen=True)
class Params:
    """The fitted model (seconds; see the module docstring)."""

    alpha: float
    beta: float
    sync_local: float
    sync_node: float

    def step_seconds(self, shape: Shape) -> float:
        values = (self.alpha, self.beta, self.sync_local, self.sync_node)
        return sum(v * f for v, f in zip(values, shape.features(), strict=True))

    def samples_per_second(self, shape: Shape) -> float:
        return shape.samples / self.step_seconds(shape)


class Throughput:
    """One job's measurements and the model fitted to them (refitted when asked after a
    new measurement)."""

    def __init__(self) -> None:
        self._sums: dict[Shape, tuple[int, float]] = {}  # shape -> (count, sum of seconds)
        self._fitted: Params | None = None
        self._stale = False
        self.version = 0  # measurements so far: what a prediction was made from

    def measure(self, shape: Shape, step_seconds: float) -> None:
        """Record one measured step time (or a mean of several) at ``shape``."""
        if step_seconds <= 0 or not math.isfinite(step_seconds):
            return
        count, total = self._sums.get(shape, (0, 0.0))
        self._sums[shape] = (count + 1, total + step_seconds)
        self._stale = True
        self.version += 1

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The shapes measured so far."""
        return tuple(self._sums)

    def params(self) -> Params | None:
        """The fitted model; ``None`` before the first measurement."""
        if self._stale or (self._fitted is None and self._sums):
            self._fitted = fit(
                [(shape, total / count, count) for shape, (count, total) in self._sums.items()]
            )
            self._stale = False
        return self._fitted

    def samples_per_second(self, shape: Shape) -> float | None:
        """The predicted speed at ``shape``; ``None`` before the first measurement."""
        params = self.params()
        return None if params is None else params.samples_per_second(shape)


def fit(points: list[tuple[Shape, float, int]]) -> Params:
    """Least squares over ``points`` (shape, mean step seconds, measurements), each shape
    weighted by its measurements' count (at most 10: a shape run long does not silence
    the others), plus the ridge towards the prior (see the module docstring). A parameter
    that comes out below its bound is fixed there and the rest fitted again: 0 for all but
    ``beta``, whose bound is a tenth of its prior (a pass costs compute: two noisy shapes
    alone must not explain every second by the sync)."""
    scale = sum(seconds for _, seconds, _ in points) / len(points)
    per_sample = min(seconds / (shape.samples / shape.gpus) for shape, seconds, _ in points)
    # Each parameter's scale, so that the ridge weighs them alike; beta's prior is the
    # data's (all time is per-sample compute), the others' 0. (A prior with sync, 10-50 %
    # of a step, did worse on the Pollux workloads: bench/RESULTS.md, 2026-12-07.)
    scales = (scale, per_sample, scale, scale)
    prior = (0.0, per_sample, 0.0, 0.0)
    bounds = (0.0, per_sample / 10, 0.0, 0.0)
    fixed: dict[int, float] = {}
    while True:
        theta = _solve(points, scales, prior, fixed)
        low = [i for i, v in enumerate(theta) if i not in fixed and v < bounds[i]]
        if not low:
            return Params(*theta)
        for i in low:
            fixed[i] = bounds[i]


def _solve(
    points: list[tuple[Shape, float, int]],
    scales: tuple[float, ...],
    prior: tuple[float, ...],
    fixed: dict[int, float],
) -> list[float]:
    """Ridge least squares in the scaled parameters ``u = theta / scales``, the ``fixed``
    ones held at their values."""
    index = [i for i in range(4) if i not in fixed]
    k = len(index)
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for shape, seconds, count in points:
        weight = min(count, 10) / (seconds * seconds)  # relative errors
        features = shape.features()
        rest = seconds - sum(features[i] * v for i, v in fixed.items())
        row = [features[i] * scales[i] for i in index]
        for r in range(k):
            b[r] += weight * row[r] * rest
            for c in range(k):
                a[r][c] += weight * row[r] * row[c]
    for r, i in enumerate(index):
        a[r][r] += RIDGE
        b[r] += RIDGE * prior[i] / scales[i]
    u = _gauss(a, b) if k else []
    theta = [fixed.get(i, 0.0) for i in range(4)]
    for r, i in enumerate(index):
        theta[i] = u[r] * scales[i]
    return theta


def _gauss(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve ``a x = b`` (small, symmetric positive definite: no pivoting needed beyond
    the ridge, but partial pivoting costs nothing)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in reversed(range(n)):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def efficiency(batch: float, base: float, grad_sqr: float, grad_var: float) -> float:
    """Progress of one step at total ``batch``, in steps at the ``base`` batch, from the
    gradient's measured squared norm and variance (see the module docstring)."""
    scale = batch / base
    return (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)


def goodput(
    params: Params, shape: Shape, base_batch: float, gradient: tuple[float, float]
) -> float:
    """Predicted progress per second at ``shape``, in optimizer steps at the ``base_batch``:
    the statistical efficiency of its batch (``gradient``: squared norm and variance at the
    base batch) over its predicted step time."""
    return efficiency(shape.samples, base_batch, *gradient) / params.step_seconds(shape)


def trusted(options: list[Shape], measured: tuple[Shape, ...]) -> list[Shape]:
    """The ``options`` whose per-GPU batch lies within :data:`TRUST_REGION` of those
    ``measured`` (all of them when none does, or nothing was measured)."""
    if not measured:
        return options
    seen = [s.per_gpu for s in measured]
    low, high = min(seen) / TRUST_REGION, max(seen) * TRUST_REGION
    return [s for s in options if low <= s.per_gpu <= high] or options


def best_shape(
    params: Params,
    options: list[Shape],
    base_batch: float,
    gradient: tuple[float, float],
    measured: tuple[Shape, ...] = (),
) -> Shape:
    """Pollux's batch choice: of the ``options`` (per-GPU batch and accumulation on one
    size) trusted by what was ``measured``, the one with the most :func:`goodput` (the
    first of equals)."""
    return max(trusted(options, measured), key=lambda s: goodput(params, s, base_batch, gradient))
