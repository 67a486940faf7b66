"""Is the SSH server still there? ``ServerAliveInterval`` and ``ServerAliveCountMax`` for
paramiko, whose keepalives never notice a missing answer.

A link can go silent without a reset: a NAT or firewall forgets the connection, a laptop
sleeps, a VPN drops. TCP then retransmits for up to ~15 minutes before it gives up, and a
command over the link waits all that time. Every ``interval`` seconds :class:`Liveness`
asks the server for an answer (a ``keepalive@openssh.com`` global request, as ssh does;
OpenSSH answers it with a failure message, which is an answer). When none comes within
``count_max`` intervals it closes the transport, which ends whatever waits on it as a
dropped connection, so a silent link is noticed within ``(count_max + 1) * interval``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import paramiko

__all__ = ["Liveness"]


class Liveness:
    """Watches one transport from a daemon thread until it closes.

    Attributes:
        why: Set when the watcher closed the transport: what to tell the user.
    """

    def __init__(self, transport: paramiko.Transport, interval: float, count_max: int) -> None:
        self.transport = transport
        self.interval = interval
        self.count_max = max(1, count_max)
        self.why: str | None = None
        self._closed = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name="hpclaunch-ssh-alive").start()

    def stop(self) -> None:
        """Stop watching (the runner closes the transport itself)."""
        self._closed.set()

    def _watch(self) -> None:
        limit = self.interval * self.count_max
        while not self._closed.wait(self.interval) and self.transport.is_active():
            answered = threading.Event()
            threading.Thread(
                target=self._ask, args=(answered,), daemon=True, name="hpclaunch-ssh-ask"
            ).start()
            if answered.wait(limit) or self._closed.is_set() or not self.transport.is_active():
                continue
            self.why = (
                f"no answer from the server for {limit:g} s (ServerAliveInterval "
                f"{self.interval:g} x ServerAliveCountMax {self.count_max}): the link went silent"
            )
            self.transport.close()
            return

    def _ask(self, answered: threading.Event) -> None:
        try:
            self.transport.global_request("keepalive@openssh.com", wait=True)
        except Exception:  # a dead link (SSHException, EOFError...): the watcher sees it closed
            return
        answered.set()
