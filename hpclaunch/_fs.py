"""Durable file operations: fsync a file or a directory, write a file atomically (the one
helper every writer uses: the runtime's control files, the stores, the local transport, the
nodes' idle states), write JSON atomically.

POSIX ``rename(2)`` is atomic within a filesystem: a reader sees the old name or the new one,
never half a file. Durability needs more: the file's data must be fsynced before the rename,
and the directory after it, or a crash (node failure, power loss) can leave a renamed but
empty file behind. On NFS, ``fsync`` also pushes the client's cached writes to the server, so
other nodes see the data once the rename is visible.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from hpclaunch._private import make_private_dirs

__all__ = ["fsync_dir", "fsync_file", "read_json", "write_atomic", "write_json_atomic"]


def fsync_file(path: Path) -> None:
    """Flush a file's data and metadata to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (new, renamed or removed names) to stable storage."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    write: Callable[[IO[bytes]], object],
    *,
    mode: int = 0o600,
    private_dirs: bool = False,
) -> None:
    """Write ``path`` through ``write(file)``: a temporary file of its own in the same
    directory (created ``mode``, whatever the umask), fsynced, renamed over ``path``, the
    directory fsynced. Readers see the previous content or the new one, never a part; if
    ``write`` raises, nothing is left and ``path`` is unchanged. ``private_dirs``: missing
    directories are made 0700 (else with the umask's default).

    Raises:
        OSError: The directory or file cannot be written.
        Exception: What ``write`` raised.
    """
    if private_dirs:
        make_private_dirs(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: a name no other process or thread writes to, created 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode != 0o600:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` with :func:`write_atomic` (sorted keys, a last
    newline)."""
    text = json.dumps(data, sort_keys=True) + "\n"
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def read_json(path: Path) -> Any:
    """Return the parsed JSON in ``path``, or ``None`` if it is missing or not valid JSON."""
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
