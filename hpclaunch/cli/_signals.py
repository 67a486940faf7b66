"""Long-running commands (``arbiter``, ``forward``) stop on Ctrl-C and on kill alike."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM, from now on.

    Handled here, not left to Python's KeyboardInterrupt: a process started in the background
    by a shell without job control inherits SIGINT ignored, and Python then installs no
    handler of its own (seen in a clean-clone run: the test's SIGINT to ``forward`` did
    nothing); and a stop arriving in the middle of a Slurm call ends the loop after it.
    """
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    return stop
