"""Writing the stores' files: whole or not at all, readable by their owner only."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["foreign_or_open", "make_private_dirs", "write_private"]


def write_private(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` atomically (a temporary file renamed over it: a reader
    sees the old file or the new one, never half of one), mode 0600, its directory created
    0700 if missing.

    Raises:
        OSError: The directory or file cannot be written.
    """
    make_private_dirs(path.parent)
    # mkstemp: a name no other process or thread writes to, created 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode() if isinstance(text, str) else text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_private_dirs(directory: Path) -> None:
    """``mkdir -p`` where every directory created gets mode 0700, whatever the umask
    (``Path.mkdir(mode=..., parents=True)`` gives the mode to the leaf only: under umask
    000 the parents came out 0777); existing directories are left as they are.

    Raises:
        OSError: A directory cannot be made.
    """
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        current = current.parent
    for new in reversed(missing):
        try:
            new.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(new, 0o700)  # mkdir's mode is filtered by the umask


def foreign_or_open(path: Path | str) -> str | None:
    """Why ``path`` cannot be trusted to hold what this user wrote: it belongs to someone
    else, or others may write it (group or world writable, no sticky bit); ``None`` when it
    is this user's own and private, or does not exist.

    A pickle is code: one that another user could plant or replace must never be loaded.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {st.st_mode & 0o7777:04o})"
    return None
