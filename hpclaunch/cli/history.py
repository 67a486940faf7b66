"""``hpclaunch history``: the submissions recorded here, filtered, with their last state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._options import json_option, limit_option
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._table import print_table as print_rows
from hpclaunch.cli._table import state_colour
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from datetime import datetime

    from hpclaunch.ops.session import Session
    from hpclaunch.store.history import SubmissionRecord

COLUMNS = ("ID", "NAME", "PROJECT", "TIER", "QUOTA", "STATE", "ATTEMPTS", "SUBMITTED")


def parse_time_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """A click callback: ``--since``/``--until`` as a naive local datetime."""
    if value is None:
        return None
    try:
        return helpers.when(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.command("history")
@click.option("--project", metavar="P", help="Only this project's submissions.")
@click.option("--tier", metavar="T", help="Only this tier.")
@click.option("--state", metavar="S", help="Only jobs in this state (COMPLETED, FAILED, ...).")
@click.option(
    "--since",
    metavar="DATE",
    callback=parse_time_option,
    help="Submitted at or after (2026-11-01, 2026-11-01T08:00, today, 7d, 12h).",
)
@click.option("--until", metavar="DATE", callback=parse_time_option, help="Submitted before.")
@limit_option(50, "The newest N (0: all).", minimum=0)
@json_option("Print JSON instead of a table.")
@pass_session
def history_command(
    app: Session,
    project: str | None,
    tier: str | None,
    state: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    as_json: bool,
) -> None:
    """List the jobs submitted from here (the local history), oldest first.

    Unfinished jobs of this site are asked about in one squeue (+ one sacct) call, and
    the ones that finished are stored with their final state, attempts and exit code.
    """
    records = app.history(
        project=project, tier=tier, state=state, since=since, until=until, limit=limit
    )
    if as_json:
        click.echo(json.dumps([asdict(r) for r in records], indent=2))
    elif not records:
        click.echo(f"No matching submissions in {helpers.history_path()}.")
    else:
        print_table(records)


def print_table(records: Sequence[SubmissionRecord]) -> None:
    """The history table (the state coloured on a terminal; a RERUN OF column, the job each
    rerun came from, when there is one)."""
    cells: list[tuple[str, ...]] = [
        (
            r.job_id,
            r.name,
            r.project or r.account or "",
            r.tier or "",
            r.quota or "",
            r.state or "",
            "" if r.attempts is None else str(r.attempts),
            r.submitted_at.replace("+00:00", "Z"),
        )
        for r in records
    ]
    columns: tuple[str, ...] = COLUMNS
    if any(r.rerun_of for r in records):
        columns = (*COLUMNS, "RERUN OF")
        cells = [(*row, r.rerun_of or "") for row, r in zip(cells, records, strict=True)]
    colours = [state_colour(r.state, True) if r.state else None for r in records]
    print_rows(columns, cells, colours={COLUMNS.index("STATE"): colours})
