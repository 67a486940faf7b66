"""Where hpclaunch finds the files it ships: ``templates/`` and ``site-configs/``.

In a wheel they sit inside the package (hatch ``force-include`` copies the repository's
top-level directories to ``hpclaunch/templates`` and ``hpclaunch/site-configs``). In an
editable install (``pip install -e``) they are the repository's own top-level directories.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped_dir"]

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path | None:
    """Return the shipped directory ``name`` (installed wheel first, then the repo)."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return None
