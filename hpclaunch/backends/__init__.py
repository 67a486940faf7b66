"""Backends by name. A backend's module is imported only when it is used.

>>> from hpclaunch.backends import create_backend
>>> backend = create_backend("cli", runner, site)  # doctest: +SKIP

A backend that needs an optional dependency names its extra, so a missing one gives an
install hint instead of an ``ImportError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, NamedTuple

from hpclaunch.errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.transport.base import Runner

__all__ = [
    "AUTO",
    "available_backends",
    "choose_backend",
    "create_backend",
    "get_backend_class",
    "register_backend",
]

#: The backend name that picks one: pyslurm where it works, else cli (:func:`choose_backend`).
AUTO = "auto"


class _Entry(NamedTuple):
    target: str | type[Backend]  # "module:Class", or the class itself
    extra: str | None  # the pip extra that provides its dependencies


_REGISTRY: dict[str, _Entry] = {
    "cli": _Entry("hpclaunch.backends.cli:CliBackend", None),
    "pyslurm": _Entry("hpclaunch.backends.pyslurm:PyslurmBackend", "pyslurm"),
    "local": _Entry("hpclaunch.backends.local:LocalBackend", None),
}


def available_backends() -> list[str]:
    """Names of the registered backends, and ``auto``."""
    return sorted([*_REGISTRY, AUTO])


def register_backend(name: str, target: str | type[Backend], *, extra: str | None = None) -> None:
    """Register a backend under ``name`` (a ``"module:Class"`` string or the class)."""
    _REGISTRY[name] = _Entry(target, extra)


def get_backend_class(name: str) -> type[Backend]:
    """Import and return the backend class registered as ``name``.

    Raises:
        ConfigError: No backend has that name (the message lists the known ones).
        BackendUnavailable: Its optional dependency is missing (the hint names the extra).
    """
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ConfigError(
            f"unknown backend {name!r}",
            hint=f"known backends: {', '.join(available_backends())}",
        )
    if not isinstance(entry.target, str):
        return entry.target
    module_name, _, class_name = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] == "hpclaunch":
            raise
        extra = f"pip install 'hpclaunch[{entry.extra}]'" if entry.extra else "reinstall hpclaunch"
        raise BackendUnavailable(
            f"backend {name!r} needs the Python package {exc.name!r}, which is not installed",
            hint=extra,
        ) from exc
    cls: type[Backend] = getattr(module, class_name)
    return cls


def create_backend(name: str, runner: Runner, site: SiteConfig) -> Backend:
    """Create the backend registered as ``name`` (see :func:`get_backend_class`), or the
    one ``auto`` chooses (:func:`choose_backend`)."""
    return choose_backend(name, runner, site)[0]


def choose_backend(name: str, runner: Runner, site: SiteConfig) -> tuple[Backend, str]:
    """The backend ``name`` names, and why it is the one.

    ``auto``: pyslurm when Slurm runs on this machine (not over SSH), pyslurm imports, its
    libslurm loads and it was built for the cluster's Slurm major.minor; else cli, with the
    reason pyslurm was not taken.
    """
    if name != AUTO:
        chosen = get_backend_class(name)(runner, site)
        return chosen, f"{name}: {chosen.describe()}"
    if not runner.is_local:
        why = f"cli: Slurm is reached over SSH ({runner.where}); pyslurm works on the login node"
        return get_backend_class("cli")(runner, site), why
    try:
        backend = get_backend_class("pyslurm")(runner, site)
    except BackendUnavailable as exc:
        first = exc.message.splitlines()[0]
        return get_backend_class("cli")(runner, site), f"cli: pyslurm not usable ({first})"
    return backend, f"pyslurm: built for the cluster's Slurm ({backend.describe()})"
