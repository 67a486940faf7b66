"""``hpclaunch config show``: every setting, its value and (with --sources) its origin."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.config.settings import Sourced
    from hpclaunch.ops.session import Session

_LAYERS = {
    "default": "built-in default",
    "site": "site config",
    "user": "user config",
    "env": "environment",
    "cli": "command-line flag",
}


@click.group("config", invoke_without_command=True)
@click.pass_context
def config_group(ctx: click.Context) -> None:
    """Show hpclaunch's own settings.

    Alone, as ``config show --sources``.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(show_command, sources=True, as_json=False)


@config_group.command("show")
@click.option("--sources", is_flag=True, help="Also say where each value came from.")
@json_option("Print JSON (for scripts).")
@pass_session
def show_command(app: Session, sources: bool, as_json: bool) -> None:
    """Print every setting and its value.

    Settings come from, lowest first: built-in defaults, the site's defaults: section,
    the user config (~/.config/hpclaunch/config.yaml), HPCLAUNCH_* variables, and the
    global flags (--site, --backend) actually typed.
    """
    items = app.settings.items()
    if as_json:
        data = {
            name: {"value": s.value, "source": s.source, "origin": s.origin or None}
            for name, s in items
        }
        click.echo(json.dumps(data, indent=2))
        return
    width = max(len(name) for name, _ in items)
    for name, setting in items:
        value = "(not set)" if setting.value is None else setting.value
        line = f"{name:<{width}} = {value}"
        if sources:
            line += f"    # {_describe_source(setting)}"
        click.echo(line)


def _describe_source(setting: Sourced) -> str:
    label = _LAYERS.get(setting.source, setting.source)
    if setting.source == "site":
        return f"{label} {setting.origin}"
    if setting.origin:
        return f"{label} ({setting.origin})"
    return label
