"""``hpclaunch cost``: GPU-hours (and money) per project, tier or user, from one sacct call."""

from __future__ import annotations

import csv
import json
import sys
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session
from hpclaunch.cli.history import parse_time_option
from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from datetime import datetime

    from hpclaunch.ops.cost import CostReport
    from hpclaunch.ops.session import Session


@click.command("cost")
@click.option(
    "--since",
    metavar="DATE",
    callback=parse_time_option,
    help="Start of the period (2026-11-01, 2026-11-01T08:00, today, 7d); default: the 1st "
    "of this month. Times are the cluster's local time, as sacct's.",
)
@click.option("--until", metavar="DATE", callback=parse_time_option, help="End (default: now).")
@click.option(
    "--by",
    "by",
    multiple=True,
    type=click.Choice(["project", "tier", "user"]),
    help="Group by this (repeat for several: --by project --by tier); default: project.",
)
@click.option("--all-users", is_flag=True, help="Everyone's jobs (sacct -a), not only yours.")
@json_option("Print JSON (groups, total, attempts).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (one line per group).")
@pass_session
def cost_command(
    app: Session,
    since: datetime | None,
    until: datetime | None,
    by: tuple[str, ...],
    all_users: bool,
    as_json: bool,
    as_csv: bool,
) -> None:
    """GPU-hours used in a period, from sacct's allocated TRES, and their price.

    One sacct call; every attempt of a requeued job counts, each once. A job that
    straddles the period counts only its time inside it. Over-quota accounts (P-oq) count
    towards project P. CHARGED is what fair share counts: GPU-hours times the QOS usage
    factor (half for preemptible and over-quota work by default; shown where it differs).
    The price column needs 'prices:' in the site config.
    """
    if as_json and as_csv:
        raise ConfigError("--json and --csv: choose one", hint="hpclaunch cost --csv > usage.csv")
    cost = app.cost(since=since, until=until, by=by or ("project",), all_users=all_users)
    if as_json:
        click.echo(json.dumps(cost.to_dict(), indent=2))
    elif as_csv:
        _print_csv(cost)
    else:
        _print_table(cost, f"user {cost.user}" if cost.user else "all users")


def _print_csv(cost: CostReport) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    money = ["cost", "currency"] if cost.currency else []
    writer.writerow([*cost.by, "jobs", "gpu_hours", "charged_gpu_hours", *money])
    for row in cost.rows:
        priced = [f"{row.cost:.2f}", cost.currency] if cost.currency else []
        hours = [f"{row.gpu_hours:.6f}", f"{row.charged_hours:.6f}"]
        writer.writerow([*row.keys, row.jobs, *hours, *priced])


def _print_table(cost: CostReport, whose: str) -> None:
    from rich.console import Console  # noqa: PLC0415 (rich)
    from rich.table import Table  # noqa: PLC0415 (rich)

    console = Console(width=None if sys.stdout.isatty() else 250)
    console.print(
        f"GPU-hours from {cost.since:%Y-%m-%d %H:%M:%S} to {cost.until:%Y-%m-%d %H:%M:%S} "
        f"({whose}; sacct, the cluster's local time)"
    )
    table = Table(box=None, header_style="bold")
    for key in cost.by:
        table.add_column(key.upper())
    table.add_column("JOBS", justify="right")
    table.add_column("GPU-HOURS", justify="right")
    # Charged (fair share) differs where a QOS has a usage factor: preemptible work.
    charged = any(abs(r.charged_hours - r.gpu_hours) > 5e-4 for r in cost.rows)
    if charged:
        table.add_column("CHARGED", justify="right")
    if cost.currency:
        table.add_column(f"COST ({cost.currency})", justify="right")
    for row in (*cost.rows, cost.total):
        cells = [*row.keys, str(row.jobs), f"{row.gpu_hours:.3f}"]
        if charged:
            cells.append(f"{row.charged_hours:.3f}")
        if cost.currency:
            cells.append(f"{row.cost or 0.0:.2f}")
        table.add_row(*cells, style="bold" if row is cost.total else None)
    console.print(table)
