"""Durable file operations: fsync a file or a directory, write JSON atomically.

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
from pathlib import Path
from typing import Any


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


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path``: temp file in the same dir, fsync, rename, fsync dir.

    Readers see either the previous content or the new one, never a partial file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    """Return the parsed JSON in ``path``, or ``None`` if it is missing or not valid JSON."""
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
