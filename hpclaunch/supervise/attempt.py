"""What the sidecar's handlers share: the running launch (:class:`Launch`), how an attempt
ends (:class:`Ending`, the exit codes), and what a handler may do to the attempt
(:class:`AttemptControl`, which :class:`~hpclaunch.supervise.sidecar.Sidecar` is).

The handlers (``on_resize``, ``on_idle``, ``on_retry``, ``on_requeue``) take an
:class:`AttemptControl`, not the sidecar's class, so they import nothing of the loop that
calls them.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hpclaunch.supervise.ledger import Ledger
from hpclaunch.supervise.output import OutputGate
from hpclaunch.supervise.sidecar_config import SidecarConfig
from hpclaunch.supervise.signals import SignalCatcher
from hpclaunch.transport.base import Runner

__all__ = [
    "EXIT_NOT_REQUEUED",
    "EXIT_REQUEUED",
    "EXIT_REQUEUE_FAILED",
    "EXIT_STOPPED",
    "EXIT_STOPPED_IDLE",
    "MARGIN",
    "POLL",
    "AttemptControl",
    "Ending",
    "Launch",
]

EXIT_REQUEUED = 0
EXIT_REQUEUE_FAILED = 75
EXIT_NOT_REQUEUED = 76
EXIT_STOPPED = 143
#: The idle guard stopped the job (``idle.stop_after``): not requeued, Slurm says FAILED (78 is
#: the batch script's own: no workdir on the node, planning/script_start.py).
EXIT_STOPPED_IDLE = 79
#: Seconds kept back from a deadline for the requeue and the stop.
MARGIN = 2.0
#: Seconds between two looks at the launch, the signals and the control files.
POLL = 0.1


@dataclass
class Launch:
    """The launch running now, the signals caught while it runs, and the ledger's history of
    the attempts before this one (an attempt as accounting saw it is
    :class:`hpclaunch.slurm.jobs.Attempt`)."""

    proc: subprocess.Popen[bytes]
    signals: SignalCatcher
    history: list[dict[str, Any]]


@dataclass(frozen=True)
class Ending:
    """A wanted requeue's outcome: the sidecar's exit code (:data:`EXIT_REQUEUED`,
    :data:`EXIT_NOT_REQUEUED`, :data:`EXIT_REQUEUE_FAILED`) and, when the job was not
    requeued, why not (for the attempt's last line)."""

    code: int
    why: str | None = None

    @property
    def requeued(self) -> bool:
        """Whether the job was requeued (by hpclaunch, or by Slurm as it preempts it)."""
        return self.code == EXIT_REQUEUED


class AttemptControl(Protocol):
    """What a handler does to the running attempt: ask for a checkpoint and wait for it,
    stop the launch, record the attempt's end and say it in the log."""

    config: SidecarConfig
    runner: Runner
    env: dict[str, str]
    ledger: Ledger
    output: OutputGate
    #: The attempt's control directory (the trainer's files: progress, requests, a pruned
    #: trial).
    control: Path

    @property
    def stop_log(self) -> Path:
        """Where the launch's output goes once the sidecar stops it."""
        ...

    @property
    def committed_step(self) -> int | None:
        """The step of the checkpoint committed for this attempt's request, if any."""
        ...

    def checkpoint(
        self, reason: str, deadline: float, launch: Launch, *, time_left: float | None = None
    ) -> None:
        """Ask the trainer for a checkpoint and wait for it until ``deadline``."""
        ...

    def stop(self, launch: Launch, timeout: float | None = None) -> None:
        """Stop the launch's process group."""
        ...

    def end(self, reason: str, *, exit_code: int | None, requeued: bool, **extra: Any) -> None:
        """Record the attempt's end in the ledger."""
        ...

    def say_end(
        self,
        reason: str,
        requeued: bool,
        why: str | None = None,
        *,
        resized: tuple[int, int] | None = None,
    ) -> None:
        """Write the attempt's last line in its log."""
        ...

    def last_step(self) -> int | None:
        """The newest step the trainer reported or committed."""
        ...

    def no_progress(self) -> bool:
        """Whether this attempt went no step further than where it started."""
        ...
