"""The CLI's session: :class:`hpclaunch.ops.session.Session` with the global flags as typed,
and warnings printed on stderr."""

from __future__ import annotations

from collections.abc import Mapping

from hpclaunch.ops.context import remote_files, slurm_user
from hpclaunch.ops.session import Session

__all__ = ["App", "remote_files", "slurm_user"]


class App(Session):
    """The CLI's session: the global flags as typed (``None``: not typed), and warnings
    printed on stderr as ``Warning: ...``."""

    def __init__(
        self,
        cli_values: Mapping[str, str | None],
        env: Mapping[str, str] | None = None,
        *,
        accept_new_host_key: bool = False,
    ) -> None:
        super().__init__(env=env, accept_new_host_key=accept_new_host_key, warn=_echo_warning)
        self.cli_values = dict(cli_values)


def _echo_warning(message: str) -> None:
    import sys

    print(f"Warning: {message}", file=sys.stderr)
