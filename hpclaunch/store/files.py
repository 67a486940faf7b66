"""Writing the stores' files: whole or not at all, readable by their owner only."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from hpclaunch._private import make_private_dirs

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
    make_private_dirs(path.parent)
    # mkstemp: a name no other process or thread writes to, created 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
