"""Files and directories only their owner may touch: made private whatever the umask,
and checked before anything written there is trusted (a pickle is code). Below every
other module: the stores, the transports and the job's own steps use it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["foreign_or_open", "make_private_dirs"]


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
