"""``hpclaunch clean``: remove old function calls and results (hpclaunch/ops/clean.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("clean")
@click.option(
    "--older-than",
    default="30d",
    show_default=True,
    metavar="AGE",
    help="Submitted longer ago than this: 30min, 12h, 7d, 2w.",
)
@click.option("--dry-run", is_flag=True, help="List the files; remove nothing.")
@pass_session
def clean_command(app: Session, older_than: str, dry_run: bool) -> None:
    """Remove the call and result pickles of ended function jobs older than AGE.

    Only the pickles of jobs submitted with Session.submit(fn) or Session.map go (in
    <job dir>/call/ and tasks/<i>/call/); logs, ledgers and checkpoints stay, and a job
    still queued or running keeps its files. Submitting a function does this once a day
    for 30 days.
    """
    try:
        cleaned = app.clean(older_than, dry_run=dry_run)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    for path in cleaned.files:
        click.echo(path)
    verb = "would remove" if dry_run else "removed"
    kept = (
        f"; kept those of {len(cleaned.kept_running)} job(s) not ended"
        if cleaned.kept_running
        else ""
    )
    click.echo(f"{verb} {len(cleaned.files)} file(s){kept}", err=True)
