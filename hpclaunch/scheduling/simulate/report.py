"""Experiments over seeds and policies, and their table, JSON and CDF plot.

matplotlib is imported only by :func:`plot_cdfs`; without it, that function raises
:class:`~hpclaunch.errors.ConfigError` with the install hint (the CLI exits 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpclaunch.errors import ConfigError
from hpclaunch.scheduling.simulate.engine import SimConfig, simulate
from hpclaunch.scheduling.simulate.metrics import METRICS, Summary, aggregate, change, run_metrics
from hpclaunch.scheduling.simulate.model import BE, TE, Job
from hpclaunch.scheduling.simulate.policies import make_policy
from hpclaunch.scheduling.simulate.workload import WorkloadParams, copy_jobs, generate, offered_load

__all__ = ["Experiment", "plot_cdfs", "run_experiment"]

#: The paper's numbers (Yabuuchi et al. 2019), against FIFO.
PAPER = {"te_p95_reduction": 96.6, "be_p50_increase": 18.0, "be_p95_increase": 23.9}


@dataclass
class Experiment:
    """Metrics of every policy on every seed, and the slowdowns of the first seed."""

    policies: list[str]
    seeds: list[int]
    workload: dict[str, object]
    config: SimConfig
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    slowdowns: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)

    def table(self) -> str:
        """The results as a Markdown table, with the paper's numbers (:func:`table`)."""
        return table(self)

    def plot(self, path: Path) -> None:
        """The slowdown CDFs as a PNG at ``path`` (:func:`plot_cdfs`; needs matplotlib)."""
        plot_cdfs(self, path)

    def summary(self) -> dict[str, dict[str, Summary]]:
        return {p: aggregate(self.runs[p]) for p in self.policies}

    def versus(self, base: str, policy: str = "ours") -> dict[str, Summary] | None:
        """Paired per-seed changes of ``policy`` against ``base``, in percent."""
        if base not in self.runs or policy not in self.runs:
            return None
        b, o = self.runs[base], self.runs[policy]
        return {
            "te_slowdown_p95": change([r["te_slowdown_p95"] for r in o],
                                      [r["te_slowdown_p95"] for r in b]),
            "be_slowdown_p50": change([r["be_slowdown_p50"] for r in o],
                                      [r["be_slowdown_p50"] for r in b]),
            "be_slowdown_p95": change([r["be_slowdown_p95"] for r in o],
                                      [r["be_slowdown_p95"] for r in b]),
            "lost_gpu_hours": change([r["lost_gpu_hours"] for r in o],
                                     [r["lost_gpu_hours"] for r in b]),
        }  # fmt: skip

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "workload": self.workload,
            "config": vars(self.config) if hasattr(self.config, "__dict__") else {},
            "seeds": self.seeds,
            "policies": {
                p: {
                    "metrics": {k: s.as_dict() for k, s in summ.items()},
                    "events": self.events[p],
                    "wall_seconds": self.wall[p],
                }
                for p, summ in self.summary().items()
            },
            "paper": PAPER,
        }
        comparisons = {}
        for base in ("fifo", "fifo-backfill", "slurm-native"):
            vs = self.versus(base)
            if vs is not None:
                comparisons[f"ours_vs_{base}"] = {k: s.as_dict() for k, s in vs.items()}
        out["comparisons_percent"] = comparisons
        return out


def run_experiment(
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    params: WorkloadParams | None = None,
    trace: Sequence[Job] | None = None,
    config: SimConfig | None = None,
) -> Experiment:
    """Simulate every policy on the workload of every seed (a trace: the same jobs for every
    seed; the seed then only changes the random policy's choices)."""
    config = config or SimConfig()
    params = params or WorkloadParams(gpus=config.nodes * config.gpus_per_node)
    gpus = config.nodes * config.gpus_per_node
    if trace is not None:
        workload: dict[str, object] = {
            "trace_jobs": len(trace),
            "offered_load": offered_load(trace, gpus),
        }
    else:
        workload = dict(vars(params).items())
    exp = Experiment(list(policies), list(seeds), workload, config)
    for seed in seeds:
        jobs = list(trace) if trace is not None else generate(params, seed)
        for name in policies:
            result = simulate(copy_jobs(jobs), make_policy(name, seed), config)
            exp.runs.setdefault(name, []).append(run_metrics(result))
            exp.events[name] = exp.events.get(name, 0) + result.events
            exp.wall[name] = exp.wall.get(name, 0.0) + result.wall_seconds
            if seed == seeds[0]:
                exp.slowdowns[name] = {
                    cls: sorted(j.slowdown() for j in result.jobs if j.cls == cls)
                    for cls in (TE, BE)
                }
    return exp


def _fmt(s: Summary) -> str:
    if math.isnan(s.mean):
        return "-"
    digits = 2 if abs(s.mean) < 100 else 0
    return f"{s.mean:.{digits}f} ± {s.ci95:.{digits}f}"


def table(exp: Experiment) -> str:
    """A Markdown table: one row per policy, mean ± 95 % CI over the seeds."""
    columns = [
        ("te_slowdown_p50", "TE p50"),
        ("te_slowdown_p95", "TE p95"),
        ("te_slowdown_p99", "TE p99"),
        ("be_slowdown_p50", "BE p50"),
        ("be_slowdown_p95", "BE p95"),
        ("be_slowdown_p99", "BE p99"),
        ("te_wait_mean_min", "TE wait min"),
        ("be_wait_mean_min", "BE wait min"),
        ("lost_gpu_hours", "lost GPU-h"),
        ("preemptions", "preemptions"),
        ("utilisation", "util"),
    ]
    assert all(k in METRICS for k, _ in columns)
    summary = exp.summary()
    lines = [
        "| policy | " + " | ".join(h for _, h in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for p in exp.policies:
        lines.append(f"| {p} | " + " | ".join(_fmt(summary[p][k]) for k, _ in columns) + " |")
    for base in ("fifo", "fifo-backfill", "slurm-native"):
        vs = exp.versus(base)
        if vs is None or base == "ours":
            continue
        lines.append("")
        lines.append(
            f"ours vs {base} (paired over seeds, %): "
            f"TE p95 slowdown {_fmt(vs['te_slowdown_p95'])}, "
            f"BE p50 {_fmt(vs['be_slowdown_p50'])}, BE p95 {_fmt(vs['be_slowdown_p95'])}, "
            f"lost GPU-h {_fmt(vs['lost_gpu_hours'])}"
        )
    lines.append("")
    lines.append(
        f"paper (vs FIFO): TE p95 -{PAPER['te_p95_reduction']} %, "
        f"BE p50 +{PAPER['be_p50_increase']} %, BE p95 +{PAPER['be_p95_increase']} %"
    )
    return "\n".join(lines)


def plot_cdfs(exp: Experiment, path: Path) -> None:
    """Slowdown CDFs per policy (first seed), TE and BE panels, log x axis, as a PNG.

    Raises:
        ConfigError: matplotlib is not installed.
    """
    try:
        import matplotlib  # noqa: PLC0415 (optional)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 (optional)
    except ImportError as exc:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed",
            hint="pip install 'hpclaunch[sim]'  (or: pip install matplotlib)",
        ) from exc
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, cls in zip(axes, (TE, BE), strict=True):
        for p in exp.policies:
            values = exp.slowdowns[p][cls]
            n = len(values)
            ax.step(values, [(i + 1) / n for i in range(n)], where="post", label=p)
        ax.set_xscale("log")
        ax.set_xlabel("slowdown (finish - submit) / run time")
        ax.set_title(f"{cls} jobs (seed {exp.seeds[0]})")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("fraction of jobs")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
