"""What a job's GPU samples say (``metrics.jsonl``, written by
:mod:`hpclaunch.supervise.gpumon`): per GPU, utilisation and memory (mean, p10, p90), mean
power, and the energy used.

Energy is the power integrated over time: each sample stands for the time until the same
GPU's next sample, at most twice the usual interval (so the gap of a requeue, when the job
held no GPU, counts nothing); the last sample of a stretch stands for one usual interval.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

__all__ = ["GAP_INTERVALS", "GpuStats", "gpu_stats", "percentile", "usual_interval"]

#: Two samples of a GPU further apart than this many usual intervals had none between
#: them (a requeue's wait): energy counts nothing there, and the charts break their line.
GAP_INTERVALS = 2
#: Joules in a kWh.
_JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class GpuStats:
    """One GPU of the job (a node's GPU, across the job's attempts).

    Attributes:
        node, gpu, pci: Where (the GPU's UUID and PCI bus id, as sampled).
        samples: How many samples.
        util_mean, util_p10, util_p90: Utilisation in percent (``None``: never reported).
        mem_mean_mib, mem_max_mib, mem_total_mib: Memory used (MiB) and the GPU's size.
        power_mean_w: Mean power draw in watts.
        energy_kwh: The energy the samples account for.
        seconds: The time the samples account for.
    """

    node: str
    gpu: str
    pci: str | None
    samples: int
    util_mean: float | None
    util_p10: float | None
    util_p90: float | None
    mem_mean_mib: float | None
    mem_max_mib: float | None
    mem_total_mib: float | None
    power_mean_w: float | None
    energy_kwh: float | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile (0 to 1) of ``values``, interpolated between the two
    nearest ranks (numpy's default).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def gpu_stats(records: Iterable[Mapping[str, Any]]) -> list[GpuStats]:
    """Each GPU's figures from the samples ``records`` (:func:`read_metrics`'s), sorted by
    node then PCI bus id."""
    by_gpu: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        if isinstance(record.get("ts"), (int, float)):
            by_gpu.setdefault((str(record.get("node")), str(record.get("gpu"))), []).append(record)
    found = [
        _one(node, gpu, sorted(rows, key=lambda r: r["ts"])) for (node, gpu), rows in by_gpu.items()
    ]
    return sorted(found, key=lambda s: (s.node, s.pci or "", s.gpu))


def usual_interval(times: Sequence[float]) -> float:
    """The median time between a GPU's consecutive samples (``times`` in order; 0 with
    fewer than two distinct times)."""
    gaps = [b - a for a, b in pairwise(times) if b > a]
    return statistics.median(gaps) if gaps else 0.0


def _one(node: str, gpu: str, rows: list[Mapping[str, Any]]) -> GpuStats:
    times = [float(r["ts"]) for r in rows]
    usual = usual_interval(times)
    # What each sample stands for: up to the next one, never more than GAP_INTERVALS.
    spans = [min(b - a, GAP_INTERVALS * usual) for a, b in pairwise(times)] + [usual]
    util = _numbers(rows, "util")
    memory = _numbers(rows, "mem_used")
    power = [
        (float(r["power_w"]), span)
        for r, span in zip(rows, spans, strict=True)
        if _is_number(r.get("power_w"))
    ]
    totals = _numbers(rows, "mem_total")
    return GpuStats(
        node=node,
        gpu=gpu,
        pci=next((str(r["pci"]) for r in rows if r.get("pci")), None),
        samples=len(rows),
        util_mean=statistics.fmean(util) if util else None,
        util_p10=percentile(util, 0.1) if util else None,
        util_p90=percentile(util, 0.9) if util else None,
        mem_mean_mib=statistics.fmean(memory) if memory else None,
        mem_max_mib=max(memory) if memory else None,
        mem_total_mib=max(totals) if totals else None,
        power_mean_w=statistics.fmean(p for p, _ in power) if power else None,
        energy_kwh=sum(p * span for p, span in power) / _JOULES_PER_KWH if power else None,
        seconds=sum(spans),
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers(rows: Iterable[Mapping[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in rows if _is_number(r.get(key))]
