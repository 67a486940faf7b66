"""The Pollux artifact's published workloads, run under our policies and set beside the
artifact's own results: the runs, the fidelity gate, and one metric for every ratio.

* **Runs** (:data:`RUNS`): a policy, and whether the jobs are rigid or elastic (``fixed``
  keeps each job's batch; ``adaptive`` picks the batch with the most progress per second
  its measurements predict). ``-oracle`` runs read the model's true speeds: references
  for what learning costs, not policies.
* **The fidelity gate**: our Tiresias against the artifact's Tiresias + tuned jobs, the
  mean average JCT over the 8 workloads within +-10 % and each workload within +-20 %.
* **Ratios**: a run against our Tiresias is the mean over the 8 workloads of the run's
  average JCT over Tiresias' on the same workload (paired), with its 95 % interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from statistics import fmean

from hpclaunch.scheduling.simulate.measured.apps import data_dir
from hpclaunch.scheduling.simulate.measured.engine import Policy, RoundsConfig, simulate_rounds
from hpclaunch.scheduling.simulate.measured.jobs import Elastic, read_workload, workload_path
from hpclaunch.scheduling.simulate.measured.policies import POLICIES
from hpclaunch.scheduling.simulate.metrics import Summary, summarize

__all__ = [
    "LOADS",
    "RUNS",
    "WORKLOADS",
    "Gate",
    "LoadResult",
    "average_jcts",
    "gate",
    "ratio",
    "reference",
    "run_load",
]

WORKLOADS = tuple(range(1, 9))
LOADS = (0.5, 1.0, 1.5, 2.0)
#: The runs: name -> (policy, how its jobs may change size (``None``: rigid), oracle).
RUNS: dict[str, tuple[str, Elastic | None, bool]] = {
    "fifo": ("fifo", None, False),
    "fifo-backfill": ("fifo-backfill", None, False),
    "tiresias": ("tiresias", None, False),
    "elastic-fixed": ("elastic", Elastic(batch="fixed"), False),
    # re-planned every minute within a run, as runtime.replan_batch does when called so;
    # and only at restarts (a trainer that never calls it)
    "elastic-adaptive": ("elastic", Elastic(batch="adaptive"), False),
    "elastic-adaptive-restart": ("elastic", Elastic(batch="adaptive", replan=None), False),
    # fifo-backfill (today's `ours` on one tier) with shrink before wait, grow into idle
    "ours-elastic-fixed": ("fifo-elastic", Elastic(batch="fixed"), False),
    "ours-elastic-adaptive": ("fifo-elastic", Elastic(batch="adaptive"), False),
    "ones": ("ones", Elastic(batch="adaptive"), False),
    "elastic-fixed-oracle": ("elastic", Elastic(batch="fixed"), True),
    "elastic-adaptive-oracle": ("elastic", Elastic(batch="adaptive"), True),
    # the artifact's Optimus + Oracle, to check the elastic path against its results
    "optimus-oracle": ("optimus", Elastic(batch="fixed", min_interval=0.0), True),
}
#: Our run -> the artifact's result it reproduces: the gate (Tiresias), and the check of
#: the elastic path (Optimus with its oracle: sizes that change every round).
GATED = {"tiresias": "tiresias", "optimus-oracle": "optimus"}


@cache
def reference() -> dict[str, dict[str, dict[str, object]]]:
    """The artifact's results: policy -> load (``"1.0"``) -> ``mean`` and ``workloads``."""
    data: dict[str, dict[str, dict[str, object]]] = json.loads(
        (data_dir() / "reference.json").read_text()
    )
    return data


def published(policy: str, load: float) -> list[float]:
    """The artifact's average JCT of each workload under ``policy`` at ``load``."""
    row = reference()[policy][f"{load:.1f}"]["workloads"]
    assert isinstance(row, dict)
    return [float(row[f"workload-{w}"]) for w in WORKLOADS]


def average_jcts(
    run: str,
    load: float,
    *,
    policy: Callable[[], Policy] | None = None,
    config: RoundsConfig | None = None,
) -> list[float]:
    """The average JCT of each workload under ``run`` at ``load`` (``policy``: makes the
    run's policy, fresh for each workload, e.g. with other parameters)."""
    name, elastic, oracle = RUNS[run]
    out = []
    for number in WORKLOADS:
        jobs = read_workload(workload_path(number, load), elastic, oracle=oracle)
        done = simulate_rounds(jobs, (policy or POLICIES[name])(), config)
        out.append(fmean(j.jct() for j in done))
    return out


@dataclass(frozen=True)
class Gate:
    """Our run against the artifact's (relative errors): met within +-10 % on the mean
    and +-20 % on each workload."""

    mean: float
    per_workload: tuple[float, ...]
    theirs: float
    name: str = "Tiresias"

    @property
    def met(self) -> bool:
        return abs(self.mean) <= 0.10 and all(abs(p) <= 0.20 for p in self.per_workload)

    def line(self) -> str:
        worst = max(self.per_workload, key=abs)
        verdict = "MET" if self.met else "NOT MET"
        what = "fidelity gate" if self.name == "Tiresias" else "elastic path check"
        return (
            f"{what}: our {self.name} {100 * self.mean:+.1f} % against the artifact's "
            f"{self.theirs:,.0f} s (mean), worst workload {100 * worst:+.1f} %: {verdict} "
            "(+-10 % mean, +-20 % each)"
        )


def gate(ours: Sequence[float], load: float, policy: str = "tiresias") -> Gate:
    """The gate of ``ours`` (one average JCT per workload) against the artifact's
    ``policy`` at ``load``."""
    theirs = published(policy, load)
    per = tuple(o / t - 1 for o, t in zip(ours, theirs, strict=True))
    name = {"tiresias": "Tiresias", "optimus": "Optimus + Oracle"}.get(policy, policy)
    return Gate(fmean(ours) / fmean(theirs) - 1, per, fmean(theirs), name)


def ratio(ours: Sequence[float], base: Sequence[float]) -> Summary:
    """``ours`` over ``base``, workload by workload: their mean and 95 % interval."""
    return summarize([o / b for o, b in zip(ours, base, strict=True)])


@dataclass
class LoadResult:
    """Every run at one load: the average JCT of each workload, the gate, the ratios."""

    load: float
    runs: dict[str, list[float]] = field(default_factory=dict)

    @property
    def gate(self) -> Gate | None:
        ours = self.runs.get("tiresias")
        return None if ours is None else gate(ours, self.load)

    def ratio(self, run: str) -> Summary | None:
        """``run`` over our Tiresias (``None``: either was not run)."""
        base = self.runs.get("tiresias")
        if base is None or run == "tiresias" or run not in self.runs:
            return None
        return ratio(self.runs[run], base)

    def table(self) -> str:
        lines = [f"load {self.load:.1f}: average JCT (s), workloads 1-8, mean +- 95 % CI"]
        for policy in ("pollux", "tiresias", "optimus"):
            lines.append(f"  {'artifact ' + policy:26} {_row(published(policy, self.load))}")
        for run, values in self.runs.items():
            line = f"  {run:26} {_row(values)}"
            r = self.ratio(run)
            if r is not None:
                line += f"  x{r.mean:.3f} +- {r.ci95:.3f} of our tiresias"
            lines.append(line)
        lines += ["  " + check.line() for check in self.checks()]
        return "\n".join(lines)

    def checks(self) -> list[Gate]:
        """Each run of :data:`GATED` present, against the artifact's (the gate first)."""
        return [
            gate(self.runs[r], self.load, theirs) for r, theirs in GATED.items() if r in self.runs
        ]

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"load": self.load}
        for run, values in self.runs.items():
            s = summarize(values)
            row: dict[str, object] = {"workloads": values, "mean": s.mean, "ci95": s.ci95}
            r = self.ratio(run)
            if r is not None:
                row["ratio_to_tiresias"] = {"mean": r.mean, "ci95": r.ci95}
            out[run] = row
        g = self.gate
        if g is not None:
            out["fidelity"] = {"mean": g.mean, "per_workload": list(g.per_workload), "met": g.met}
        out["checks"] = {c.name: {"mean": c.mean, "met": c.met} for c in self.checks()}
        return out


def run_load(runs: Sequence[str], load: float) -> LoadResult:
    """``runs`` at ``load``, our Tiresias first (every ratio is against it)."""
    result = LoadResult(load)
    for run in ["tiresias", *[r for r in runs if r != "tiresias"]]:
        result.runs[run] = average_jcts(run, load)
    return result


def _row(values: Sequence[float]) -> str:
    s = summarize(values)
    cells = " ".join(f"{v:6.0f}" for v in values)
    return f"{cells}  {s.mean:6.0f} +- {s.ci95:4.0f}"
