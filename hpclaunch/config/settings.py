"""Where hpclaunch's own settings come from, and in which order.

Lowest to highest precedence::

    built-in defaults < site YAML ``defaults:`` < user YAML < $HPCLAUNCH_* < CLI flags typed

* the site is chosen by ``--site`` / ``$HPCLAUNCH_SITE`` / the user YAML's ``site:`` (a site
  cannot choose itself); its ``defaults:`` section then suggests the other settings;
* the user YAML is ``$XDG_CONFIG_HOME/hpclaunch/config.yaml`` (``~/.config/...`` when
  ``XDG_CONFIG_HOME`` is unset);
* environment variables are ``HPCLAUNCH_SITE``, ``HPCLAUNCH_BACKEND``, ``HPCLAUNCH_REMOTE``,
  ``HPCLAUNCH_QUOTA``;
* only CLI flags the user actually typed count (not click defaults).

Every value remembers where it came from (:class:`Sourced`), for ``config show --sources``.
This module is pure apart from reading the user file; it does not import pydantic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hpclaunch.config.paths import user_dir
from hpclaunch.errors import ConfigError

__all__ = [
    "DEFAULTS",
    "ENV_PREFIX",
    "SETTING_NAMES",
    "Settings",
    "Source",
    "Sourced",
    "load_user_config",
    "load_user_notify",
    "resolve_settings",
    "user_config_path",
]

Source = Literal["default", "site", "user", "env", "cli"]
SETTING_NAMES = ("site", "backend", "remote", "quota")
#: Keys of the user YAML that are no setting: ``notify:``, the default of specs without one.
USER_SECTIONS = ("notify",)
ENV_PREFIX = "HPCLAUNCH_"
DEFAULTS: Mapping[str, str | None] = {
    "site": "local",
    "backend": "cli",
    "remote": None,
    "quota": "allow",
}
#: The values a setting may take, where they are few (checked when the settings resolve).
CHOICES: Mapping[str, tuple[str, ...]] = {"quota": ("allow", "strict")}


@dataclass(frozen=True)
class Sourced:
    """A setting's value and the layer it came from (``source`` names the file for YAML)."""

    value: str | None
    source: Source
    origin: str = ""

    def said_by(self, name: str) -> str:
        """Where the value of setting ``name`` came from, in words: ``the --backend option``,
        ``HPCLAUNCH_BACKEND``, ``the user config ~/.config/hpclaunch/config.yaml``, ..."""
        return {
            "cli": f"the --{name} option",
            "env": f"{ENV_PREFIX}{name.upper()}",
            "user": f"the user config {self.origin}".rstrip(),
            "site": f"the defaults of site {self.origin}".rstrip(),
            "default": "the default",
        }[self.source]

    def describe(self) -> str:
        """E.g. ``'cli' (from env HPCLAUNCH_BACKEND)``."""
        where = f" {self.origin}" if self.origin else ""
        return f"{self.value!r} (from {self.source}{where})"


@dataclass(frozen=True)
class Settings:
    """The resolved settings.

    Attributes:
        site: Site name or path to a site YAML.
        backend: Backend name (see :func:`hpclaunch.backends.available_backends`).
        remote: ``[user@]host[:port]`` (or an ssh config alias) to reach the cluster through.
        quota: ``allow`` (a job beyond its project's free guarantee runs over-quota,
            preemptible) or ``strict`` (it waits in-quota); see :mod:`hpclaunch.planning.quota`.
    """

    site: Sourced
    backend: Sourced
    remote: Sourced
    quota: Sourced = Sourced("allow", "default")

    def items(self) -> list[tuple[str, Sourced]]:
        """(name, Sourced) for every setting, in a stable order."""
        return [(name, getattr(self, name)) for name in SETTING_NAMES]


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/hpclaunch/config.yaml``, or ``~/.config/hpclaunch/config.yaml``."""
    return user_dir("config", env) / "config.yaml"


def load_user_config(path: Path) -> dict[str, str]:
    """Read the user YAML (missing file: no settings). Unknown keys are a ConfigError."""
    if not path.is_file():
        return {}
    from hpclaunch._validation import read_yaml_mapping  # noqa: PLC0415 (pydantic, yaml)

    data = read_yaml_mapping(path, ConfigError, "user config")
    unknown = sorted(set(data) - set(SETTING_NAMES) - set(USER_SECTIONS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"valid keys: {', '.join((*SETTING_NAMES, *USER_SECTIONS))}",
            hint="rename or remove them",
        )
    out: dict[str, str] = {}
    for key, value in data.items():
        if value is None or key in USER_SECTIONS:
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {key}: expected a string, got {value!r}")
        out[key] = value
    return out


def load_user_notify(path: Path) -> dict[str, object] | None:
    """The user YAML's ``notify:`` (the default of specs without one), unvalidated, or
    ``None``; :meth:`hpclaunch.ops.context.Context.user_notify` validates it."""
    if not path.is_file():
        return None
    from hpclaunch._validation import read_yaml_mapping  # noqa: PLC0415 (pydantic, yaml)

    value = read_yaml_mapping(path, ConfigError, "user config").get("notify")
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{path}: notify: expected a mapping, e.g. notify: {{webhook: lab}}")
    return value


def resolve_settings(
    *,
    cli: Mapping[str, str | None],
    env: Mapping[str, str],
    user: Mapping[str, str],
    user_origin: str = "",
    site_defaults: Callable[[str], Mapping[str, str | None]] | None = None,
) -> Settings:
    """Merge the layers into :class:`Settings`.

    Args:
        cli: Values of flags the user typed (``None``: not typed).
        env: The environment (only ``HPCLAUNCH_*`` names are read).
        user: The user YAML's values (see :func:`load_user_config`).
        user_origin: The user YAML's path, for :meth:`Sourced.describe`.
        site_defaults: Given the chosen site, return its suggested settings; called once.
    """
    layers: list[tuple[Source, str, Mapping[str, str | None]]] = [
        ("default", "", DEFAULTS),
        ("user", user_origin, user),
        ("env", "", {n: env.get(ENV_PREFIX + n.upper()) for n in SETTING_NAMES}),
        ("cli", "", cli),
    ]
    site = _pick("site", layers)
    if site_defaults is not None and site.value is not None:
        suggested = {k: v for k, v in site_defaults(site.value).items() if k != "site"}
        layers.insert(1, ("site", site.value, suggested))
    picked = {name: _pick(name, layers) for name in SETTING_NAMES if name != "site"}
    for name, allowed in CHOICES.items():
        chosen = picked[name]
        if chosen.value not in allowed:
            where = f" (from {chosen.source}{' ' + chosen.origin if chosen.origin else ''})"
            raise ConfigError(
                f"{name}: {chosen.value!r} is not one of {', '.join(allowed)}{where}",
                hint=f"set {name} to one of: {', '.join(allowed)}",
            )
    return Settings(site=site, **picked)


def _pick(name: str, layers: list[tuple[Source, str, Mapping[str, str | None]]]) -> Sourced:
    chosen = Sourced(None, "default")
    for source, origin, values in layers:
        value = values.get(name)
        if value is not None and value != "":
            where = f"{ENV_PREFIX}{name.upper()}" if source == "env" else origin
            chosen = Sourced(value, source, where)
    return chosen
