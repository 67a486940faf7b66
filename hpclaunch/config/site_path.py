"""Where a site's YAML file is, by name or path: no YAML read, no model built (a
:class:`~hpclaunch.ops.session.Session` checks a site it is given at once, cheaply)."""

from __future__ import annotations

from pathlib import Path

from hpclaunch._resources import shipped_dir
from hpclaunch.errors import ConfigError

__all__ = ["resolve_site_path", "site_search_dirs"]


def site_search_dirs() -> list[Path]:
    """Directories where site names are looked up, in order."""
    shipped = shipped_dir("site-configs")
    return [shipped] if shipped else []


def resolve_site_path(name_or_path: str | Path) -> Path:
    """The YAML file of a site name (``local`` → the first ``local.yaml`` of
    :func:`site_search_dirs`) or a path (anything with a ``/`` or a YAML suffix).

    Raises:
        ConfigError: An unknown site name (the message lists the known ones).
    """
    name = str(name_or_path)
    if "/" in name or name.endswith((".yaml", ".yml")):
        return Path(name).expanduser()
    dirs = site_search_dirs()
    for directory in dirs:
        candidate = directory / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
    raise ConfigError(
        f"unknown site {name!r} (looked in {', '.join(str(d) for d in dirs) or 'nowhere'})",
        hint=f"known sites: {', '.join(known) or 'none'}; or pass a path to a site YAML file",
    )
