"""``hpclaunch resize JOB --nodes K``: restart an elastic job at another size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("resize")
@job_argument
@click.option("--nodes", type=click.IntRange(min=1), required=True, help="The new node count.")
@click.option("--why", default="asked by the user", show_default=True, help="Said in the ledger.")
@click.option("--force", is_flag=True, help="Resize even within the spec's elastic.min_interval.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to follow the resize: a running job to its restart (default 300), a "
    "pending one to its start (default: return at once); 0: return once asked.",
)
@pass_session
def resize_command(
    app: Session, job_id: str, nodes: int, why: str, force: bool, wait: float | None
) -> None:
    """Resize elastic job JOB to --nodes nodes (one of its spec's elastic.nodes).

    A pending job gets the new size at once. A running one checkpoints, is requeued held,
    gets the new size and is released: the next attempt starts at that size and resumes
    from the checkpoint ('hpclaunch events JOB' shows the resize).
    """
    result = app.job(job_id).resize(nodes, why=why, force=force, wait=wait)
    was = f"{result.from_nodes} → " if result.from_nodes is not None else ""
    size = f"{nodes} node" + ("" if nodes == 1 else "s")
    said = {
        # A pending job's count may still be its last attempt's: only the new one is said.
        "updated": f"job {job_id} (pending): starts on {size}",
        "unchanged": f"job {job_id} already has {size}: nothing to do",
        "asked": f"job {job_id}: resize to {size} asked; the sidecar checkpoints and "
        f"restarts it (follow with 'hpclaunch events {job_id}')",
        "resized": f"job {job_id}: {was}{size}; requeued"
        + (
            f" after checkpoint step {result.checkpoint_step}"
            if result.checkpoint_step is not None
            else " (no checkpoint committed in time)"
        ),
        "refused": f"job {job_id}: not resized: {result.why}",
    }[result.outcome]
    click.echo(said)
    if result.outcome == "updated" and result.why:  # --wait: how it started, or not yet
        click.echo(f"  {result.why}")
    if result.outcome == "resized" and result.why:
        click.echo(f"  {result.why}")
    if result.outcome == "refused":
        raise SystemExit(1)
