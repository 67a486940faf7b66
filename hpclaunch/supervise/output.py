"""The launch's output, passed to the attempt log until the sidecar stops the launch.

When the sidecar stops a launch for a requeue, torchrun (and accelerate and DeepSpeed,
which run torchrun's agent) answer SIGTERM with ``Received 15 death signal`` warnings and a
~25-line ``SignalException`` traceback per node, then srun adds ``task 0: Exited with exit
code 1``: a preempted attempt's log would end as if it had crashed. The launch writes to a
pipe instead; a thread copies it to the sidecar's stdout (the attempt log) byte for byte,
and from :meth:`OutputGate.divert` on, to a side file: the log then ends with the sidecar's
one line saying what happened.

The copy is unbuffered (``os.read``/``os.write`` of what arrives): the log fills as fast as
with the launch writing to it itself.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["OutputGate"]

_CHUNK = 65536


class OutputGate:
    """A pipe for a child's stdout and stderr, copied to ``target_fd`` until diverted.

    Args:
        target_fd: Where the output goes (the sidecar's stdout: the attempt log).
    """

    def __init__(self, target_fd: int = 1) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self._target = target_fd
        self._side: int | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, name="launch-output", daemon=True)
        self._thread.start()

    def child_started(self) -> None:
        """Close our copy of the write end (the child has its own): EOF comes when the
        launch's last process exits."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def divert(self, path: Path) -> None:
        """From now on, the launch's output goes to ``path`` (appended, mode 0600); a
        second call changes nothing."""
        with self._lock:
            if self._side is None:
                self._side = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def say(self, line: str) -> None:
        """Write one line of the sidecar's own to the target (the attempt log)."""
        with self._lock:
            _write_all(self._target, (line.rstrip("\n") + "\n").encode())

    def close(self, timeout: float = 5.0) -> None:
        """Wait for the copy to reach EOF (every writer gone), then close the files."""
        self.child_started()
        self._thread.join(timeout)
        with self._lock:
            if self._side is not None:
                os.close(self._side)
                self._side = None

    def _pump(self) -> None:
        try:
            while True:
                data = os.read(self.read_fd, _CHUNK)
                if not data:
                    return
                with self._lock:
                    _write_all(self._side if self._side is not None else self._target, data)
        except OSError:
            return
        finally:
            os.close(self.read_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
