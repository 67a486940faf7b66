"""``hpclaunch render SPEC``: print the batch script a spec becomes (nothing is submitted)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("render")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--argv", "show_argv", is_flag=True, help="Also print the sbatch argv first.")
@click.option("--explain", is_flag=True, help="Print why each option was chosen, to stderr.")
@pass_session
def render_command(app: Session, spec: str, show_argv: bool, explain: bool) -> None:
    """Print the batch script for SPEC without submitting it."""
    job = app.render(spec)
    if explain:
        click.echo(job.plan.describe(), err=True)
    if show_argv:
        click.echo(shlex.join(job.sbatch_argv))
    click.echo(job.script, nl=False)
