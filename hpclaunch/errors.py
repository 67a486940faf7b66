"""Every error hpclaunch raises, in one tree.

::

    HpclaunchError            every error says what failed, where, and a .hint with the fix
    ├─ ConfigError            a spec, site or settings file (or value) is wrong      (CLI exit 2)
    │  ├─ SpecError           the job spec file: the file, the field path, what is wrong
    │  └─ PlanError           the spec is valid but cannot run on this site
    ├─ RenderError            the template and the missing variable / unsafe value
    ├─ TransportError         running a command or moving a file failed
    │  ├─ ConnectError        the cluster (or a program on it) cannot be reached
    │  │  └─ ProgramNotFound  e.g. ``sbatch`` is not on PATH
    │  ├─ CommandFailed       non-zero exit; ``.result`` holds argv, exit code, output
    │  ├─ CommandTimeout      no answer within the timeout
    │  └─ ConnectionDropped   the link died while a command ran (it may have run)
    ├─ BackendError           Slurm itself said no
    │  ├─ SubmissionError     sbatch refused the job; ``.result`` holds its answer
    │  ├─ BackendUnavailable  the backend cannot be used (controller down, missing extra)
    │  │  └─ ControllerUnreachable  slurmctld did not answer: nothing was changed
    │  ├─ JobNotFound         no such job
    │  ├─ UpdateRefused       scontrol update refused a change; ``.said`` is its answer
    │  ├─ ResizeRefused       an elastic job cannot be resized as asked
    │  └─ WatchTimeout        jobs did not reach the wanted state in time
    ├─ HistoryError           the local history database cannot be opened or written
    ├─ CallError              a submitted function gave no value back
    │  ├─ JobFailed           its job ended without a result: Slurm's state, exit code, log tail
    │  ├─ RemoteError         it raised an exception that cannot travel back: its text
    │  └─ EnvironmentMismatch the job's Python or packages are not the submitter's
    └─ SupervisorError        inside the job (the sidecar)
       ├─ LaunchFailed
       └─ CheckpointTimeout

Third-party errors (pydantic, yaml, jinja2, subprocess) are translated where they enter
our code, with ``raise ... from exc``. The CLI maps ``ConfigError`` to exit code 2 and any
other ``HpclaunchError`` to exit code 1; anything else is a bug and shows a traceback.

This module imports nothing heavy: the CLI imports it before deciding what else to load.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpclaunch.transport.base import CommandResult

__all__ = [
    "ACCOUNTING_UNAVAILABLE",
    "CONTROLLER_UNREACHABLE",
    "EXIT_UNREACHABLE",
    "BackendError",
    "BackendUnavailable",
    "CallError",
    "CheckpointTimeout",
    "CommandFailed",
    "CommandTimeout",
    "ConfigError",
    "ConnectError",
    "ConnectionDropped",
    "ControllerUnreachable",
    "EnvironmentMismatch",
    "HistoryError",
    "HpclaunchError",
    "JobFailed",
    "JobNotFound",
    "LaunchFailed",
    "PlanError",
    "ProgramNotFound",
    "RemoteError",
    "RenderError",
    "ResizeRefused",
    "SpecError",
    "SubmissionError",
    "SupervisorError",
    "TransportError",
    "WatchTimeout",
    "describe_result",
    "exit_words",
]

#: How many trailing lines of stderr/stdout an error message quotes.
TAIL_LINES = 10


class HpclaunchError(Exception):
    """Base of every hpclaunch error.

    Args:
        message: What failed and where, in one or a few lines.
        hint: What the user can do about it (shown as ``Hint: ...`` by the CLI).
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # Shown under a Python traceback (3.11+: add_note), for library users.
        add_note = getattr(self, "add_note", None)
        if hint and add_note is not None:
            add_note(f"Hint: {hint}")

    def __str__(self) -> str:
        return self.message


class ConfigError(HpclaunchError):
    """A spec, site config or settings value is wrong (the user can fix it in a file)."""


class SpecError(ConfigError):
    """The job spec is invalid: names the file, the field path and what is wrong."""


class PlanError(ConfigError):
    """The spec is valid but cannot run on the chosen site (no partition fits, ...)."""


class RenderError(HpclaunchError):
    """The sbatch template could not be rendered (missing variable, unsafe value)."""


class TransportError(HpclaunchError):
    """Running a command or moving a file to the cluster failed."""


class ConnectError(TransportError):
    """The cluster, or a program on it, cannot be reached."""


class ProgramNotFound(ConnectError):
    """The program to run (e.g. ``sbatch``) does not exist where the runner looks."""

    def __init__(self, program: str, *, where: str = "on PATH") -> None:
        super().__init__(
            f"program {program!r} not found {where}",
            hint=(
                "is Slurm installed here? Point hpclaunch at a cluster with --remote or a "
                "site config (--site), or start the local test cluster with "
                "docker/slurm-cluster/cluster.sh up"
            ),
        )
        self.program = program


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join("    " + line for line in kept)


def describe_result(result: CommandResult) -> str:
    """Return a few lines naming a command, its exit code and the end of its output."""
    parts = [f"command: {_join(result.argv)}", f"exit code: {result.returncode}"]
    if result.stderr.strip():
        parts.append(f"stderr (last lines):\n{_tail(result.stderr)}")
    if result.stdout.strip():
        parts.append(f"stdout (last lines):\n{_tail(result.stdout)}")
    return "\n".join(parts)


def _join(argv: Sequence[str]) -> str:
    return shlex.join(argv)


class CommandFailed(TransportError):
    """A command exited non-zero where success was required.

    Attributes:
        result: The full :class:`~hpclaunch.transport.base.CommandResult`.
    """

    def __init__(self, result: CommandResult, *, hint: str | None = None) -> None:
        super().__init__(f"command failed\n{describe_result(result)}", hint=hint)
        self.result = result


class CommandTimeout(TransportError):
    """A command did not finish within its timeout (it has been killed)."""

    def __init__(
        self, argv: Sequence[str], timeout: float, *, stdout: str = "", stderr: str = ""
    ) -> None:
        msg = f"command timed out after {timeout:g} s: {_join(argv)}"
        if stderr.strip():
            msg += f"\nstderr (last lines):\n{_tail(stderr)}"
        super().__init__(msg, hint="is the Slurm controller overloaded or unreachable?")
        self.argv = tuple(argv)
        self.timeout = timeout


class ConnectionDropped(TransportError):
    """The connection died while a command was running: it may or may not have run.

    Attributes:
        argv: The command that was running.
    """

    def __init__(self, argv: Sequence[str], where: str, *, detail: str = "") -> None:
        msg = f"connection to {where} dropped while running: {_join(argv)}"
        super().__init__(
            msg + (f" ({detail})" if detail else ""),
            hint="the command may have run; check the network and retry (hpclaunch "
            "reconnects on the next command)",
        )
        self.argv = tuple(argv)


class BackendError(HpclaunchError):
    """The scheduler refused or failed an operation."""


class SubmissionError(BackendError):
    """sbatch refused the job.

    Attributes:
        result: sbatch's answer, or ``None`` when it never ran.
    """

    def __init__(
        self, message: str, *, result: CommandResult | None = None, hint: str | None = None
    ) -> None:
        if result is not None:
            message = f"{message}\n{describe_result(result)}"
        super().__init__(message, hint=hint)
        self.result = result


class BackendUnavailable(BackendError):
    """The backend cannot be used: the controller does not answer, or an extra is missing."""


class ControllerUnreachable(BackendUnavailable):
    """slurmctld did not answer (down, restarting, unreachable): nothing was changed.

    The CLI exits with :data:`EXIT_UNREACHABLE` (3) for it, so that a script can tell
    "try again later" from a refusal (1) and bad input (2). The hint, the same from every
    backend, says so.
    """

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="the controller is down or restarting: try again in a minute ('scontrol "
            "ping' says when it is back); a submit retried with the same --submission-id "
            "never makes a second job",
        )


#: The CLI's exit code for :class:`ControllerUnreachable`.
EXIT_UNREACHABLE = 3

#: Slurm's words for a controller it could not reach (slurm_errno strings; every release).
CONTROLLER_UNREACHABLE = "Unable to contact slurm controller"

#: How a job's status begins when accounting (slurmdbd) could not answer for it, whichever
#: backend asked: the CLI then says once that slurmdbd is down.
ACCOUNTING_UNAVAILABLE = "accounting unavailable"


class JobNotFound(BackendError):
    """The scheduler does not know the job."""


class UpdateRefused(BackendError):
    """Slurm refused to change a job (``scontrol update``); ``said`` is its answer."""

    def __init__(self, said: str) -> None:
        super().__init__(said)
        self.said = said


class ResizeRefused(BackendError):
    """An elastic job cannot be resized as asked (not elastic, not one of its sizes,
    ended, or the resize failed)."""


class WatchTimeout(BackendError, TimeoutError):
    """Jobs did not reach the wanted state before the deadline (a ``TimeoutError`` too, as
    ``concurrent.futures`` raises)."""


class HistoryError(HpclaunchError):
    """The local history (``history.sqlite``) cannot be opened, read or written."""


class CallError(HpclaunchError):
    """A function submitted with ``Session.submit(fn, ...)`` gave no value back, or cannot
    be sent (its pickle is too large)."""


class JobFailed(CallError):
    """The function's job ended without a result: out of memory, time limit, cancelled,
    node failure past its requeues, or the process died.

    Attributes:
        job_id: Slurm's job id.
        state: Slurm's final state (``OUT_OF_MEMORY``, ``TIMEOUT``, ``CANCELLED``, ...).
        exit_code: The job's exit code, when Slurm gives one.
        log_tail: The last lines of its last attempt's log.
    """

    def __init__(
        self,
        job_id: str,
        state: str,
        exit_code: int | None,
        log_tail: str,
        *,
        hint: str | None = None,
    ) -> None:
        code = "" if exit_code is None else f", {exit_words(exit_code)}"
        tail = f"\nthe end of its log:\n{log_tail}" if log_tail.strip() else ""
        super().__init__(f"job {job_id} ended {state}{code} without a result{tail}", hint=hint)
        self.job_id = job_id
        self.state = state
        self.exit_code = exit_code
        self.log_tail = log_tail


#: Signals that end a process on their own, by number: an exit code of 128+N is a shell's
#: way of saying the process died of one; 256-N is a Python parent's ``sys.exit(-N)``.
_FATAL_SIGNALS = {
    2: "SIGINT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    15: "SIGTERM",
}


def exit_words(code: int) -> str:
    """``exit code 139 (128+11: the process died of SIGSEGV)``, or ``exit code 3``."""
    if code - 128 in _FATAL_SIGNALS:
        return (
            f"exit code {code} (128+{code - 128}: the process died of {_FATAL_SIGNALS[code - 128]})"
        )
    if 256 - code in _FATAL_SIGNALS and code > 192:
        number = 256 - code
        return f"exit code {code} (256-{number}: the process died of {_FATAL_SIGNALS[number]})"
    return f"exit code {code}"


class RemoteError(CallError):
    """The function raised an exception that could not be pickled back (or unpickled
    here): its type's name, its text and the traceback from the job.

    Attributes:
        type_name: The exception's qualified type name, e.g. ``mylib.ShardError``.
        text: ``str()`` of the exception.
        remote_traceback: The traceback as the job printed it.
    """

    def __init__(self, type_name: str, text: str, remote_traceback: str) -> None:
        super().__init__(f"the function raised {type_name}: {text}")
        self.type_name = type_name
        self.text = text
        self.remote_traceback = remote_traceback


class EnvironmentMismatch(CallError):
    """The job's Python, hpclaunch or packages differ from those the function was
    pickled with, so it was not unpickled; ``differences`` names each one."""

    def __init__(self, differences: Sequence[str], where: str) -> None:
        listed = "\n".join(f"  {d}" for d in differences)
        super().__init__(
            f"the job's environment ({where}) is not the one the function was submitted "
            f"from:\n{listed}",
            hint="run the job with the same interpreter (a venv on a shared filesystem: "
            "venv: in the job options) or install the same versions there",
        )
        self.differences = tuple(differences)
        self.where = where

    def __reduce__(self) -> tuple[type[EnvironmentMismatch], tuple[tuple[str, ...], str]]:
        # Raised in the job and pickled into its result: rebuilt from its own arguments.
        return type(self), (self.differences, self.where)


class SupervisorError(HpclaunchError):
    """Something failed inside the job, in the sidecar."""


class LaunchFailed(SupervisorError):
    """The launcher (srun, torchrun, ...) could not start the training processes."""


class CheckpointTimeout(SupervisorError):
    """The trainer did not commit a checkpoint before the deadline."""
