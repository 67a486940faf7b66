"""``hpclaunch queue``: the cluster's pending and running work in the scheduler's order."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.queue import QueueEntry
    from hpclaunch.ops.session import Session

COLUMNS = (
    "#",
    "ID",
    "USER",
    "PROJECT",
    "TIER",
    "QUOTA",
    "QOS",
    "STATE",
    "PRIO",
    "WAITED/ELAPSED",
    "STARTS",
    "GPUS",
    "WHY",
)
_STATE_STYLE = {"RUNNING": "cyan", "PENDING": "yellow"}


@click.command("queue")
@json_option("Print JSON (with Slurm's raw reasons).")
@click.option(
    "--all-users/--me",
    "all_users",
    default=True,
    show_default=True,
    help="Everyone's jobs, or only yours.",
)
@click.option("--partition", metavar="P", help="Only jobs that may run in partition P.")
@click.option(
    "--why",
    "why_job",
    metavar="JOB",
    help="Why pending JOB is behind the jobs ranked before it: their priority factors "
    "against its own (sprio) and the projects' fair-share standing (sshare).",
)
@pass_session
def queue_command(
    app: Session, as_json: bool, all_users: bool, partition: str | None, why_job: str | None = None
) -> None:
    """Show pending and running jobs as the scheduler will take them.

    Running jobs first, then pending ones ranked as Slurm considers them: priority (which
    holds the tier's QOS priority and nice), then submit time, then job id; each with why it
    waits. One squeue call (or one job-list RPC with pyslurm) for the whole queue.
    """
    if why_job is not None:
        explained = app.job(why_job).why_waiting()
        if as_json:
            click.echo(json.dumps(explained.to_dict(), indent=2))
        else:
            click.echo("\n".join(explained.lines))
        return

    entries = app.queue(me=not all_users, partition=partition)
    if as_json:
        click.echo(json.dumps([entry.to_dict() for entry in entries], indent=2))
    elif not entries:
        who = "Nobody has" if all_users else "You have no"
        click.echo(
            f"{who} pending or running jobs" + (f" in partition {partition}." if partition else ".")
        )
    else:
        print_table(entries)


def print_table(entries: Sequence[QueueEntry]) -> None:
    """The queue table (rich; wide enough not to fold when piped)."""
    from rich.console import Console  # noqa: PLC0415 (rich)
    from rich.markup import escape  # noqa: PLC0415 (rich)
    from rich.table import Table  # noqa: PLC0415 (rich)

    table = Table(box=None, header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold", justify="right" if column == "#" else "left")
    running = pending = 0
    for entry in entries:
        row = entry.row
        running += not row.pending
        pending += row.pending
        style = _STATE_STYLE.get(row.state, "")
        state = f"[{style}]{row.state}[/]" if style else row.state
        table.add_row(
            "" if entry.rank is None else str(entry.rank),
            f"[bold]{row.job_id}[/]" if entry.ours else escape(row.job_id),
            escape(row.user),
            escape(entry.project or ""),
            entry.tier or "",
            entry.quota or "",
            escape(row.qos or ""),
            state,
            "" if row.priority is None else str(row.priority),
            entry.waited_or_elapsed,
            entry.expected_start_text,
            str(row.gpus) if row.gpus else "",
            escape(entry.why),
        )
    console = Console(width=None if sys.stdout.isatty() else 250)
    console.print(table)
    console.print(f"{running} running, {pending} pending", highlight=False)
