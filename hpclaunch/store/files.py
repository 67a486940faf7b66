"""Writing the stores' files: whole or not at all, readable by their owner only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from hpclaunch._fs import write_atomic

__all__ = ["write_private", "write_private_with"]


def write_private(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` atomically (a temporary file renamed over it: a reader
    sees the old file or the new one, never half of one), mode 0600, its directory created
    0700 if missing.

    Raises:
        OSError: The directory or file cannot be written.
    """
    data = text.encode() if isinstance(text, str) else text
    write_private_with(path, lambda fh: fh.write(data))


def write_private_with(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """As :func:`write_private`, the content written by ``write(file)`` (a large pickle
    streamed into the file, never held in memory whole); if ``write`` raises, nothing is
    left and ``path`` is unchanged.

    Raises:
        OSError: The directory or file cannot be written.
        Exception: What ``write`` raised.
    """
    write_atomic(path, write, private_dirs=True)
