"""Sending a notice: an HTTP POST of JSON to a webhook, a mail through SMTP or sendmail.

Errors never carry the webhook's URL (a secret: it would reach logs and the ledger): a failed
POST is described by the HTTP status or the kind of network error only.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # urllib, smtplib and email load only when a notice is sent
    from hpclaunch.notify.message import Notice

__all__ = ["NotifyConfig", "Sent", "send_notice"]

#: Seconds a webhook or mail server has to answer.
TIMEOUT = 5.0


@dataclass(frozen=True)
class NotifyConfig:
    """Where a job's notices go (the job directory's private ``notify/config.json``).

    Attributes:
        webhook: The webhook's URL (a secret), or ``None``.
        email: An address, or ``None``.
        smtp: ``host:port`` for the mail; ``None``: sendmail.
        events: The events to send.
    """

    webhook: str | None
    email: str | None
    smtp: str | None
    events: tuple[str, ...]


@dataclass(frozen=True)
class Sent:
    """How a send went: ``ok``, or why not (no URL in it)."""

    ok: bool
    why: str = ""


def send_notice(config: NotifyConfig, notice: Notice, sent_from: str) -> Sent:
    """Send ``notice`` to the webhook and the address of ``config``; ``ok`` only if every one
    took it (a notice that one of them refused is tried again later, whole)."""
    problems: list[str] = []
    if config.webhook:
        problem = _post(config.webhook, notice.webhook_json(sent_from))
        if problem:
            problems.append(f"webhook: {problem}")
    if config.email:
        problem = _mail(config, notice)
        if problem:
            problems.append(f"mail: {problem}")
    return Sent(not problems, "; ".join(problems))


def _post(url: str, body: bytes) -> str:
    import urllib.request  # noqa: PLC0415 (urllib)

    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "hpclaunch"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"not reached ({type(reason).__name__})"
    return "" if 200 <= status < 300 else f"HTTP {status}"


def _mail(config: NotifyConfig, notice: Notice) -> str:
    import smtplib  # noqa: PLC0415 (ssl: only to send mail)
    from email.message import EmailMessage  # noqa: PLC0415 (only to send mail)

    assert config.email is not None
    message = EmailMessage()
    message["To"] = config.email
    message["From"] = config.email
    message["Subject"] = notice.subject()
    message.set_content(notice.text + "\n")
    if config.smtp:
        host, _, port = config.smtp.rpartition(":")
        try:
            with smtplib.SMTP(host, int(port), timeout=TIMEOUT) as server:
                server.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            return f"SMTP {config.smtp}: {type(exc).__name__}"
        return ""
    sendmail = shutil.which("sendmail") or next(
        (p for p in ("/usr/sbin/sendmail", "/usr/lib/sendmail") if os.access(p, os.X_OK)), None
    )
    if sendmail is None:
        return f"no sendmail on {socket.gethostname()} (set notify.smtp: host:port)"
    try:
        done = subprocess.run(
            [sendmail, "-t", "-oi"], input=message.as_bytes(), timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sendmail: {type(exc).__name__}"
    return "" if done.returncode == 0 else f"sendmail exited {done.returncode}"
