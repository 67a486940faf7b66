"""The transport interface: run an argv, write a file, read a file, wherever Slurm is."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CommandResult", "Runner"]


@dataclass(frozen=True)
class CommandResult:
    """What a finished command did.

    Attributes:
        argv: The command as run.
        returncode: Its exit status (negative: killed by that signal).
        stdout: Its standard output, decoded as UTF-8 (bad bytes replaced).
        stderr: Its standard error, decoded likewise.
        duration: Wall-clock seconds it took.
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether it exited 0."""
        return self.returncode == 0


class Runner(abc.ABC):
    """Runs commands and moves files on the machine where Slurm's commands are.

    Implementations never go through a shell: ``argv`` is a list and reaches the program
    as it is.
    """

    #: Where commands run, for messages ("this machine", "user@login1").
    where: str = "this machine"

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run ``argv`` and wait for it.

        Args:
            argv: Program and arguments.
            stdin: Text to feed on standard input (``None``: no input).
            timeout: Seconds to wait before killing it (``None``: wait forever).
            env: Variables to add to (or replace in) the environment it inherits.

        Returns:
            The result, whatever the exit status: a non-zero exit is not an exception.

        Raises:
            CommandTimeout: It did not finish within ``timeout`` (it was killed).
            ProgramNotFound: ``argv[0]`` does not exist there.
            ConnectError: The machine cannot be reached.
        """

    @abc.abstractmethod
    def put_file(self, path: str, content: str, mode: int) -> None:
        """Write ``content`` to ``path`` atomically with permission bits ``mode``.

        Missing parent directories are created with mode 0o700.

        Raises:
            TransportError: The file cannot be written.
        """

    @abc.abstractmethod
    def read_file(self, path: str) -> str:
        """Return the text of ``path``.

        Raises:
            TransportError: The file does not exist or cannot be read.
        """
