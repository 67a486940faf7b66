"""``hpclaunch simulate``: compare scheduling and preemption policies on a simulated cluster."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from hpclaunch.cli._options import json_option
from hpclaunch.ops import helpers

#: As hpclaunch.ops.simulate.DEFAULT_POLICIES (not imported: --help stays light).
DEFAULT_POLICIES = ("fifo", "fifo-backfill", "priority", "slurm-native", "random", "ours")


@click.command("simulate")
@click.option(
    "--workload",
    default="synthetic",
    show_default=True,
    metavar="NAME",
    help="synthetic (TE/BE jobs, --seeds/--jobs/--gpus), or pollux-osdi21: the Pollux "
    "artifact's 8 published workloads on 64 GPUs, beside its own results.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    metavar="NAME",
    help=f"A policy to run (repeatable) [default: all: {', '.join(DEFAULT_POLICIES)}].",
)
@click.option("--seeds", default=10, show_default=True, help="Seeds 1..N (workloads).")
@click.option("--jobs", default=5000, show_default=True, help="Jobs per synthetic workload.")
@click.option("--gpus", default=256, show_default=True, help="GPUs in the cluster.")
@click.option("--gpus-per-node", default=8, show_default=True, help="GPUs per node.")
@click.option(
    "--load",
    default=1.0,
    show_default=True,
    help="Offered load of the workload (pollux-osdi21: 0.5, 1.0, 1.5 or 2.0).",
)
@click.option(
    "--trace",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay this CSV trace instead of generating workloads.",
)
@click.option("--sample", is_flag=True, help="Replay the shipped sample trace.")
@json_option("Print JSON instead of a table.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the slowdown CDFs (TE and BE panels) to this PNG (needs matplotlib).",
)
@click.option(
    "--write-trace",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the first seed's synthetic workload as a CSV trace and exit.",
)
def simulate_command(
    workload: str,
    policies: tuple[str, ...],
    seeds: int,
    jobs: int,
    gpus: int,
    gpus_per_node: int,
    load: float,
    trace: Path | None,
    sample: bool,
    as_json: bool,
    plot: Path | None,
    write_trace: Path | None,
) -> None:
    """Simulate policies on a synthetic workload (or a trace) and print TE/BE slowdowns,
    waits, lost GPU-hours, preemptions and utilisation, mean ± 95 % CI over the seeds.

    Policies: fifo, fifo-backfill, priority (no preemption), slurm-native (preempt/qos,
    REQUEUE), random (random victims), ours; and, when named, ours-elastic (BE jobs that
    do not fit start at a half or a quarter of their GPUs, and grow into idle GPUs) and
    ours-las (the arbiter's --policy las: least attained service, TE before BE, elastic
    jobs shrunk before anyone waits and grown into idle GPUs).

    With --workload pollux-osdi21: the average job completion time of each of the 8
    workloads under tiresias, elastic-fixed and elastic-adaptive (or the --policy runs:
    fifo, fifo-backfill, ours-elastic-fixed, ones, ...; *-oracle runs see true speeds),
    each over our Tiresias paired workload by workload, and the fidelity gate. See
    docs/simulator.md.
    """
    if workload != "synthetic":
        _published(workload, policies, load, as_json, given=_synthetic_only())
        return

    if write_trace is not None:
        helpers.write_workload(
            write_trace, jobs=jobs, gpus=gpus, gpus_per_node=gpus_per_node, load=load
        )
        click.echo(f"wrote {jobs} jobs (seed 1, load {load}) to {write_trace}")
        return
    exp = helpers.simulate(
        policies,
        seeds=seeds,
        jobs=jobs,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        load=load,
        trace=trace,
        sample=sample,
    )
    if plot is not None:
        exp.plot(plot)
    if as_json:
        click.echo(json.dumps(exp.as_json(), indent=2, default=str))
        return
    click.echo(exp.table())
    if plot is not None:
        click.echo(f"\nplot: {plot}")


#: The options that describe the synthetic workload (or a trace) and its cluster.
SYNTHETIC_ONLY = (
    "seeds",
    "jobs",
    "gpus",
    "gpus_per_node",
    "trace",
    "sample",
    "plot",
    "write_trace",
)


def _synthetic_only() -> list[str]:
    """The synthetic workload's options the user gave (click says which were not left at
    their defaults)."""
    ctx = click.get_current_context()
    return [
        f"--{name.replace('_', '-')}"
        for name in SYNTHETIC_ONLY
        if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)
    ]


def _published(
    workload: str, policies: tuple[str, ...], load: float, as_json: bool, given: list[str]
) -> None:
    if given:
        raise click.UsageError(
            f"{', '.join(given)}: only for the synthetic workload "
            f"({workload} has its own jobs and cluster)"
        )
    result = helpers.simulate_published(workload, policies, load=load)
    if as_json:
        click.echo(json.dumps(result.as_json(), indent=2))
        return
    click.echo(result.table())
