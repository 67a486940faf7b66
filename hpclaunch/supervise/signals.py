"""Catch the signals Slurm sends the batch shell, and remember them in order.

Slurm 22.05 sends the batch shell (where the sidecar runs):

* ``--signal=B:USR1@T`` (or USR2): T seconds before the time limit, and, only with
  ``SlurmctldParameters=preempt_send_user_signal``, at once when the job is preempted
  (slurm.conf(5)); without it the batch shell hears nothing until the grace time ends;
* SIGTERM: at preemption without a user signal (after GraceTime), at ``scancel``, at the
  time limit, and after ``scontrol requeue``; SIGKILL follows ``KillWait`` seconds later;
* SIGINT: only when a person presses Ctrl-C in an interactive allocation.

The handlers only record the signal; the sidecar's loop decides what to do.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
import weakref
from collections import deque
from dataclasses import dataclass
from types import FrameType, TracebackType

__all__ = ["HANDLED", "Received", "SignalCatcher"]

HANDLED: tuple[signal.Signals, ...] = (
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGTERM,
    signal.SIGINT,
)


@dataclass(frozen=True)
class Received:
    """One caught signal.

    Attributes:
        name: ``USR1``, ``USR2``, ``TERM`` or ``INT``.
        at: When it arrived (unix seconds).
    """

    name: str
    at: float


class SignalCatcher:
    """A context manager that records :data:`HANDLED` signals instead of dying of them.

    The handler touches no lock: it appends to a deque and writes a byte to a pipe that
    :meth:`wait` selects on. A ``threading.Event`` set from the handler deadlocked the
    sidecar: Python runs the handler in the main thread, which may be inside that Event's
    ``wait`` holding its Condition's lock at that instant (seen once in the unit suite, the
    sidecar stuck in ``Condition._acquire_restore`` for good).
    """

    def __init__(self, signals: tuple[signal.Signals, ...] = HANDLED) -> None:
        self._signals = signals
        self._queue: deque[Received] = deque()
        self._old: dict[signal.Signals, object] = {}
        self._wake_read, self._wake_write = os.pipe()
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)
        weakref.finalize(self, _close, self._wake_read, self._wake_write)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._queue.append(Received(signal.Signals(signum).name.removeprefix("SIG"), time.time()))
        with contextlib.suppress(OSError):  # a full pipe: a wake-up is pending already
            os.write(self._wake_write, b"\0")

    def __enter__(self) -> SignalCatcher:
        for sig in self._signals:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]

    def pop(self) -> Received | None:
        """The oldest signal not yet handled, or ``None``."""
        try:
            return self._queue.popleft()
        except IndexError:
            return None

    def wait_pending(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a signal, leaving it queued for
        :meth:`wait`; whether one is queued."""
        if not self._queue:
            self._sleep(timeout)
        return bool(self._queue)

    def wait(self, timeout: float) -> Received | None:
        """Wait up to ``timeout`` seconds for a signal and return it (``None``: none came)."""
        got = self.pop()
        if got is not None:
            return got
        self._sleep(timeout)
        return self.pop()

    def _sleep(self, timeout: float) -> None:
        """Until a signal's byte arrives (one that came since the last look is already
        there: no wake-up is lost) or ``timeout`` passes; then drain the pipe."""
        select.select([self._wake_read], [], [], max(0.0, timeout))
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 4096):
                pass


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
