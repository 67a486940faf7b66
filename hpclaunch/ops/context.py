"""The context of every use case (and every CLI command): the resolved settings, the site,
a runner and a backend, and where warnings go (:class:`hpclaunch.Session` adds the calls).

Each is made on first use, so a call only pays for what it touches.
"""

from __future__ import annotations

import atexit
import functools
import getpass
import os
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hpclaunch.backends import choose_backend
from hpclaunch.config.settings import (
    Settings,
    load_user_config,
    load_user_notify,
    resolve_settings,
    user_config_path,
)
from hpclaunch.config.site_path import resolve_site_path
from hpclaunch.errors import ConfigError
from hpclaunch.jobspec.notify import Notify
from hpclaunch.store.capabilities import load_capabilities, max_age_from_env
from hpclaunch.store.site_cache import load_site_cached
from hpclaunch.transport.local import LocalRunner

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.jobspec.notify import Notify
    from hpclaunch.slurm.capabilities import Capabilities
    from hpclaunch.transport.base import Runner


class Context:
    """Lazily resolved state shared by the calls of one program (or one ``hpclaunch``).

    Settings come in layers, as the CLI's: built-in defaults, the site's ``defaults:``, the
    user config, ``HPCLAUNCH_*`` variables, then the arguments given here.

    Args:
        site: A site name or a site config's path (default: the settings').
        backend: ``cli``, ``pyslurm`` or ``auto`` (default: the settings'), or a backend
            object itself (a test's fake, one of your own).
        remote: ``[user@]host[:port]`` of a login node to reach over SSH.
        quota: ``allow`` or ``strict`` (see ``hpclaunch submit --quota``).
        env: The environment (default: ``os.environ``).
        accept_new_host_key: With ``remote``: record an unknown host key (never a changed one).
        warn: Where warnings go (one line each); default: :func:`warnings.warn`.
        runner: Where Slurm's commands run, instead of this machine or ``remote`` (a test's
            fake, a runner of your own).
    """

    def __init__(
        self,
        site: str | None = None,
        backend: str | Backend | None = None,
        remote: str | None = None,
        *,
        quota: str | None = None,
        env: Mapping[str, str] | None = None,
        accept_new_host_key: bool = False,
        warn: Callable[[str], None] | None = None,
        runner: Runner | None = None,
    ) -> None:
        if site is not None:  # a misspelt site fails here, not at the first submit
            path = resolve_site_path(site)
            if not path.is_file():
                raise ConfigError(
                    f"site config {path} does not exist",
                    hint="give a site name (an unknown one lists the known ones) or the path of "
                    "an existing site YAML file",
                )
        name = backend if isinstance(backend, str) else None
        typed = {"site": site, "backend": name, "remote": remote, "quota": quota}
        self.cli_values: dict[str, str | None] = {k: v for k, v in typed.items() if v}
        self.env = os.environ if env is None else env
        self.accept_new_host_key = accept_new_host_key
        self.warn: Callable[[str], None] = warn or _warn
        self._sites: dict[str, SiteConfig] = {}
        # Given ones take the place of the cached properties that would make them.
        if runner is not None:
            self.__dict__["runner"] = runner
        if backend is not None and not isinstance(backend, str):
            self.__dict__["_backend_choice"] = (backend, "given to the session")

    def set_typed(self, name: str, value: str | None) -> None:
        """A command's own flag for a setting (``submit --quota``), typed or ``None``;
        called before the settings are first read."""
        assert "settings" not in self.__dict__, f"{name} set after the settings were read"
        if value is not None:
            self.cli_values[name] = value

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

    @functools.cached_property
    def user_notify(self) -> Notify | None:
        """The user config's ``notify:``: where the jobs whose spec has none tell their
        events (``None``: nowhere).

        Raises:
            ConfigError: It is wrong (the file and the field named).
        """
        from hpclaunch._validation import load_model  # noqa: PLC0415 (pydantic, yaml)

        path = user_config_path(self.env)
        data = load_user_notify(path)
        if data is None:
            return None
        return load_model(Notify, data, source=f"{path} (notify:)", error_cls=ConfigError)

    def _site_defaults(self, name: str) -> dict[str, str | None]:
        site = self._load_site(name)
        return {
            "backend": site.defaults.backend,
            "remote": site.defaults.remote or site.login,
            "quota": site.defaults.quota,
        }

    def _load_site(self, name: str) -> SiteConfig:
        if name not in self._sites:
            self._sites[name] = load_site_cached(name, self.env)
        return self._sites[name]

    @property
    def site_config(self) -> SiteConfig:
        """The chosen site config."""
        name = self.settings.site.value
        assert name is not None  # the built-in default names one
        return self._load_site(name)

    @property
    def is_remote(self) -> bool:
        """Whether Slurm is reached over SSH (a ``remote`` is set)."""
        return bool(self.settings.remote.value)

    @functools.cached_property
    def runner(self) -> Runner:
        """Where Slurm's commands run: this machine, or the ``remote`` login node over SSH
        (one connection for the whole command, closed at exit)."""
        remote = self.settings.remote.value
        runner: Runner
        if not remote:
            runner = LocalRunner()
        else:
            from hpclaunch.transport.ssh import SSHRunner  # noqa: PLC0415 (SSH)

            runner = SSHRunner(remote, accept_new_host_key=self.accept_new_host_key)
            atexit.register(runner.close)
        runner.slurm_bin = self.site_config.slurm_bin
        return runner

    @functools.cached_property
    def home(self) -> str:
        """The user's home where Slurm runs (asked once over SSH when remote)."""
        if not self.is_remote:  # no runner needed for local Slurm
            return os.path.expanduser("~")
        return self.runner.home()

    def capabilities(self, *, refresh: bool = False) -> Capabilities:
        """The site's cluster capabilities through the backend, from the cache when fresh
        (``$HPCLAUNCH_CAPS_MAX_AGE``); ``refresh``: ask the cluster now.

        Raises:
            HpclaunchError: The cluster could not be asked.
        """
        return load_capabilities(
            self.backend, self.site_config.name, max_age=max_age_from_env(self.env), refresh=refresh
        )

    def close(self) -> None:
        """End the SSH link, if one was opened (a later call opens it again)."""
        runner = self.__dict__.get("runner")
        close = getattr(runner, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @functools.cached_property
    def backend(self) -> Backend:
        """The chosen backend."""
        return self._backend_choice[0]

    @property
    def backend_reason(self) -> str:
        """Which backend is used and why (``auto`` says what it chose), for ``site check``."""
        return self._backend_choice[1]

    @functools.cached_property
    def _backend_choice(self) -> tuple[Backend, str]:
        name = self.settings.backend.value
        assert name is not None  # the built-in default names one
        return choose_backend(name, self.runner, self.site_config)


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=3)


def slurm_user(app: Context) -> str:
    """The user Slurm knows this CLI as: the SSH login name when remote, else ours."""
    if app.is_remote:
        return app.runner.user()

    return getpass.getuser()
