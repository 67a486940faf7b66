"""``hpclaunch history``: the submissions recorded here, filtered, with their last state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App

if TYPE_CHECKING:
    from datetime import datetime

    from hpclaunch.history import SubmissionRecord

COLUMNS = ("ID", "NAME", "PROJECT", "TIER", "QUOTA", "STATE", "ATTEMPTS", "SUBMITTED")
#: At most this many unfinished jobs are asked about (one squeue + one sacct).
REFRESH_MAX = 1000
_STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}


def parse_time_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """A click callback: ``--since``/``--until`` as a naive local datetime."""
    if value is None:
        return None
    from datetime import datetime

    from hpclaunch.cost import parse_when

    try:
        return parse_when(value, datetime.now())
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
@click.option("--limit", default=50, show_default=True, help="The newest N (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
def history_command(
    app: App,
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
    from hpclaunch.history import history_path, query_submissions

    records = query_submissions(
        project=project,
        tier=tier,
        since=since.astimezone() if since else None,
        until=until.astimezone() if until else None,
    )
    records = _refresh(app, records)
    if state is not None:
        records = [r for r in records if (r.state or "").upper() == state.upper()]
    if limit > 0:
        records = records[-limit:]
    if as_json:
        import json
        from dataclasses import asdict

        click.echo(json.dumps([asdict(r) for r in records], indent=2))
    elif not records:
        click.echo(f"No matching submissions in {history_path()}.")
    else:
        print_table(records)


def _refresh(app: App, records: list[SubmissionRecord]) -> list[SubmissionRecord]:
    """The records with Slurm's state for this site's unfinished jobs (final ones stored)."""
    from dataclasses import replace

    from hpclaunch.backends.base import JobRef
    from hpclaunch.cli.status import remember_finished
    from hpclaunch.errors import HpclaunchError
    from hpclaunch.observe import JobState

    unfinished = [r for r in records if r.site == app.site.name and not _settled(r)][-REFRESH_MAX:]
    if not unfinished:
        return records
    try:
        infos = app.backend.status([JobRef(r.job_id, r.cluster) for r in unfinished])
    except HpclaunchError as exc:
        click.echo(f"Warning: states not refreshed from Slurm: {exc.message}", err=True)
        return records
    by_id = {r.job_id: r for r in unfinished}
    remember_finished(infos.values(), by_id)
    live = {
        ref.job_id: info
        for ref, info in infos.items()
        if info.state is not JobState.UNKNOWN and info.name in (None, by_id[ref.job_id].name)
    }

    def now(record: SubmissionRecord) -> SubmissionRecord:
        info = live.get(record.job_id) if by_id.get(record.job_id) is record else None
        if info is None:
            return record
        attempts = record.attempts if info.restarts is None else info.restarts + 1
        exit_code = info.exit_code if info.exit_code is not None else record.exit_code
        return replace(record, state=info.state.value, attempts=attempts, exit_code=exit_code)

    return [now(r) for r in records]


def _settled(record: SubmissionRecord) -> bool:
    """Whether the record has its job's final state and exit code (squeue can see a job
    finished before sacct has its exit code: such a record is asked about again)."""
    from hpclaunch.observe import parse_state

    if record.state is None or not parse_state(record.state).is_finished:
        return False
    return record.exit_code is not None


def print_table(records: Sequence[SubmissionRecord]) -> None:
    """The history table (rich; wide enough not to fold when piped)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for r in records:
        state = r.state or ""
        style = _STATE_STYLE.get(state, "red" if state else "")
        table.add_row(
            r.job_id,
            r.name,
            r.project or r.account or "",
            r.tier or "",
            r.quota or "",
            f"[{style}]{state}[/]" if style else state,
            "" if r.attempts is None else str(r.attempts),
            r.submitted_at.replace("+00:00", "Z"),
        )
    Console(width=None if sys.stdout.isatty() else 250).print(table)
