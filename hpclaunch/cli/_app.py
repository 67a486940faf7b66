"""What every command needs: the resolved settings, the site, a runner and a backend.

Each is made on first use, so a command only pays for what it touches.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hpclaunch.config.settings import (
    Settings,
    load_user_config,
    resolve_settings,
    user_config_path,
)
from hpclaunch.errors import ConfigError

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.transport.base import Runner


class App:
    """Lazily resolved state shared by the commands of one ``hpclaunch`` invocation.

    Args:
        cli_values: Global flags as typed (``None``: not typed).
        env: The environment (default: ``os.environ``).
    """

    def __init__(
        self, cli_values: Mapping[str, str | None], env: Mapping[str, str] | None = None
    ) -> None:
        self.cli_values = dict(cli_values)
        self.env = os.environ if env is None else env
        self._sites: dict[str, SiteConfig] = {}

    @functools.cached_property
    def settings(self) -> Settings:
        """Settings from all layers (see :mod:`hpclaunch.config.settings`)."""
        path = user_config_path(self.env)
        return resolve_settings(
            cli=self.cli_values,
            env=self.env,
            user=load_user_config(path),
            user_origin=str(path),
            site_defaults=self._site_defaults,
        )

    def _site_defaults(self, name: str) -> dict[str, str | None]:
        defaults = self._load_site(name).defaults
        return {"backend": defaults.backend, "remote": defaults.remote}

    def _load_site(self, name: str) -> SiteConfig:
        if name not in self._sites:
            from hpclaunch.config.site import load_site

            self._sites[name] = load_site(name)
        return self._sites[name]

    @property
    def site(self) -> SiteConfig:
        """The chosen site config."""
        name = self.settings.site.value
        assert name is not None  # the built-in default names one
        return self._load_site(name)

    @functools.cached_property
    def runner(self) -> Runner:
        """Where Slurm's commands run (this machine; SSH comes later)."""
        remote = self.settings.remote
        if remote.value:
            raise ConfigError(
                f"remote {remote.describe()} is set, but the SSH transport is not available yet",
                hint="unset it, and run hpclaunch on a machine that has Slurm's commands",
            )
        from hpclaunch.transport.local import LocalRunner

        return LocalRunner()

    @functools.cached_property
    def backend(self) -> Backend:
        """The chosen backend."""
        from hpclaunch.backends import create_backend

        name = self.settings.backend.value
        assert name is not None  # the built-in default names one
        return create_backend(name, self.runner, self.site)
