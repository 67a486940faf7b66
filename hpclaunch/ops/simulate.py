"""Comparing scheduling and preemption policies on a simulated cluster (``hpclaunch
simulate``, ``helpers.simulate``): the workload (synthetic, or a trace) and the cluster's
shape checked, then every policy run on every seed (:mod:`hpclaunch.scheduling.simulate`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.errors import ConfigError
from hpclaunch.scheduling.simulate import workload
from hpclaunch.scheduling.simulate.engine import SimConfig
from hpclaunch.scheduling.simulate.measured import published
from hpclaunch.scheduling.simulate.policies import POLICIES
from hpclaunch.scheduling.simulate.report import run_experiment
from hpclaunch.scheduling.simulate.workload import WorkloadParams

if TYPE_CHECKING:
    from hpclaunch.scheduling.simulate.report import Experiment

__all__ = [
    "DEFAULT_POLICIES",
    "PUBLISHED_DEFAULT_RUNS",
    "PUBLISHED_WORKLOADS",
    "SAMPLE_TRACE",
    "simulate",
    "simulate_published",
    "write_workload",
]

DEFAULT_POLICIES = ("fifo", "fifo-backfill", "priority", "slurm-native", "random", "ours")
#: The published workloads ``simulate --workload`` knows (shipped in the wheel).
PUBLISHED_WORKLOADS = ("pollux-osdi21",)
#: Their runs by default: the gated baseline and the elastic policy with each batch.
PUBLISHED_DEFAULT_RUNS = ("tiresias", "elastic-fixed", "elastic-adaptive")
#: The small trace shipped with hpclaunch (``simulate --sample``).
SAMPLE_TRACE = Path(__file__).resolve().parents[1] / "scheduling/simulate/data/sample-trace.csv"


def _workload(jobs: int, gpus: int, gpus_per_node: int, load: float) -> WorkloadParams:
    """The workload's parameters, once the cluster is whole nodes and the numbers make sense.

    Raises:
        ConfigError: ``gpus`` is not whole nodes, or a number is out of range.
    """

    if gpus_per_node < 1 or gpus < gpus_per_node or gpus % gpus_per_node:
        raise ConfigError(
            f"gpus: {gpus} GPUs are not whole nodes of {gpus_per_node}",
            hint="give a multiple of the GPUs per node",
        )
    if jobs < 2 or load <= 0:
        raise ConfigError("jobs >= 2 and load > 0 are needed")
    return WorkloadParams(jobs=jobs, load=load, gpus=gpus, gpus_per_node=gpus_per_node)


def simulate(
    policies: Sequence[str] = (),
    *,
    seeds: int = 10,
    jobs: int = 5000,
    gpus: int = 256,
    gpus_per_node: int = 8,
    load: float = 1.0,
    trace: str | os.PathLike[str] | None = None,
    sample: bool = False,
) -> Experiment:
    """Run ``policies`` (default :data:`DEFAULT_POLICIES`) on seeds ``1..seeds``: synthetic
    workloads of ``jobs`` jobs at ``load``, or the CSV ``trace`` replayed (``sample``: the
    trace shipped with hpclaunch), on ``gpus`` GPUs in nodes of ``gpus_per_node``; the
    result's ``.table()``, ``.plot(path)`` and ``.as_json()`` show it.

    Raises:
        ConfigError: An unknown policy, a trace that cannot be read, or a number out of
            range.
    """

    unknown = [name for name in policies if name not in POLICIES]
    if unknown:
        raise ConfigError(f"unknown policy {unknown[0]!r}", hint=f"policies: {', '.join(POLICIES)}")
    if seeds < 1:
        raise ConfigError("seeds >= 1 is needed")
    params = _workload(jobs, gpus, gpus_per_node, load)
    trace_jobs = None
    if sample:
        trace = SAMPLE_TRACE
    if trace is not None:
        try:
            trace_jobs = workload.read_trace(
                Path(trace), gpus_per_node=gpus_per_node, params=params
            )
        except ValueError as exc:
            raise ConfigError(f"{trace}: {exc}") from exc
    return run_experiment(
        list(policies) or list(DEFAULT_POLICIES),
        list(range(1, seeds + 1)),
        params=params,
        trace=trace_jobs,
        config=SimConfig(nodes=gpus // gpus_per_node, gpus_per_node=gpus_per_node),
    )


def write_workload(
    path: str | os.PathLike[str],
    *,
    jobs: int = 5000,
    gpus: int = 256,
    gpus_per_node: int = 8,
    load: float = 1.0,
) -> None:
    """Write seed 1's synthetic workload to ``path`` as a CSV trace (``--write-trace``).

    Raises:
        ConfigError: A number out of range.
    """

    params = _workload(jobs, gpus, gpus_per_node, load)
    workload.write_trace(workload.generate(params, 1), Path(path))


def simulate_published(
    workload: str = "pollux-osdi21", runs: Sequence[str] = (), *, load: float = 1.0
) -> published.LoadResult:
    """Run ``runs`` (default :data:`PUBLISHED_DEFAULT_RUNS`; our Tiresias always, the
    baseline every ratio is paired against) on the 8 workloads of the Pollux artifact at
    relative ``load``; the result's ``.table()`` shows the artifact's results beside ours
    and the fidelity gate, ``.as_json()`` every value.

    Raises:
        ConfigError: An unknown workload, run or load.
    """

    if workload not in PUBLISHED_WORKLOADS:
        raise ConfigError(
            f"unknown workload {workload!r}",
            hint=f"workloads: synthetic (the default), {', '.join(PUBLISHED_WORKLOADS)}",
        )
    unknown = [name for name in runs if name not in published.RUNS]
    if unknown:
        raise ConfigError(
            f"unknown policy {unknown[0]!r} for --workload {workload}",
            hint=f"policies: {', '.join(published.RUNS)}",
        )
    if load not in published.LOADS:
        raise ConfigError(
            f"load {load} has no published workloads",
            hint=f"loads: {', '.join(str(x) for x in published.LOADS)}",
        )
    return published.run_load(list(runs) or list(PUBLISHED_DEFAULT_RUNS), load)
