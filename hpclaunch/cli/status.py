"""``hpclaunch status [IDS...]``: the state of jobs, in one squeue (+ one sacct) call."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App

if TYPE_CHECKING:
    from hpclaunch.observe import JobInfo

_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")
_STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}


def _job_ids(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> list[str]:
    bad = [v for v in value if not _JOB_ID.match(v)]
    if bad:
        raise click.BadParameter(f"not a Slurm job id: {', '.join(bad)}")
    return list(value)


@click.command("status")
@click.argument("job_ids", nargs=-1, callback=_job_ids, metavar="[IDS]...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--limit", default=20, show_default=True, help="Recent jobs to show without IDS.")
@click.pass_obj
def status_command(app: App, job_ids: list[str], as_json: bool, limit: int) -> None:
    """Show the state of jobs IDS, or of your recent hpclaunch jobs."""
    from hpclaunch.backends.base import JobRef
    from hpclaunch.history import recent_submissions

    names: dict[str, str] = {}
    if job_ids:
        refs = [JobRef(job_id) for job_id in job_ids]
    else:
        records = recent_submissions(limit)
        refs = [JobRef(r.job_id) for r in records]
        names = {r.job_id: r.name for r in records}
        if not refs:
            click.echo("No hpclaunch jobs recorded yet; submit one with 'hpclaunch submit'.")
            return
    refs = list(dict.fromkeys(refs))
    infos = app.backend.status(refs)
    rows = [infos[ref] for ref in refs]
    if as_json:
        import json

        data = [{**i.to_dict(), "name": i.name or names.get(i.ref.job_id)} for i in rows]
        click.echo(json.dumps(data, indent=2))
    else:
        _print_table(rows, names)


def _print_table(rows: list[JobInfo], names: dict[str, str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("ID", "NAME", "STATE", "REASON", "NODES", "ELAPSED", "EXIT"):
        table.add_column(column, overflow="fold")
    for info in rows:
        state = info.state.value
        style = _STATE_STYLE.get(state, "red" if info.state.is_finished else "")
        table.add_row(
            info.ref.job_id,
            info.name or names.get(info.ref.job_id, ""),
            f"[{style}]{state}[/]" if style else state,
            info.reason or "",
            info.nodes or "",
            info.elapsed or "",
            "" if info.exit_code is None else str(info.exit_code),
        )
    Console().print(table)
