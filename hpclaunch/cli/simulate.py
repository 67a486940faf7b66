"""``hpclaunch simulate``: compare scheduling and preemption policies on a simulated cluster."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_POLICIES = ("fifo", "fifo-backfill", "priority", "slurm-native", "random", "ours")


@click.command("simulate")
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
@click.option("--load", default=1.0, show_default=True, help="Offered load of the workload.")
@click.option(
    "--trace",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay this CSV trace instead of generating workloads.",
)
@click.option("--sample", is_flag=True, help="Replay the shipped sample trace.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
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
    do not fit start at a half or a quarter of their GPUs, and grow into idle GPUs). See
    docs/simulator.md.
    """
    from hpclaunch.scheduling.simulate import workload
    from hpclaunch.scheduling.simulate.engine import SimConfig
    from hpclaunch.scheduling.simulate.policies import POLICIES
    from hpclaunch.scheduling.simulate.report import plot_cdfs, run_experiment, table

    for name in policies:
        if name not in POLICIES:
            raise click.BadParameter(
                f"unknown policy {name!r}; policies: {', '.join(POLICIES)}",
                param_hint="--policy",
            )
    if gpus_per_node < 1 or gpus < gpus_per_node or gpus % gpus_per_node:
        raise click.BadParameter(
            f"{gpus} GPUs are not whole nodes of {gpus_per_node}", param_hint="--gpus"
        )
    if seeds < 1 or jobs < 2 or load <= 0:
        raise click.BadParameter("--seeds >= 1, --jobs >= 2 and --load > 0 are needed")
    config = SimConfig(nodes=gpus // gpus_per_node, gpus_per_node=gpus_per_node)
    params = workload.WorkloadParams(jobs=jobs, load=load, gpus=gpus, gpus_per_node=gpus_per_node)
    if write_trace is not None:
        workload.write_trace(workload.generate(params, 1), write_trace)
        click.echo(f"wrote {jobs} jobs (seed 1, load {load}) to {write_trace}")
        return
    if sample:
        trace = Path(__file__).resolve().parents[1] / "scheduling/simulate/data/sample-trace.csv"
    trace_jobs = None
    if trace is not None:
        try:
            trace_jobs = workload.read_trace(trace, gpus_per_node=gpus_per_node, params=params)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--trace") from exc
    exp = run_experiment(
        policies or DEFAULT_POLICIES,
        list(range(1, seeds + 1)),
        params=params,
        trace=trace_jobs,
        config=config,
    )
    if plot is not None:
        plot_cdfs(exp, plot)
    if as_json:
        import json

        click.echo(json.dumps(exp.as_json(), indent=2, default=str))
        return
    click.echo(table(exp))
    if plot is not None:
        click.echo(f"\nplot: {plot}")
