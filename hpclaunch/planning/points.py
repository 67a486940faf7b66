"""A sweep's points, how they are split into arrays, and the params file.

Pure functions: the same :class:`~hpclaunch.jobspec.job.Sweep` always expands to the same points
(``random`` uses :class:`random.Random` seeded with the spec's ``seed``), so a sweep can be
shown before it is submitted and compared in tests.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpclaunch.jobspec.sweep import Sweep, SweepRange, SweepValue
from hpclaunch.supervise.sweep_task import format_value, placeholders, substitute

__all__ = [
    "ArrayChunk",
    "expand",
    "format_value",
    "params_lines",
    "placeholders",
    "split_arrays",
    "substitute",
]


def expand(sweep: Sweep) -> list[dict[str, SweepValue]]:
    """The sweep's points, in a fixed order.

    grid: every combination, the first parameter varying slowest (like nested loops in
    spec order); random: ``count`` draws, each parameter in spec order; list: as written.
    An adaptive sweep (``metric:``) has ``trials`` empty points: each task asks the study
    for its parameters when it starts (:mod:`hpclaunch.study`).
    """
    if sweep.is_study:
        return [{} for _ in range(sweep.trial_count)]
    if sweep.method == "list":
        return [dict(point) for point in sweep.points]
    if sweep.method == "grid":
        names = list(sweep.parameters)
        lists = [sweep.parameters[n] for n in names]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]  # type: ignore[arg-type]
    rng = random.Random(sweep.seed)
    assert sweep.count is not None  # the spec's validator makes sure
    return [
        {name: _draw(rng, dist) for name, dist in sweep.parameters.items()}
        for _ in range(sweep.count)
    ]


def _draw(rng: random.Random, dist: tuple[SweepValue, ...] | SweepRange) -> SweepValue:
    if not isinstance(dist, SweepRange):
        return dist[rng.randrange(len(dist))]
    if dist.log:
        value = math.exp(rng.uniform(math.log(dist.min), math.log(dist.max)))
    else:
        value = rng.uniform(dist.min, dist.max)
    if dist.integer:
        # Clamp: rounding may step just outside [min, max] (e.g. min 1.5 rounds to 2 only).
        low, high = math.ceil(dist.min), math.floor(dist.max)
        return min(max(round(value), low), high)
    return value


@dataclass(frozen=True)
class ArrayChunk:
    """One Slurm array of a sweep: points ``offset`` .. ``offset + count - 1``.

    Attributes:
        offset: The first point of this array (the batch script's first argument).
        count: How many tasks (indices ``0`` .. ``count - 1``).
        limit: The ``%N`` of this array, or ``None``.
    """

    offset: int
    count: int
    limit: int | None = None

    @property
    def array_spec(self) -> str:
        """The ``--array`` value, e.g. ``0-99%4``."""
        indices = "0" if self.count == 1 else f"0-{self.count - 1}"
        return indices + (f"%{self.limit}" if self.limit else "")


def split_arrays(
    points: int, max_array_size: int, max_concurrent: int | None = None
) -> list[ArrayChunk]:
    """Split ``points`` tasks into arrays whose indices stay below ``max_array_size``.

    Slurm refuses an array index >= MaxArraySize (slurm.conf(5); it bounds the index, not the
    count), so every array uses indices ``0`` .. ``max_array_size - 1`` and carries its offset.
    ``max_concurrent`` becomes each array's ``%N``; with several arrays the caller chains them
    (each starts after the one before ended) so that the cap holds over the whole sweep.

    Raises:
        ValueError: ``points`` < 1, or ``max_array_size`` < 1 (arrays are disabled).
    """
    if points < 1:
        raise ValueError("a sweep needs at least one point")
    if max_array_size < 1:
        raise ValueError(f"MaxArraySize is {max_array_size}: job arrays are disabled")
    limit = None if max_concurrent is None else min(max_concurrent, max_array_size)
    return [
        ArrayChunk(offset, min(max_array_size, points - offset), limit)
        for offset in range(0, points, max_array_size)
    ]


def params_lines(points: Sequence[Mapping[str, SweepValue]]) -> str:
    """The params file's text: line i is ``{"index": i, "params": {...}}``.

    JSON escapes newlines inside strings, so a value with a newline stays on its line.
    """
    # One encoder for all lines: json.dumps(..., ensure_ascii=False) builds a new
    # JSONEncoder per call, a third of the time for 1,000 points. Same text as json.dumps.
    encode = json.JSONEncoder(ensure_ascii=False).encode
    return "".join(
        encode({"index": i, "params": dict(point)}) + "\n" for i, point in enumerate(points)
    )
