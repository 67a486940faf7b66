"""``hpclaunch estimate SPEC``: when Slurm would start it, and how long it runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import quota_option
from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.command("estimate")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a field of SPEC first, as submit --set does (repeatable).",
)
@json_option("Print the estimate as JSON.")
@quota_option
@pass_session
def estimate_command(
    app: Session,
    spec: str,
    overrides: tuple[str, ...],
    as_json: bool,
    quota: str | None = None,
) -> None:
    """Say when SPEC would start if submitted now (Slurm's sbatch --test-only; nothing is
    queued), how long its past runs took, and a time limit to ask for. --quota strict: as
    submit --quota strict would place it (in-quota, waiting for the project's GPUs)."""
    app.set_typed("quota", quota)
    estimate = app.estimate(spec, overrides=overrides)
    if as_json:
        click.echo(json.dumps(estimate.to_dict(), indent=1))
        return
    for line in estimate.lines():
        click.echo(line)
