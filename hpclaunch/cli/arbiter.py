"""``hpclaunch arbiter``: checkpoint-aware preemption on the live cluster (an admin's daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli._session import pass_session
from hpclaunch.cli._signals import stop_on_signals

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("arbiter")
@click.option("--dry-run", is_flag=True, help="Log the decisions; signal and requeue nothing.")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=5.0,
    show_default=True,
    help="Seconds between passes (each costs slurmctld 2 RPCs, 3 when a decision is due).",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The decision log (JSON lines). [default: $XDG_STATE_HOME/hpclaunch/arbiter.jsonl]",
)
@click.option(
    "--min-run",
    type=click.FloatRange(min=0),
    # hpclaunch.scheduling.victims.MIN_RUN (not imported: --help stays light)
    default=300.0,
    show_default=True,
    help="Seconds a job preempted before runs again before it may be chosen again "
    "(set it above the restart cost: every run then makes progress).",
)
@click.option(
    "--max-preemptions",
    type=click.IntRange(min=1),
    default=None,
    help="Also never choose a job preempted this often (off by default: a job protected "
    "for good holds its GPUs until it ends, however long others wait).",
)
@click.option(
    "--restart-cost",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds a victim's restart costs (loading, warm-up), counted in every choice.",
)
@click.option(
    "--policy",
    type=click.Choice(["slurm-order", "las"]),
    default="slurm-order",
    show_default=True,
    help="slurm-order: Slurm orders the queue; the arbiter preempts across tiers and "
    "sizes elastic jobs around it. las: least attained service first (it also preempts "
    "within a tier), elastic jobs shrunk before anyone waits and grown by their measured "
    "speed-up: the simulator's best policy, but slower than slurm-order on the test "
    "cluster's short jobs (bench/RESULTS.md).",
)
@click.option(
    "--service-quantum",
    type=click.FloatRange(min=1),
    # hpclaunch.scheduling.las.QUANTUM (not imported: --help stays light)
    default=900.0,
    show_default=True,
    help="las: GPU-seconds of service of the first level; a job is displaced only by one "
    "a level below (levels double).",
)
@pass_session
def arbiter_command(
    app: Session,
    dry_run: bool,
    once: bool,
    interval: float,
    log_path: Path | None,
    min_run: float,
    max_preemptions: int | None,
    restart_cost: float,
    policy: str,
    service_quantum: float,
) -> None:
    """Preempt the running jobs that lose least, when a job of a preempting tier waits.

    For each pending job of a tier that may preempt (the site's tiers, as for Slurm's own
    preemption) that Slurm holds for Resources or Priority, the arbiter picks the
    preemptible running jobs whose preemption wastes the fewest GPU-seconds (GPUs x the
    work since their last committed checkpoint, or the checkpoint write when they can
    answer a request, + restart cost; exact fits first; a job preempted before only once
    its new run has lasted --min-run),
    asks those under the sidecar to checkpoint (they requeue themselves), requeues the
    others, and requeues by force any still running when their grace ends.

    Run it as a Slurm operator or admin (it signals and requeues other users' jobs), on
    a site whose tiers do not also preempt in Slurm (`preemption: arbiter` in the site
    config; `hpclaunch site plan` then clears the QOS Preempt lists). Every decision goes
    to the decision log with its reason. Stops on Ctrl-C or SIGTERM.
    """

    def show(event: dict[str, Any], line: str) -> None:
        click.echo(line, err=event.get("event") == "action_failed")

    arbiter = app.arbiter(
        log_path=log_path,
        on_event=show,
        dry_run=dry_run,
        min_run=min_run,
        max_preemptions=max_preemptions,
        restart_cost=restart_cost,
        policy=policy,
        service_quantum=service_quantum,
    )
    site = app.site_config
    if once:
        arbiter.step()
        return
    stop = stop_on_signals()
    click.echo(
        f"arbiter on site {site.name}: every {interval:g} s"
        + (" (dry run)" if dry_run else "")
        + f"; decisions in {arbiter.log_path}",
        err=True,
    )
    arbiter.run(interval, should_stop=stop.is_set)
