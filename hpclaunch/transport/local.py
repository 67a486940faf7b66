"""Run commands on this machine with :mod:`subprocess` (argv lists, never ``shell=True``)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from hpclaunch._fs import write_atomic
from hpclaunch._private import foreign_or_open
from hpclaunch.errors import CommandTimeout, ConnectError, ProgramNotFound, TransportError
from hpclaunch.transport.base import Command, CommandResult, Runner

T = TypeVar("T")

__all__ = ["LocalRunner"]


class LocalRunner(Runner):
    """A :class:`~hpclaunch.transport.base.Runner` for the machine hpclaunch runs on."""

    where = "this machine"

    def _execute(self, command: Command) -> CommandResult:
        """See :meth:`Runner.run`."""
        args, stdin, timeout, env = list(command.argv), command.stdin, command.timeout, command.env
        full_env = {**os.environ, **env} if env is not None else None
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args,
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=timeout,
                env=full_env,
                check=False,
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise ProgramNotFound(args[0]) from exc
        except PermissionError as exc:
            raise ProgramNotFound(args[0], where="or not executable") from exc
        except subprocess.TimeoutExpired as exc:
            raise CommandTimeout(
                args, timeout or 0.0, stdout=_decode(exc.stdout), stderr=_decode(exc.stderr)
            ) from exc
        return CommandResult(
            argv=tuple(args),
            returncode=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
            duration=time.monotonic() - start,
        )

    def put_file(self, path: str, content: str, mode: int) -> None:
        """See :meth:`Runner.put_file`."""
        self.put_bytes(path, content.encode("utf-8"), mode)

    def read_file(self, path: str) -> str:
        """See :meth:`Runner.read_file`."""
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise TransportError(f"cannot read {path}: {exc.strerror or exc}") from exc

    def put_bytes(self, path: str, data: bytes, mode: int) -> None:
        """See :meth:`Runner.put_bytes`. Writes a temporary file, then renames it."""
        target = Path(path)
        try:
            write_atomic(target, lambda fh: fh.write(data), mode=mode, private_dirs=True)
        except OSError as exc:
            raise TransportError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def read_bytes(self, path: str, offset: int = 0) -> bytes:
        """See :meth:`Runner.read_bytes`."""
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return fh.read()
        except OSError as exc:
            raise TransportError(f"cannot read {path}: {exc.strerror or exc}") from exc

    def read_with(self, path: str, read: Callable[[IO[bytes]], T]) -> T:
        """See :meth:`Runner.read_with`: the file itself, streamed."""
        try:
            fh = open(path, "rb")  # noqa: SIM115 (closed below; only the open is guarded)
        except OSError as exc:
            raise TransportError(f"cannot read {path}: {exc.strerror or exc}") from exc
        with fh:
            return read(fh)

    def open_tcp(self, host: str, port: int, *, timeout: float = 10) -> Any:
        """See :meth:`Runner.open_tcp`: a socket from this machine."""

        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
        sock.settimeout(None)
        return sock

    def foreign_or_open(self, path: str) -> str | None:
        """See :meth:`Runner.foreign_or_open` (one ``lstat`` here)."""
        return foreign_or_open(path)

    def first_foreign_or_open(self, paths: Sequence[str]) -> str | None:
        """See :meth:`Runner.first_foreign_or_open` (an ``lstat`` each here)."""
        for path in paths:
            why = foreign_or_open(path)
            if why is not None:
                return why
        return None

    def listdir(self, path: str) -> list[str]:
        """See :meth:`Runner.listdir`."""
        try:
            return os.listdir(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise TransportError(f"cannot list {path}: {exc.strerror or exc}") from exc


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
