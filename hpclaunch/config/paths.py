"""Where hpclaunch keeps its own files on this machine: one directory of each kind.

========  ======================================  ==================================
kind      Linux (XDG; the variable wins)          holds
========  ======================================  ==================================
config    ``$XDG_CONFIG_HOME/hpclaunch``          ``config.yaml``
cache     ``$XDG_CACHE_HOME/hpclaunch``           capabilities, compiled templates
data      ``$XDG_DATA_HOME/hpclaunch``            ``history.sqlite``
state     ``$XDG_STATE_HOME/hpclaunch``           sweep records, the arbiter's log
========  ======================================  ==================================

The defaults are platformdirs' (``~/.config``, ``~/.cache``, ``~/.local/share``,
``~/.local/state`` on Linux; ``~/Library/...`` on a Mac, where many run hpclaunch against a
cluster over SSH). ``env`` (the environment; default ``os.environ``) is read for the
``XDG_*_HOME`` variable and ``HOME``, so a session with an environment of its own
(``Session(env=...)``) and the tests see their own directories.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import platformdirs

__all__ = ["Kind", "user_dir"]

Kind = Literal["config", "cache", "data", "state"]


def user_dir(kind: Kind, env: Mapping[str, str] | None = None) -> Path:
    """hpclaunch's directory of ``kind`` (not created here)."""
    env = os.environ if env is None else env
    xdg = env.get(f"XDG_{kind.upper()}_HOME")
    if xdg:
        return Path(xdg) / "hpclaunch"

    # platformdirs reads os.environ; an environment of the caller's own has its own HOME.
    default = Path(getattr(platformdirs, f"user_{kind}_dir")("hpclaunch", appauthor=False))
    home, real_home = env.get("HOME"), os.path.expanduser("~")
    if home and home != real_home and default.is_relative_to(real_home):
        return Path(home) / default.relative_to(real_home)
    return default
