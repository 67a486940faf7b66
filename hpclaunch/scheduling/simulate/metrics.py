"""Per-run metrics and their mean with a 95 % confidence interval over seeds.

Percentiles are nearest-rank on sorted values (no interpolation). The confidence interval
of a metric over ``n`` seeds is mean ± t(0.975, n-1) x sd / sqrt(n) (Student's t).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpclaunch.scheduling.simulate.engine import SimResult
from hpclaunch.scheduling.simulate.model import BE, TE

__all__ = ["METRICS", "Summary", "aggregate", "percentile", "run_metrics"]

#: Metric name -> what it is, in the order tables show them.
METRICS = {
    "te_slowdown_p50": "TE slowdown, median",
    "te_slowdown_p95": "TE slowdown, 95th percentile",
    "te_slowdown_p99": "TE slowdown, 99th percentile",
    "be_slowdown_p50": "BE slowdown, median",
    "be_slowdown_p95": "BE slowdown, 95th percentile",
    "be_slowdown_p99": "BE slowdown, 99th percentile",
    "te_wait_mean_min": "TE wait to first start, mean (minutes)",
    "be_wait_mean_min": "BE wait to first start, mean (minutes)",
    "lost_gpu_hours": "GPU-hours held beyond the jobs' uninterrupted run time",
    "preemptions": "preemptions",
    "utilisation": "GPU time held / (GPUs x makespan)",
}

# Student's t quantile (0.975) by degrees of freedom; 30+ uses the normal 1.96.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
         16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 29: 2.045}  # fmt: skip


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (NaN when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def run_metrics(result: SimResult) -> dict[str, float]:
    """Every metric of :data:`METRICS` for one simulation."""
    out: dict[str, float] = {}
    for cls in (TE, BE):
        jobs = [j for j in result.jobs if j.cls == cls]
        slow = sorted(j.slowdown() for j in jobs)
        for q in (50, 95, 99):
            out[f"{cls.lower()}_slowdown_p{q}"] = percentile(slow, q)
        waits = [j.wait() for j in jobs]
        out[f"{cls.lower()}_wait_mean_min"] = statistics.fmean(waits) / 60 if waits else math.nan
    out["lost_gpu_hours"] = result.lost_gpu_seconds / 3600
    out["preemptions"] = float(result.preemptions)
    first = min(j.submit for j in result.jobs)
    last = max(j.finish for j in result.jobs)
    busy = sum(j.busy_gpu_seconds for j in result.jobs)
    out["utilisation"] = busy / (result.gpus * (last - first)) if last > first else math.nan
    return out


@dataclass(frozen=True)
class Summary:
    """A metric over seeds: mean, 95 % CI half-width, and every value."""

    mean: float
    ci95: float
    values: tuple[float, ...]

    def as_dict(self) -> dict[str, object]:
        return {"mean": self.mean, "ci95": self.ci95, "values": list(self.values)}


def _t975(df: int) -> float:
    if df >= 30:
        return 1.96
    return _T975.get(df) or _T975[max(k for k in _T975 if k <= df)]


def summarize(values: Sequence[float]) -> Summary:
    """Mean and 95 % CI half-width of ``values`` (0 for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Summary(mean, 0.0, tuple(values))
    half = _t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Summary(mean, half, tuple(values))


def aggregate(runs: Sequence[Mapping[str, float]]) -> dict[str, Summary]:
    """Per metric, the summary over the runs (one per seed)."""
    return {name: summarize([r[name] for r in runs]) for name in METRICS}


def change(ours: Sequence[float], base: Sequence[float]) -> Summary:
    """Relative change (ours - base) / base per seed (paired), as a summary in percent
    (NaN when a base value is 0)."""
    if any(b == 0 for b in base):
        return Summary(math.nan, math.nan, ())
    return summarize([100 * (o - b) / b for o, b in zip(ours, base, strict=True)])
