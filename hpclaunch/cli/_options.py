"""Options many commands share (click only: importing this costs a command nothing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


def json_option(text: str = "Print JSON.") -> Callable[[F], F]:
    """``--json`` (the parameter ``as_json``) of a command that prints a table or a report."""
    return click.option("--json", "as_json", is_flag=True, help=text)


#: ``--no-check`` of the commands that submit (submit, sweep).
no_check_option = click.option(
    "--no-check", is_flag=True, help="Do not check the plan against the live cluster first."
)
#: ``--partition`` of the commands that submit: a shorthand for ``--set resources.partition``.
partition_option = click.option(
    "--partition",
    metavar="NAME",
    help="Run in this partition of the site (the same as --set resources.partition=NAME).",
)


def limit_option(default: int, text: str, *, minimum: int = 1) -> Callable[[F], F]:
    """``--limit N`` of a command that lists the newest of something (``limit``)."""
    return click.option(
        "--limit", default=default, show_default=True, type=click.IntRange(min=minimum), help=text
    )
