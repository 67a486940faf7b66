"""The geometry of the reports' pictures (inline SVG, drawn by ``templates/*.html.j2``): a
job's timeline and one chart per GPU metric over time; a sweep's metric against a parameter.

Times are unix seconds: the ledger's and the samples' as they are, sacct's (the cluster's
local time, no zone) read as this machine's local time, as ``hpclaunch events`` shows them.
A series keeps at most :data:`MAX_POINTS` points (each the mean of its stretch of samples),
so a page of a long job stays small.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from hpclaunch.report.attempts import AttemptSummary
from hpclaunch.report.gpus import GAP_INTERVALS, usual_interval
from hpclaunch.slurm.times import slurm_epoch

__all__ = [
    "MAX_POINTS",
    "Chart",
    "Dot",
    "Scatter",
    "Span",
    "Tick",
    "Timeline",
    "metric_chart",
    "scatter",
    "timeline",
]

#: Points kept per series.
MAX_POINTS = 400
#: The drawing area of every picture, in SVG user units.
WIDTH, HEIGHT = 720, 140


@dataclass(frozen=True)
class Series:
    """One GPU's line: its label and SVG ``points`` (``"x,y x,y ..."``), one string per
    stretch without a gap (a requeue's wait breaks the line)."""

    label: str
    segments: tuple[str, ...]


@dataclass(frozen=True)
class Chart:
    """A metric of every GPU over the job's time."""

    title: str
    unit: str
    top: float
    series: tuple[Series, ...]
    width: int = WIDTH
    height: int = HEIGHT


@dataclass(frozen=True)
class Span:
    """A stretch of the timeline: ``pending`` (queued) or ``running``, of one attempt."""

    x: float
    width: float
    kind: str
    attempt: int
    label: str


@dataclass(frozen=True)
class Tick:
    """A moment on the timeline: a checkpoint committed, or how an attempt ended."""

    x: float
    kind: str
    label: str


@dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...]
    ticks: tuple[Tick, ...]
    start: float
    end: float
    width: int = WIDTH
    height: int = 60


def _x(t: float, start: float, end: float, width: float) -> float:
    return round((t - start) / (end - start) * width, 1) if end > start else 0.0


def timeline(
    attempts: Sequence[AttemptSummary],
    checkpoints: Iterable[tuple[float, int | None]],
    now: float,
) -> Timeline | None:
    """The job's life: each attempt's wait (its ``queued_s`` before its start) and run, its
    end, and each checkpoint commit. ``None`` when no attempt has started."""
    moments: list[tuple[AttemptSummary, float, float | None]] = []
    for attempt in attempts:
        start = slurm_epoch(attempt.start)
        if start is not None:
            moments.append((attempt, start, slurm_epoch(attempt.end)))
    if not moments:
        return None
    first = min(start - (a.queued_s or 0) for a, start, _ in moments)
    last = max(end if end is not None else max(now, start) for _, start, end in moments)
    spans: list[Span] = []
    ticks: list[Tick] = []
    for attempt, start, end in moments:
        if attempt.queued_s:
            spans.append(
                _span(start - attempt.queued_s, start, "pending", attempt.index, first, last)
            )
        running = _span(
            start, end if end is not None else last, "running", attempt.index, first, last
        )
        if attempt.size:  # an elastic job's attempts run at different sizes
            running = replace(running, label=f"{running.label} on {attempt.size}")
        spans.append(running)
        if end is not None:
            ended = attempt.ended or attempt.state.lower()
            ticks.append(
                Tick(_x(end, first, last, WIDTH), "end", f"attempt {attempt.index}: {ended}")
            )
    for when, step in checkpoints:
        if first <= when <= last:
            label = "checkpoint" + (f" step {step}" if step is not None else "")
            ticks.append(Tick(_x(when, first, last, WIDTH), "checkpoint", label))
    return Timeline(tuple(spans), tuple(ticks), first, last)


def _span(a: float, b: float, kind: str, index: int, first: float, last: float) -> Span:
    x0, x1 = _x(a, first, last, WIDTH), _x(b, first, last, WIDTH)
    return Span(x0, max(x1 - x0, 0.5), kind, index, f"attempt {index} {kind} {b - a:.0f} s")


def metric_chart(
    samples: Iterable[Mapping[str, Any]],
    key: str,
    title: str,
    unit: str,
    start: float,
    end: float,
    top: float | None = None,
) -> Chart | None:
    """``key`` (``util``, ``mem_used``, ``power_w``) of each GPU from ``start`` to ``end``;
    the y axis from 0 to ``top`` (default: the largest value). ``None``: no GPU has it."""
    by_gpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
    labels: dict[tuple[str, str], str] = {}
    for s in samples:
        value, ts = s.get(key), s.get("ts")
        if isinstance(value, (int, float)) and isinstance(ts, (int, float)):
            gpu = (str(s.get("node")), str(s.get("gpu")))
            labels[gpu] = f"{s.get('node')} {s.get('pci') or s.get('gpu')}"
            by_gpu.setdefault(gpu, []).append((float(ts), float(value)))
    if not by_gpu:
        return None
    peak = top or max(v for points in by_gpu.values() for _, v in points) or 1.0
    series = tuple(
        Series(labels[gpu], tuple(_points(part, start, end, peak) for part in _stretches(points)))
        for gpu, points in sorted(by_gpu.items(), key=lambda item: labels[item[0]])
    )
    return Chart(title, unit, peak, series)


def _stretches(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """``points`` in time order, cut where two samples are more than :data:`GAP_INTERVALS`
    usual intervals apart (no sample there: the job held no GPU), as energy is counted."""
    points = sorted(points)
    usual = usual_interval([t for t, _ in points])
    parts = [[points[0]]]
    for before, point in pairwise(points):
        if usual and point[0] - before[0] > GAP_INTERVALS * usual:
            parts.append([])
        parts[-1].append(point)
    return parts


def _points(points: list[tuple[float, float]], start: float, end: float, top: float) -> str:
    if len(points) > MAX_POINTS:  # the mean of each stretch
        size = len(points) / MAX_POINTS
        stretches = [points[int(i * size) : int((i + 1) * size)] for i in range(MAX_POINTS)]
        points = [
            (statistics.fmean(t for t, _ in part), statistics.fmean(v for _, v in part))
            for part in stretches
            if part
        ]
    return " ".join(
        f"{_x(t, start, end, WIDTH)},{round(HEIGHT - min(v, top) / top * HEIGHT, 1)}"
        for t, v in points
    )


@dataclass(frozen=True)
class Dot:
    """One task on a scatter: where, and what its tooltip says."""

    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Scatter:
    """A metric (y) against one parameter (x) over a sweep's tasks; ``ticks``: the x axis'
    labels and where they are (the categories, or the lowest and highest number)."""

    parameter: str
    metric: str
    dots: tuple[Dot, ...]
    ticks: tuple[tuple[float, str], ...]
    low: float
    high: float
    log_x: bool = False
    width: int = WIDTH
    height: int = HEIGHT


def scatter(rows: Sequence[tuple[Any, float, str]], parameter: str, metric: str) -> Scatter | None:
    """``metric`` of each task against its value of ``parameter``: ``rows`` of (parameter
    value, metric value, label). Numbers go on a linear axis, or a log one when positive and
    spanning more than 100x (learning rates); anything else is a category, in the order
    first seen. ``None`` without a row."""
    if not rows:
        return None
    ys = [y for _, y, _ in rows]
    low, high = min(ys), max(ys)
    spread = (high - low) or 1.0

    def y_of(value: float) -> float:
        return round(HEIGHT - 10 - (value - low) / spread * (HEIGHT - 20), 1)

    xs = [x for x, _, _ in rows]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    if numeric:
        values = [float(x) for x in xs]
        log_x = min(values) > 0 and max(values) / min(values) > 100
        scaled = [math.log10(v) for v in values] if log_x else values
        left, right = min(scaled), max(scaled)
        width = (right - left) or 1.0

        def x_of(value: float) -> float:
            return round(20 + (value - left) / width * (WIDTH - 40), 1)

        dots = tuple(
            Dot(x_of(s), y_of(y), label) for s, (_, y, label) in zip(scaled, rows, strict=True)
        )
        ticks = ((x_of(left), f"{min(values):g}"), (x_of(right), f"{max(values):g}"))
        return Scatter(parameter, metric, dots, ticks, low, high, log_x)
    categories = list(
        dict.fromkeys(json.dumps(x, sort_keys=True) if not isinstance(x, str) else x for x in xs)
    )
    step = (WIDTH - 40) / max(len(categories) - 1, 1)
    place = {c: round(20 + i * step, 1) for i, c in enumerate(categories)}
    dots = tuple(
        Dot(place[x if isinstance(x, str) else json.dumps(x, sort_keys=True)], y_of(y), label)
        for x, y, label in rows
    )
    return Scatter(parameter, metric, dots, tuple((v, k) for k, v in place.items()), low, high)
