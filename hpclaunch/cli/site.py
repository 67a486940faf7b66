"""``hpclaunch site show|check|plan|apply``: the cluster as discovered, the site config
against it, and the sacctmgr commands that make the cluster match it."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._site_show import print_capabilities

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session
    from hpclaunch.planning.siteplan import Change
    from hpclaunch.slurm.capabilities import Capabilities

_REFRESH = click.option("--refresh", is_flag=True, help="Ignore the cache; ask the cluster now.")


@click.group("site")
def site_command() -> None:
    """The site config and the live cluster."""


@site_command.command("show")
@_REFRESH
@json_option()
@pass_session
def show_command(app: Session, refresh: bool, as_json: bool) -> None:
    """Print what the cluster offers (cached for a few minutes)."""
    caps = app.capabilities(refresh=refresh)
    if as_json:
        click.echo(json.dumps(caps.to_dict(), indent=2))
        return

    print_capabilities(caps)


@site_command.command("check")
@_REFRESH
@json_option()
@pass_session
def check_command(app: Session, refresh: bool, as_json: bool) -> None:
    """Compare the site config with the cluster; exit 1 listing every mismatch."""
    checked = app.site.check(refresh=refresh)
    caps, problems = checked.caps, checked.problems
    if checked.plan_not_checked is not None:
        click.echo(f"Note: site plan not checked ({checked.plan_not_checked})", err=True)
    probe = checked.runtimes
    if probe is not None and probe.not_checked is not None:
        click.echo(f"Note: container runtimes not checked ({probe.not_checked})", err=True)
    if as_json:
        data = {
            "site": app.site_config.name,
            "cluster": caps.cluster,
            "in_sync": not problems,
            "accounting_problem": caps.accounting_problem,
            "slurm_version": caps.slurm_version,
            "client_version": caps.client_version,
            "backend": app.backend.name,
            "backend_reason": app.backend_reason,
            "problems": [p.to_dict() for p in problems],
            "container_runtimes": None
            if probe is None
            else {
                "not_checked": probe.not_checked,
                "found": [dataclasses.asdict(f) for f in probe.findings],
            },
        }
        click.echo(json.dumps(data, indent=2))
    else:
        # Which Slurm was checked, and with which commands (they must be the same release).
        click.echo(
            f"cluster {caps.cluster}: Slurm {caps.slurm_version}; "
            f"commands on {app.runner.where}: {caps.client_version}"
        )
        source = app.settings.backend
        said = source.said_by("backend")
        click.echo(f"backend {source.value!r} (from {said}): {app.backend_reason}")
        if caps.accounting_problem:
            click.echo(f"Note: {caps.accounting_problem}; QOS and accounts not checked", err=True)
        if probe is not None:
            for f in probe.findings:
                if f.ok:
                    click.echo(f"container runtime {f.runtime}: {f.detail} (on {f.node})")
        if not problems:
            click.echo(f"site {app.site_config.name} matches cluster {caps.cluster}")
        else:
            click.echo(f"site {app.site_config.name} differs from cluster {caps.cluster}:")
            for problem in problems:
                click.echo(f"  - {problem}")
    if problems:
        raise click.exceptions.Exit(1)


def _in_sync(app: Session, caps: Capabilities) -> str:
    return f"site {app.site_config.name} matches cluster {caps.cluster}: nothing to do"


def print_changes(changes: Sequence[Change]) -> None:
    """Each change as a ``# reason`` comment and its shell-quoted command; slurm.conf
    settings last, under a note that they are not sacctmgr's to change."""
    conf = [c for c in changes if c.kind == "slurm.conf"]
    for change in changes:
        if change.kind == "sacctmgr":
            click.echo(f"# {change.reason}")
            click.echo(change.command)
    if conf:
        click.echo(
            "# sacctmgr cannot change these: edit slurm.conf on the controller (and the "
            "nodes), then run: scontrol reconfigure"
        )
        for change in conf:
            click.echo(f"# {change.reason}")
            click.echo(change.command)


@site_command.command("plan")
@json_option()
@pass_session
def plan_command(app: Session, as_json: bool) -> None:
    """Print the sacctmgr commands (and slurm.conf settings) that make the cluster's QOS
    and accounts match the site config; nothing when they already do."""
    planned = app.site.plan()
    caps, changes = planned.caps, planned.changes
    if as_json:
        data = {
            "site": app.site_config.name,
            "cluster": caps.cluster,
            "in_sync": not changes,
            "changes": [c.to_dict() for c in changes],
        }
        click.echo(json.dumps(data, indent=2))
    elif not changes:
        click.echo(_in_sync(app, caps))
    else:
        click.echo(
            f"# site {app.site_config.name} -> cluster {caps.cluster}: {len(changes)} changes"
        )
        print_changes(changes)


@site_command.command("apply")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (scripts).")
@pass_session
def apply_command(app: Session, yes: bool) -> None:
    """Run the commands of ``site plan`` (after asking), then check the cluster matches."""
    planned = app.site.plan()
    caps, changes = planned.caps, planned.changes
    if not changes:
        click.echo(_in_sync(app, caps))
        return
    print_changes(changes)
    steps = planned.commands
    if steps and not yes:
        if not sys.stdin.isatty():
            click.echo(
                f"Error: not running {len(steps)} sacctmgr commands without confirmation "
                "(standard input is not a terminal)\nHint: pass --yes to apply without asking",
                err=True,
            )
            raise click.exceptions.Exit(2)
        click.confirm(
            f"Run these {len(steps)} commands on cluster {caps.cluster}?", abort=True, err=True
        )
    after = app.site.apply(planned, progress=lambda c: click.echo(f"+ {c.command}", err=True))
    caps, left = after.caps, after.changes
    if not left:
        click.echo(
            f"site {app.site_config.name} matches cluster {caps.cluster}: {len(steps)} applied"
        )
        return
    if all(c.kind == "slurm.conf" for c in left):
        click.echo(
            f"applied {len(steps)} sacctmgr commands; the slurm.conf settings above are "
            "still to be made by an admin",
            err=True,
        )
    else:
        click.echo("Error: the cluster still differs from the site config:", err=True)
        for change in left:
            click.echo(f"  - {change.reason}: {change.command}", err=True)
    raise click.exceptions.Exit(1)
