"""Where an SSH destination really is: ``[user@]host[:port]`` plus ``~/.ssh/config``.

Read with :class:`paramiko.config.SSHConfig`, as ``ssh`` would: ``Host`` aliases,
``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ProxyJump``, ``UserKnownHostsFile``,
``GlobalKnownHostsFile``, ``HashKnownHosts``, ``ConnectTimeout``, ``ServerAliveInterval`` and
``ServerAliveCountMax`` (:mod:`hpclaunch.transport.liveness`). Values typed in the
destination (``user@``, ``:port``) win over the file, like ``ssh user@alias``. The system file
(``/etc/ssh/ssh_config``) is read after the user's: for each option the first value found wins.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch.errors import ConfigError

__all__ = ["SSHTarget", "parse_destination", "resolve_target", "ssh_config_paths"]

#: Overrides the user's ssh config file (tests, or a config kept elsewhere).
CONFIG_ENV = "HPCLAUNCH_SSH_CONFIG"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
DEFAULT_IDENTITIES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
DEFAULT_CONNECT_TIMEOUT = 15.0
#: ssh's default is 0 (never ask); hpclaunch asks every 15 s and gives up after 3 misses,
#: so a silent link fails a command within a minute instead of TCP's ~15.
DEFAULT_ALIVE_INTERVAL = 15
DEFAULT_ALIVE_COUNT_MAX = 3


@dataclass(frozen=True)
class SSHTarget:
    """One SSH hop, fully resolved.

    Attributes:
        destination: As the user wrote it (for messages and hints).
        hostname: What to connect to (``HostName``, else the host as written).
        user: Login name.
        port: TCP port.
        identity_files: Private key files to try after the agent's keys (expanded).
        proxy_jump: ``ProxyJump`` destinations, outermost first (empty: direct).
        known_hosts: User known_hosts files (the first one receives accepted keys).
        global_known_hosts: System known_hosts files (read only).
        hash_known_hosts: Whether accepted keys are written hashed (``HashKnownHosts``).
        connect_timeout: Seconds to wait for TCP and the SSH handshake.
        alive_interval: Seconds between liveness questions to the server (0: none).
        alive_count_max: Intervals without an answer before the link counts as dead.
    """

    destination: str
    hostname: str
    user: str
    port: int = 22
    identity_files: tuple[str, ...] = ()
    proxy_jump: tuple[str, ...] = ()
    known_hosts: tuple[str, ...] = field(default_factory=tuple)
    global_known_hosts: tuple[str, ...] = field(default_factory=tuple)
    hash_known_hosts: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    alive_interval: float = DEFAULT_ALIVE_INTERVAL
    alive_count_max: int = DEFAULT_ALIVE_COUNT_MAX

    @property
    def known_hosts_name(self) -> str:
        """The name known_hosts files use: ``host``, or ``[host]:port`` off port 22."""
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    def __str__(self) -> str:
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.user}@{self.hostname}{port}"


def parse_destination(destination: str) -> tuple[str | None, str, int | None]:
    """Split ``[ssh://][user@]host[:port]`` into (user, host, port).

    Raises:
        ConfigError: Not such a destination.
    """
    text = destination.strip()
    text = text.removeprefix("ssh://")
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
    port: int | None = None
    if text.startswith("["):  # [host]:port, for IPv6 literals
        host, _, rest = text[1:].partition("]")
        if rest.startswith(":"):
            port = _port(rest[1:], destination)
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        port = _port(port_text, destination)
    else:
        host = text
    if not host or (user is not None and not user) or any(c.isspace() for c in host):
        raise ConfigError(
            f"remote {destination!r} is not [user@]host[:port]",
            hint="e.g. --remote alice@login.cluster.org, or a Host alias from ~/.ssh/config",
        )
    return user, host, port


def _port(text: str, destination: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"remote {destination!r}: bad port {text!r}")
    return int(text)


def ssh_config_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """The ssh config files read, highest priority first (missing ones are skipped later)."""
    env = os.environ if env is None else env
    user = env.get(CONFIG_ENV) or os.path.expanduser("~/.ssh/config")
    return [Path(user), Path(SYSTEM_CONFIG)]


def resolve_target(destination: str, *, config_files: Sequence[Path] | None = None) -> SSHTarget:
    """Resolve ``destination`` through the ssh config files.

    Args:
        destination: ``[user@]host[:port]`` or a ``Host`` alias.
        config_files: Highest priority first (default: :func:`ssh_config_paths`).

    Raises:
        ConfigError: The destination or a config file cannot be read.
    """
    user, host, port = parse_destination(destination)
    options = _lookup(host, ssh_config_paths() if config_files is None else config_files)
    hostname = str(options.get("hostname") or host)
    jump = str(options.get("proxyjump") or "")
    return SSHTarget(
        destination=destination,
        hostname=hostname,
        user=user or str(options.get("user") or getpass.getuser()),
        port=port or _int(options.get("port"), 22, destination),
        identity_files=_paths(options.get("identityfile")) or _paths(DEFAULT_IDENTITIES),
        proxy_jump=tuple(j.strip() for j in jump.split(",") if j.strip())
        if jump.lower() != "none"
        else (),
        known_hosts=_paths(_words(options.get("userknownhostsfile")) or DEFAULT_KNOWN_HOSTS),
        global_known_hosts=_paths(
            _words(options.get("globalknownhostsfile")) or DEFAULT_GLOBAL_KNOWN_HOSTS
        ),
        hash_known_hosts=str(options.get("hashknownhosts", "no")).lower() == "yes",
        connect_timeout=float(
            _int(options.get("connecttimeout"), int(DEFAULT_CONNECT_TIMEOUT), destination)
        ),
        alive_interval=float(
            _int(options.get("serveraliveinterval"), DEFAULT_ALIVE_INTERVAL, destination)
        ),
        alive_count_max=_int(
            options.get("serveralivecountmax"), DEFAULT_ALIVE_COUNT_MAX, destination
        ),
    )


def _lookup(host: str, config_files: Sequence[Path]) -> dict[str, Any]:
    """Merge each file's answer for ``host``; an earlier file wins, as with ``ssh -F``."""
    import paramiko  # noqa: PLC0415 (paramiko)

    merged: dict[str, Any] = {}
    for path in config_files:
        if not path.is_file():
            continue
        try:
            config = paramiko.SSHConfig.from_path(str(path))
            answer = dict(config.lookup(host))
        except (OSError, paramiko.SSHException, ValueError) as exc:
            raise ConfigError(f"cannot read ssh config {path}: {exc}") from exc
        if answer.get("hostname") == host:  # paramiko fills it in; let a later file set it
            del answer["hostname"]
        for key, value in answer.items():
            merged.setdefault(key, value)
    return merged


def _words(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, list):
        return tuple(w for v in value for w in str(v).split())
    return tuple(str(value).split())


def _paths(values: Any) -> tuple[str, ...]:
    items = [values] if isinstance(values, str) else list(values or ())
    return tuple(os.path.expanduser(str(v)) for v in items)


def _int(value: Any, default: int, destination: str) -> int:
    if value is None:
        return default
    try:
        return int(str(value))
    except ValueError as exc:
        raise ConfigError(f"ssh config for {destination!r}: not a number: {value!r}") from exc
