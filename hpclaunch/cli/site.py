"""``hpclaunch site show|check``: the cluster as discovered, and the site config against it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App

if TYPE_CHECKING:
    from hpclaunch.discover import Capabilities
    from hpclaunch.plan import SubmissionPlan

_REFRESH = click.option("--refresh", is_flag=True, help="Ignore the cache; ask the cluster now.")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def capabilities(app: App, *, refresh: bool = False) -> Capabilities:
    """The site's cluster capabilities, from the cache when fresh."""
    from hpclaunch.discover import load_capabilities, max_age_from_env

    return load_capabilities(
        app.runner, app.site.name, max_age=max_age_from_env(app.env), refresh=refresh
    )


def check_before_submit(app: App, plan: SubmissionPlan, *, enabled: bool) -> None:
    """Raise a :class:`~hpclaunch.errors.PlanError` (exit 2) if the cluster would refuse
    ``plan``. When the cluster cannot be read, warn and go on: sbatch has the last word."""
    if not enabled:
        return
    from hpclaunch.errors import TransportError
    from hpclaunch.sitecheck import check_plan, raise_for_problems

    try:
        caps = capabilities(app)
    except TransportError as exc:
        click.echo(
            f"Warning: not checked against the cluster ({exc.message.splitlines()[0]})", err=True
        )
        return
    raise_for_problems(check_plan(plan, caps), caps)


@click.group("site")
def site_command() -> None:
    """The site config and the live cluster."""


@site_command.command("show")
@_REFRESH
@_JSON
@click.pass_obj
def show_command(app: App, refresh: bool, as_json: bool) -> None:
    """Print what the cluster offers (cached for a few minutes)."""
    caps = capabilities(app, refresh=refresh)
    if as_json:
        click.echo(json.dumps(caps.to_dict(), indent=2))
        return
    from hpclaunch.cli._site_show import print_capabilities

    print_capabilities(caps)


@site_command.command("check")
@_REFRESH
@_JSON
@click.pass_obj
def check_command(app: App, refresh: bool, as_json: bool) -> None:
    """Compare the site config with the cluster; exit 1 listing every mismatch."""
    from hpclaunch.sitecheck import check_site

    caps = capabilities(app, refresh=refresh)
    problems = check_site(app.site, caps)
    if as_json:
        data = {
            "site": app.site.name,
            "cluster": caps.cluster,
            "in_sync": not problems,
            "accounting_problem": caps.accounting_problem,
            "problems": [p.to_dict() for p in problems],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        if caps.accounting_problem:
            click.echo(f"Note: {caps.accounting_problem}; QOS and accounts not checked", err=True)
        if not problems:
            click.echo(f"site {app.site.name} matches cluster {caps.cluster}")
        else:
            click.echo(f"site {app.site.name} differs from cluster {caps.cluster}:")
            for problem in problems:
                click.echo(f"  - {problem}")
    if problems:
        raise click.exceptions.Exit(1)
