"""Webhook URLs by name (``hpclaunch notify add NAME``, the URL on standard input): each a
secret in a private file, ``$XDG_CONFIG_HOME/hpclaunch/webhooks/<name>`` (file 0600,
directory 0700), so that a spec names a webhook without holding its URL."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from hpclaunch._private import make_private_dirs
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import ConfigError
from hpclaunch.store.files import write_private

__all__ = [
    "check_url",
    "load_webhook",
    "remove_webhook",
    "save_webhook",
    "webhook_names",
    "webhooks_dir",
]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def webhooks_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the webhooks are kept."""
    return user_dir("config", env) / "webhooks"


def check_url(url: str) -> str:
    """``url`` if it is an http(s) URL on one line.

    Raises:
        ConfigError: It is not (the message never repeats it: it is a secret).
    """
    if not re.match(r"^https?://[^\s/]+", url) or any(c in url for c in "\r\n\x00"):
        raise ConfigError(
            "the webhook URL is not an http:// or https:// URL on one line",
            hint="copy the whole URL your chat service gave you, e.g. "
            "https://hooks.slack.com/services/...",
        )
    return url


def save_webhook(name: str, url: str, directory: Path | None = None) -> Path:
    """Keep ``url`` under ``name`` (replacing one of that name); returns its file.

    Raises:
        ConfigError: A bad name or URL.
    """
    if not _NAME.match(name):
        raise ConfigError(
            f"webhook name {name!r}: letters, digits, '.', '_' and '-' only",
            hint="e.g. lab-slack",
        )
    folder = directory or webhooks_dir()
    path = folder / name
    text = check_url(url.strip()) + "\n"
    try:
        make_private_dirs(folder)
        os.chmod(folder, 0o700)
        write_private(path, text)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def load_webhook(name: str, directory: Path | None = None) -> str:
    """The URL saved as ``name``.

    Raises:
        ConfigError: No such webhook, or its file is readable by others.
    """
    folder = directory or webhooks_dir()
    path = folder / name
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        known = ", ".join(webhook_names(folder)) or "none yet"
        raise ConfigError(
            f"notify.webhook: no webhook named {name!r} in {folder} (saved: {known})",
            hint=f"save it with: hpclaunch notify add {name} (it asks for the URL, or reads it "
            "from standard input)",
        ) from None
    if mode & 0o077:
        raise ConfigError(
            f"{path} is readable by others: a webhook URL is a secret",
            hint=f"chmod 600 {path}",
        )
    return check_url(text)


def remove_webhook(name: str, directory: Path | None = None) -> Path:
    """Forget the webhook ``name``; returns the file removed. Jobs already submitted keep
    their own copy (``notify/config.json``) and still tell it.

    Raises:
        ConfigError: No such webhook.
    """
    folder = directory or webhooks_dir()
    path = folder / name
    if not _NAME.match(name) or not path.is_file():
        known = ", ".join(webhook_names(folder)) or "none"
        raise ConfigError(f"no webhook named {name!r} in {folder}", hint=f"saved webhooks: {known}")
    try:
        path.unlink()
    except OSError as exc:
        raise ConfigError(f"cannot remove {path}: {exc.strerror or exc}") from exc
    return path


def webhook_names(directory: Path | None = None) -> list[str]:
    """The names saved, sorted."""
    folder = directory or webhooks_dir()
    try:
        return sorted(p.name for p in folder.iterdir() if _NAME.match(p.name))
    except OSError:
        return []
