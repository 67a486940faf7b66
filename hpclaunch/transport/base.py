"""The transport interface: run an argv, write a file, read a file, wherever Slurm is."""

from __future__ import annotations

import abc
import getpass
import io
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, TypeVar

__all__ = ["SLURM_COMMANDS", "Command", "CommandResult", "Runner"]

T = TypeVar("T")

#: The Slurm commands a runner's ``slurm_bin`` applies to (hpclaunch runs no others).
SLURM_COMMANDS = frozenset(
    {"sbatch", "squeue", "sacct", "scontrol", "sacctmgr", "sinfo", "sdiag", "scancel", "srun"}
)


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


@dataclass(frozen=True)
class Command:
    """A command as a runner executes it: ``argv`` resolved (:meth:`Runner.resolve`)."""

    argv: tuple[str, ...]
    stdin: str | None = None
    timeout: float | None = None
    env: Mapping[str, str] | None = None


class Runner(abc.ABC):
    """Runs commands and moves files on the machine where Slurm's commands are.

    Implementations never go through a shell: ``argv`` is a list and reaches the program
    as it is.
    """

    #: Where commands run, for messages ("this machine", "user@login1").
    where: str = "this machine"
    #: Whether the commands run on this machine (libraries such as pyslurm work only then).
    is_local: bool = True
    #: The directory of the Slurm commands there (site config ``slurm_bin``); ``None``:
    #: they are found on ``PATH``.
    slurm_bin: str | None = None

    def resolve(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as it is run: a Slurm command from :attr:`slurm_bin` when one is set."""
        args = [str(a) for a in argv]
        if not args:
            raise ValueError("argv must not be empty")
        if self.slurm_bin and args[0] in SLURM_COMMANDS:
            args[0] = posixpath.join(self.slurm_bin, args[0])
        return args

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
        return self._execute(Command(tuple(self.resolve(argv)), stdin, timeout, env))

    @abc.abstractmethod
    def _execute(self, command: Command) -> CommandResult:
        """Run ``command`` as :meth:`run` says (the one method a runner implements for it)."""

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

    @abc.abstractmethod
    def put_bytes(self, path: str, data: bytes, mode: int) -> None:
        """Write ``data`` to ``path`` atomically with mode ``mode`` (parents made 0700).

        Raises:
            TransportError: The file cannot be written.
        """

    @abc.abstractmethod
    def read_bytes(self, path: str, offset: int = 0) -> bytes:
        """The bytes of ``path`` from ``offset`` on.

        Raises:
            TransportError: The file does not exist or cannot be read.
        """

    def read_with(self, path: str, read: Callable[[IO[bytes]], T]) -> T:
        """``read(file)`` on ``path`` opened for reading: a large file is streamed, never
        held whole (here: read whole, then streamed; the local and SSH runners stream).

        Raises:
            TransportError: The file does not exist or cannot be opened.
            Exception: What ``read`` raised.
        """

        return read(io.BytesIO(self.read_bytes(path)))

    @abc.abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Names in the directory ``path``.

        Raises:
            FileNotFoundError: It does not exist.
            TransportError: It cannot be listed.
        """

    def open_tcp(self, host: str, port: int, *, timeout: float = 10) -> Any:
        """A TCP connection to ``host:port`` made from where commands run (a socket-like
        object: ``sendall``, ``recv``, ``close``): ``hpclaunch forward``.

        Raises:
            ConnectError: It cannot be made.
            NotImplementedError: This runner cannot make one.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot open TCP connections")

    def foreign_or_open(self, path: str) -> str | None:
        """Why ``path`` there cannot be trusted to hold what this user wrote (it belongs to
        someone else, or group or others may write it); ``None`` when it is the user's own
        and private, or does not exist. A pickle found there is loaded only when ``None``.

        Asks ``id -u`` and GNU ``stat`` in one command (a runner on this machine looks
        itself); when they cannot answer, that is the reason (never trusted unchecked).
        A symlink is followed (``stat``), as the reader opening it would.
        """
        return self.first_foreign_or_open([path])

    def first_foreign_or_open(self, paths: Sequence[str]) -> str | None:
        """:meth:`foreign_or_open` of each of ``paths`` in turn, the first reason found;
        one command for them all (a runner on this machine looks itself)."""
        # One line per path after the uid: its owner and mode, or "none" where it is not.
        script = (
            'id -u && for p do if [ -e "$p" ]; then stat -c "%u %a" -- "$p" || echo "? ?"; '
            "else echo none; fi; done"
        )
        result = self.run(["sh", "-c", script, "sh", *paths], timeout=30)
        lines = result.stdout.splitlines()
        if not result.ok or len(lines) != len(paths) + 1:
            said = (result.stderr or result.stdout).strip() or "no answer"
            return f"cannot check who owns {', '.join(paths)} on {self.where}: {said}"
        me = lines[0].strip()
        for path, line in zip(paths, lines[1:], strict=True):
            if line == "none":
                continue
            owner, _, mode = line.partition(" ")
            if not mode.isdigit():
                return f"cannot check who owns {path} on {self.where}: stat failed"
            if owner != me:
                return f"{path} belongs to uid {owner}, not to this user (uid {me})"
            if int(mode, 8) & 0o022:
                return f"{path} is writable by others (mode {int(mode, 8):04o})"
        return None

    def home(self) -> str:
        """The user's home directory there (this machine's unless overridden)."""
        return os.path.expanduser("~")

    def user(self) -> str:
        """The login name commands run as there (Slurm knows the user so)."""
        return getpass.getuser()
