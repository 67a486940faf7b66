"""Each notice sent once, from wherever the network is: the job's ``notify/`` directory.

::

    <job dir>/notify/config.json        where to (the webhook URL: a secret, file 0600)
    <job dir>/notify/keys/<name>        the notice exists (created O_EXCL: made once)
    <job dir>/notify/outbox/<name>.json waiting to be sent
    <job dir>/notify/sending/<name>.json being sent (claimed by a rename)
    <job dir>/notify/sent/<name>        sent: when, and from where
    <job dir>/notify/tried/<name>       the last send that did not go out: when, where, why

A notice is made once (its key file is created exclusively, ``set -C`` in sh: O_EXCL), put
in the outbox, and sent by whoever renames it from ``outbox/`` to ``sending/`` first (a
rename of one file succeeds once): the sidecar on the node right away, or, when the node
could not reach the webhook, the next ``hpclaunch`` command that looks at the job (status,
history, ``submit --wait``), which tries again from where it runs. A send that did not go out
is renamed back. One killed in the middle of sending stays in ``sending/``: it is never sent
again (it may have gone out), so no notice is sent twice.

Every file operation goes through a :class:`~hpclaunch.transport.base.Runner`: the node's
sidecar uses a local one, the login node's command the session's (local, or SSH).
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import socket
from datetime import datetime, timezone
from typing import Any

from hpclaunch.errors import TransportError
from hpclaunch.notify.message import Notice
from hpclaunch.notify.send import NotifyConfig, Sent, send_notice
from hpclaunch.transport.base import Runner

__all__ = ["Outbox", "read_config"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
#: The folders of a notice's states (see the module docstring); ``tried``: failed sends.
_FOLDERS = ("keys", "outbox", "sending", "sent", "tried")


def read_config(runner: Runner, path: str) -> NotifyConfig | None:
    """A job's ``notify/config.json``, or ``None`` (none, or unreadable)."""
    try:
        data = json.loads(runner.read_file(path))
    except (TransportError, OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return NotifyConfig(
        webhook=data.get("webhook"),
        email=data.get("email"),
        smtp=data.get("smtp"),
        events=tuple(data.get("events") or ()),
    )


class Outbox:
    """The ``notify/`` directory ``directory`` (next to ``config.json``), through ``runner``."""

    def __init__(self, runner: Runner, directory: str, config: NotifyConfig) -> None:
        self.runner = runner
        self.dir = directory
        self.config = config
        self._made = False  # the folders below ``dir`` are known to exist

    @classmethod
    def of_job(cls, runner: Runner, config_path: str) -> Outbox | None:
        """The outbox next to ``config_path``; ``None`` when the job notifies nobody."""
        config = read_config(runner, config_path)
        if config is None:
            return None
        return cls(runner, posixpath.dirname(config_path), config)

    def _path(self, folder: str, name: str, suffix: str = "") -> str:
        return posixpath.join(self.dir, folder, name + suffix)

    def _make_folders(self) -> None:
        """The state folders, private, once per outbox (before the first file goes in).

        Raises:
            TransportError: They cannot be made.
        """
        if not self._made:
            folders = [posixpath.join(self.dir, f) for f in _FOLDERS]
            made = self.runner.run(["mkdir", "-p", "-m", "700", "--", *folders], timeout=10)
            if not made.ok:
                raise TransportError(f"cannot make {self.dir}'s folders: {made.stderr.strip()}")
            self._made = True

    def deliver(self, notice: Notice, sent_from: str | None = None) -> Sent | None:
        """Make ``notice`` (once) and send it now; ``None`` when the job does not send this
        event or the notice was made before (by another process: it sends it)."""
        if notice.event not in self.config.events or not self.queue(notice):
            return None
        return self.send(_name(notice), sent_from)

    def queue(self, notice: Notice) -> bool:
        """Put ``notice`` in the outbox unless it was made before; whether it was put."""
        name = _name(notice)
        key = self._path("keys", name)
        try:
            self._make_folders()
            made = self.runner.run(["sh", "-c", 'set -C; : > "$1"', "sh", key], timeout=10)
        except TransportError:
            return False
        if not made.ok:
            return False
        try:
            self.runner.put_file(
                self._path("outbox", name, ".json"), json.dumps(notice.to_dict()), 0o600
            )
        except TransportError:
            return False
        return True

    def pending(self) -> list[str]:
        """The names waiting in the outbox."""
        try:
            names = self.runner.listdir(posixpath.join(self.dir, "outbox"))
        except (FileNotFoundError, TransportError):
            return []
        return sorted(n.removesuffix(".json") for n in names if n.endswith(".json"))

    def flush(self, sent_from: str | None = None) -> list[Sent]:
        """Send what waits in the outbox (another process's failed sends)."""
        return [s for name in self.pending() if (s := self.send(name, sent_from)) is not None]

    def send(self, name: str, sent_from: str | None = None) -> Sent | None:
        """Claim notice ``name`` and send it; ``None`` if another process claimed it."""
        where = sent_from or socket.gethostname()
        waiting, sending = self._path("outbox", name, ".json"), self._path("sending", name, ".json")
        if not self._rename(waiting, sending):
            return None
        try:
            notice = Notice.from_dict(json.loads(self.runner.read_file(sending)))
        except (TransportError, ValueError, KeyError):
            return None  # damaged: left in sending/, never sent
        sent = send_notice(self.config, notice, where)
        if not sent.ok:
            self._rename(sending, waiting)
            self._note(name, "tried", where, sent.why)
            return sent
        self._note(name, "sent", where, "")
        with contextlib.suppress(TransportError):
            self.runner.run(["rm", "-f", "--", sending], timeout=10)
        return sent

    def sent(self) -> dict[str, dict[str, Any]]:
        """Name → when and from where, of the notices sent."""
        out: dict[str, dict[str, Any]] = {}
        try:
            names = self.runner.listdir(posixpath.join(self.dir, "sent"))
        except (FileNotFoundError, TransportError):
            return out
        for name in names:
            try:
                out[name] = json.loads(self.runner.read_file(self._path("sent", name)))
            except (TransportError, ValueError):
                continue
        return out

    def _rename(self, src: str, dst: str) -> bool:
        try:
            self._make_folders()
            return self.runner.run(["mv", "-T", "--", src, dst], timeout=10).ok
        except TransportError:
            return False

    def _note(self, name: str, what: str, where: str, why: str) -> None:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        data = {"at": now, "from": where, **({"why": why} if why else {})}
        folder = "sent" if what == "sent" else "tried"
        with contextlib.suppress(TransportError):
            self.runner.put_file(self._path(folder, name), json.dumps(data), 0o600)


def _name(notice: Notice) -> str:
    """The file name of a notice: its job and key, safe on any filesystem."""
    return _UNSAFE.sub("-", f"{notice.job_id}.{notice.key}")
