"""The session a command runs with, made when the command runs.

Click runs the root group's callback before a subcommand reads its own arguments, so a
``Session`` made there would be paid for by ``hpclaunch submit --help`` too: the session's
module imports every use case (the spec's models, the template engine, the backends). The
root group keeps the flags; :func:`pass_session` makes the session once, at the first
command that needs it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session

P = ParamSpec("P")
R = TypeVar("R")


def session_of(ctx: click.Context) -> Session:
    """The session of the root group's flags (``ctx.find_root().obj``), made on first use."""
    from hpclaunch.ops.session import Session  # noqa: PLC0415 (each command loads its own)

    root = ctx.find_root()
    if not isinstance(root.obj, Session):
        # A caller may hand in where Slurm's commands run (CliRunner.invoke(..., obj={"runner":
        # ...}): the unit tests' fake Slurm); the flags are the settings' top layer.
        given: dict[str, Any] = root.obj if isinstance(root.obj, dict) else {}
        root.obj = Session(
            site=given.get("site"),
            backend=given.get("backend"),
            remote=given.get("remote"),
            accept_new_host_key=bool(given.get("accept_new_host_key")),
            warn=_echo_warning,
            runner=given.get("runner"),
        )
    return root.obj


def pass_session(command: Callable[Concatenate[Session, P], R]) -> Callable[P, R]:
    """As ``click.pass_obj``, passing the command's :func:`session_of`."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return command(session_of(click.get_current_context()), *args, **kwargs)

    return run


def _echo_warning(message: str) -> None:
    """Warnings on stderr, one line each, as ``Warning: ...``."""
    print(f"Warning: {message}", file=sys.stderr)
