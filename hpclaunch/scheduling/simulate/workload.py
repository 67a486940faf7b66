"""Workloads: a seeded synthetic generator, and CSV traces (read and written).

Synthetic workload (:class:`WorkloadParams`, defaults documented in docs/simulator.md):

* ``te_fraction`` of the jobs are TE (trial and error): 1 GPU (70 %) or 2 GPUs (30 %),
  run time lognormal with median ``te_median`` (10 min) and sigma 0.8, cut to
  [1 min, 60 min]; tier ``high``. They are never preempted.
* The rest are BE (best effort): 1/2/4/8 GPUs on one node (30/20/25/15 %), or 16/32 GPUs
  on 2/4 whole nodes (7/3 %); run time lognormal with median ``be_median`` (2 h) and
  sigma 1.0, cut to [10 min, 24 h]; tier ``low`` or ``medium`` (half each); a periodic
  checkpoint every ``ckpt_interval`` (30 min), ``ckpt_write`` (30 s) to write one on
  request, ``restart_cost`` (60 s) per restart.
* Arrivals are a Poisson process (exponential gaps), scaled so that the offered load
  (total GPU-seconds demanded / (GPUs x span from first to last submission)) is ``load``.

Traces: CSV with a header; ``submit`` (seconds), ``gpus`` and ``duration`` (seconds) are
required, as in the public GPU-cluster traces (Philly, Helios, Alibaba PAI: submit time,
GPU count, run time); ``nodes``, ``class``, ``tier``, ``ckpt_interval``, ``ckpt_write`` and
``restart_cost`` are optional (defaults: the fewest nodes that hold the GPUs; TE when at
most 2 GPUs and at most an hour, else BE; the generator's checkpoint parameters).
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch.scheduling.simulate.model import BE, TE, Job

__all__ = [
    "TRACE_COLUMNS",
    "WorkloadParams",
    "copy_jobs",
    "generate",
    "offered_load",
    "read_trace",
    "write_trace",
]

TRACE_COLUMNS = (
    "job_id",
    "submit",
    "gpus",
    "nodes",
    "duration",
    "class",
    "tier",
    "ckpt_interval",
    "ckpt_write",
    "restart_cost",
)

MINUTE = 60.0
HOUR = 3600.0


@dataclass(frozen=True)
class WorkloadParams:
    """The synthetic workload's knobs (see the module docstring)."""

    jobs: int = 5000
    load: float = 1.0
    gpus: int = 256
    gpus_per_node: int = 8
    te_fraction: float = 0.75
    te_median: float = 10 * MINUTE
    be_median: float = 2 * HOUR
    ckpt_interval: float = 30 * MINUTE
    ckpt_write: float = 30.0
    restart_cost: float = 60.0


_TE_GPUS = ((1, 0.7), (2, 0.3))
_BE_SHAPES = ((1, 1, 0.30), (2, 1, 0.20), (4, 1, 0.25), (8, 1, 0.15), (16, 2, 0.07), (32, 4, 0.03))


def _lognormal(rng: random.Random, median: float, sigma: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, rng.lognormvariate(math.log(median), sigma)))


def generate(params: WorkloadParams, seed: int) -> list[Job]:
    """``params.jobs`` jobs from a generator seeded with ``seed`` (same seed, same jobs)."""
    rng = random.Random(seed)
    g = params.gpus_per_node
    # One-node shapes are capped at a node's GPUs; multi-node ones take whole nodes.
    shapes = [(min(gp, g) if n == 1 else n * g, n, w) for gp, n, w in _BE_SHAPES]
    specs: list[tuple[int, int, float, str, str]] = []
    for _ in range(params.jobs):
        if rng.random() < params.te_fraction:
            gpus = 1 if rng.random() < _TE_GPUS[0][1] else 2
            dur = _lognormal(rng, params.te_median, 0.8, MINUTE, 60 * MINUTE)
            specs.append((min(gpus, g), 1, round(dur), TE, "high"))
        else:
            r = rng.random()
            for gpus, nodes, w in shapes:  # noqa: B007 (the chosen shape is used below)
                r -= w
                if r < 0:
                    break
            dur = _lognormal(rng, params.be_median, 1.0, 10 * MINUTE, 24 * HOUR)
            tier = "low" if rng.random() < 0.5 else "medium"
            specs.append((gpus, nodes, round(dur), BE, tier))
    gaps = [rng.expovariate(1.0) for _ in specs]
    demand = sum(gpus * dur for gpus, _, dur, _, _ in specs)
    span = demand / (params.load * params.gpus)
    # Scale the gaps so that the first job arrives at 0 and the last at exactly ``span``.
    scale = span / max(sum(gaps[1:]), 1e-9)
    jobs: list[Job] = []
    t = 0.0
    for i, (gpus, nodes, dur, cls, tier) in enumerate(specs):
        if i:
            t += gaps[i] * scale
        jobs.append(
            Job(
                id=i,
                submit=round(t, 3),
                gpus=gpus,
                nodes=nodes,
                duration=float(dur),
                cls=cls,
                tier=tier,
                ckpt_interval=params.ckpt_interval,
                ckpt_write=params.ckpt_write,
                restart_cost=params.restart_cost,
                sizes=elastic_sizes(gpus, nodes) if cls == BE else (),
            )
        )
    return jobs


def elastic_sizes(gpus: int, nodes: int) -> tuple[int, ...]:
    """The sizes a BE job may run at under an elastic policy: its GPUs, a half and a
    quarter of them, whole GPUs per node (rigid policies ignore them)."""
    share = gpus // nodes
    sizes = {gpus}
    for part in (2, 4):
        g = gpus // part
        if g >= 1 and gpus % part == 0 and (g <= share or g % share == 0):
            sizes.add(g)
    return tuple(sorted(sizes))


def offered_load(jobs: Sequence[Job], gpus: int) -> float:
    """Total GPU-seconds demanded / (GPUs x span from the first to the last submission)."""
    if len(jobs) < 2:
        return 0.0
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs)
    return sum(j.gpus * j.duration for j in jobs) / (gpus * span) if span > 0 else math.inf


def copy_jobs(jobs: Iterable[Job]) -> list[Job]:
    """Fresh, unsimulated copies (a simulation changes its jobs' state)."""
    return [
        Job(
            id=j.id,
            submit=j.submit,
            gpus=j.full_gpus,  # as submitted, whatever size a simulation left it at
            nodes=j.full_nodes,
            duration=j.duration,
            cls=j.cls,
            tier=j.tier,
            ckpt_interval=j.ckpt_interval,
            ckpt_write=j.ckpt_write,
            restart_cost=j.restart_cost,
            limit=j.limit,
            sizes=j.sizes,
        )
        for j in jobs
    ]


def write_trace(jobs: Iterable[Job], path: Path) -> None:
    """Write ``jobs`` as a CSV trace with every column of :data:`TRACE_COLUMNS`."""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(TRACE_COLUMNS)
        for j in jobs:
            out.writerow(
                [
                    j.id,
                    _num(j.submit),
                    j.gpus,
                    j.nodes,
                    _num(j.duration),
                    j.cls,
                    j.tier,
                    "inf" if math.isinf(j.ckpt_interval) else _num(j.ckpt_interval),
                    _num(j.ckpt_write),
                    _num(j.restart_cost),
                ]
            )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def read_trace(
    path: Path, *, gpus_per_node: int = 8, params: WorkloadParams | None = None
) -> list[Job]:
    """Read a CSV trace (see the module docstring); jobs are returned by submission time.

    Raises:
        ValueError: A missing required column or a bad value, with the line number.
    """
    params = params or WorkloadParams()
    jobs: list[Job] = []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"submit", "gpus", "duration"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {', '.join(sorted(missing))}; "
                f"columns: {', '.join(TRACE_COLUMNS)}"
            )
        for n, row in enumerate(reader, start=2):
            try:
                jobs.append(_job_of_row(row, len(jobs), gpus_per_node, params))
            except (ValueError, KeyError) as exc:
                raise ValueError(f"{path}:{n}: {exc}") from exc
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs


def _job_of_row(row: dict[str, str], index: int, gpn: int, params: WorkloadParams) -> Job:
    def opt(name: str) -> str | None:
        value = row.get(name)
        return value.strip() if value is not None and value.strip() else None

    gpus = int(row["gpus"])
    duration = float(row["duration"])
    nodes = int(opt("nodes") or max(1, math.ceil(gpus / gpn)))
    cls = opt("class") or (TE if gpus <= 2 and duration <= HOUR else BE)
    if cls not in (TE, BE):
        raise ValueError(f"class must be {TE} or {BE}, not {cls!r}")
    return Job(
        id=int(opt("job_id") or index),
        submit=float(row["submit"]),
        gpus=gpus,
        nodes=nodes,
        duration=duration,
        cls=cls,
        tier=opt("tier") or ("high" if cls == TE else "low"),
        ckpt_interval=float(opt("ckpt_interval") or params.ckpt_interval),
        ckpt_write=float(opt("ckpt_write") or params.ckpt_write),
        restart_cost=float(opt("restart_cost") or params.restart_cost),
        sizes=elastic_sizes(gpus, nodes) if cls == BE and gpus % nodes == 0 else (),
    )
