"""Checking a server's host key against known_hosts, as OpenSSH does, and accepting a new one.

Never trust on first use silently: an unknown key is refused with its fingerprint (in
OpenSSH's ``SHA256:...`` form, comparable with ``ssh-keygen -lf``) and the command that
accepts it; a key that differs from the recorded one is always refused.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch._private import make_private_dirs
from hpclaunch.errors import ConnectError

if TYPE_CHECKING:
    import paramiko

__all__ = [
    "HostKeyChanged",
    "HostKeyStatus",
    "UnknownHostKey",
    "accept_host_key",
    "check_host_key",
    "fingerprint",
    "known_key_types",
]


class UnknownHostKey(ConnectError):
    """The server's host key is in no known_hosts file.

    Attributes:
        fingerprint: ``SHA256:...`` of the offered key.
    """

    def __init__(self, message: str, *, fingerprint: str, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.fingerprint = fingerprint


class HostKeyChanged(ConnectError):
    """The server offered a key that differs from the one recorded for it."""


class HostKeyStatus(Enum):
    """What known_hosts says about an offered key."""

    KNOWN = "known"
    UNKNOWN = "unknown"
    CHANGED = "changed"


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:<base64, no padding>``, as ``ssh-keygen -l`` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def _load(files: Sequence[str]) -> paramiko.HostKeys:
    import paramiko  # noqa: PLC0415 (paramiko)

    keys = paramiko.HostKeys()
    for name in files:
        if os.path.isfile(name):
            try:
                keys.load(name)
            except (OSError, paramiko.SSHException) as exc:
                raise ConnectError(f"cannot read known_hosts file {name}: {exc}") from exc
    return keys


def check_host_key(
    host: str, key: paramiko.PKey, files: Sequence[str]
) -> tuple[HostKeyStatus, str | None]:
    """Look ``key`` up for ``host`` (``name`` or ``[name]:port``) in ``files``.

    Returns:
        The status, and for CHANGED the file that holds the recorded key.
    """
    for name in files:
        entry = _load([name]).lookup(host)
        if entry is None:
            continue
        recorded = entry.get(key.get_name())
        if recorded is not None:
            if recorded == key:
                return HostKeyStatus.KNOWN, None
            return HostKeyStatus.CHANGED, name
    return HostKeyStatus.UNKNOWN, None


def known_key_types(host: str, files: Sequence[str]) -> list[str]:
    """The key types recorded for ``host``, so the handshake can prefer them (like ssh)."""
    entry = _load(files).lookup(host)
    return list(entry.keys()) if entry is not None else []


def accept_host_key(host: str, key: paramiko.PKey, path: str, *, hashed: bool) -> None:
    """Append ``host``'s ``key`` to the known_hosts file ``path`` (``~/.ssh`` made 0700).

    Args:
        hashed: Write the name hashed (``|1|salt|hash``), as OpenSSH with
            ``HashKnownHosts yes`` (Debian's default in /etc/ssh/ssh_config).
    """
    import paramiko  # noqa: PLC0415 (paramiko)

    name = paramiko.HostKeys.hash_host(host) if hashed else host
    line = f"{name} {key.get_name()} {key.get_base64()}\n"
    target = Path(path)
    try:
        make_private_dirs(target.parent)
        if target.is_file() and target.stat().st_size:
            with target.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":  # a last line without newline: end it first
                    line = "\n" + line
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="ascii") as handle:
            handle.write(line)
    except OSError as exc:
        raise ConnectError(f"cannot write {path}: {exc.strerror or exc}") from exc
