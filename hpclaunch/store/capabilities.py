"""The capability cache: what :func:`hpclaunch.slurm.capabilities.discover` (or a backend)
found out about a cluster, kept as JSON in ``<cache dir>/<site>.json`` (private) for
``$HPCLAUNCH_CAPS_MAX_AGE`` seconds (default 300), so the checks before each submit cost no
Slurm command while it is fresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from hpclaunch.config.paths import user_dir
from hpclaunch.errors import ConfigError
from hpclaunch.slurm.capabilities import Capabilities, discover
from hpclaunch.store.files import write_private
from hpclaunch.transport.base import Runner

__all__ = [
    "DEFAULT_MAX_AGE",
    "AsksCapabilities",
    "cache_path",
    "load_capabilities",
    "max_age_from_env",
    "read_cache",
    "write_cache",
]

DEFAULT_MAX_AGE = 300.0


def cache_path(site: str, env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/hpclaunch/<site>.json`` (``~/.cache`` when unset)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", site)
    return user_dir("cache", env) / f"{safe}.json"


def max_age_from_env(env: Mapping[str, str] | None = None) -> float:
    """``$HPCLAUNCH_CAPS_MAX_AGE`` seconds, else :data:`DEFAULT_MAX_AGE`."""
    env = os.environ if env is None else env
    raw = env.get("HPCLAUNCH_CAPS_MAX_AGE")
    if raw is None:
        return DEFAULT_MAX_AGE
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"HPCLAUNCH_CAPS_MAX_AGE={raw!r} is not a number of seconds",
            hint="set it to e.g. 300, or 0 to rediscover every time",
        ) from None
    return max(value, 0.0)


class AsksCapabilities(Protocol):
    """A backend (:meth:`hpclaunch.backends.base.Backend.capabilities`)."""

    def capabilities(self, *, now: Callable[[], float] | None = None) -> Capabilities:
        """What the cluster offers, asked now."""
        ...


def load_capabilities(
    source: Runner | AsksCapabilities,
    site: str,
    *,
    max_age: float = DEFAULT_MAX_AGE,
    refresh: bool = False,
    path: Path | None = None,
    now: Callable[[], float] = time.time,
) -> Capabilities:
    """The cached capabilities if younger than ``max_age`` seconds, else :func:`discover`
    them and update the cache (a cache that cannot be written is not an error).

    Args:
        source: Where Slurm's commands run, or the backend to ask
            (:meth:`~hpclaunch.backends.base.Backend.capabilities`).
        site: The site name (names the cache file).
        max_age: Seconds a cache stays fresh.
        refresh: Ignore the cache.
        path: The cache file (default :func:`cache_path`).
        now: The clock (tests pass their own).
    """
    path = cache_path(site) if path is None else path
    if not refresh:
        cached = read_cache(path)
        if cached is not None and 0 <= now() - cached.discovered_at <= max_age:
            return cached
    caps = (
        discover(source, now=now)
        if isinstance(source, Runner)
        else source.capabilities(now=now)  # a backend
    )
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        write_cache(path, caps)
    return caps


def read_cache(path: Path) -> Capabilities | None:
    """The cached capabilities, or ``None`` if absent, unreadable or of another format."""
    try:
        return Capabilities.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cache(path: Path, caps: Capabilities) -> None:
    """Write atomically, private (directory 0700, file 0600)."""
    write_private(path, json.dumps(caps.to_dict(), indent=1))
