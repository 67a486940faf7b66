"""``hpclaunch notify``: the webhooks that specs' ``notify:`` name."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session


@click.group("notify")
def notify_group() -> None:
    """Save the webhooks that specs name in notify: {webhook: NAME}."""


@notify_group.command("add")
@click.argument("name")
@pass_session
def add_command(app: Session, name: str) -> None:
    """Save webhook NAME; its URL is read from standard input (hidden when typed), never
    from the command line, where the shell's history and ps would keep it."""
    if sys.stdin.isatty():
        url = click.prompt(f"URL of webhook {name}", hide_input=True)
    else:
        url = sys.stdin.readline()
    path = app.notify.add(name, url)
    click.echo(
        f"webhook {name} saved in {path} (private); name it in a spec: notify: {{webhook: {name}}}"
    )


@notify_group.command("remove")
@click.argument("name")
@pass_session
def remove_command(app: Session, name: str) -> None:
    """Forget webhook NAME (jobs already submitted keep their own copy of its URL)."""
    path = app.notify.remove(name)
    click.echo(f"webhook {name} removed ({path}); jobs already submitted still tell it")


@notify_group.command("list")
@pass_session
def list_command(app: Session) -> None:
    """List the names of the saved webhooks (never their URLs)."""
    names = app.notify.names()
    click.echo(
        "\n".join(names)
        if names
        else "no webhook saved; add one: hpclaunch notify add NAME (it asks for the URL)"
    )


@notify_group.command("test")
@click.argument("name")
@pass_session
def test_command(app: Session, name: str) -> None:
    """Send a test message to webhook NAME from here."""
    why = app.notify.test(name)
    if why:
        raise click.ClickException(f"webhook {name} did not take the test message: {why}")
    click.echo(f"webhook {name} took the test message")
