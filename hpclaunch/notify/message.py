"""One notification: what happened to which job, as Slack-compatible JSON and as a mail."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["MAX_TAIL_CHARS", "MAX_TAIL_LINES", "Notice", "log_tail_text"]

#: A failure's log tail: at most this many lines, each cut to MAX_LINE_CHARS, in all at most
#: MAX_TAIL_CHARS (Slack cuts a message's text at 40,000 characters; a mail stays readable).
MAX_TAIL_LINES = 20
MAX_LINE_CHARS = 300
MAX_TAIL_CHARS = 3000


@dataclass(frozen=True)
class Notice:
    """One event of one job.

    Attributes:
        key: The event's identity in the job (``start-0``, ``preempted-1``, ``end``): a key is
            sent once.
        event: One of :data:`hpclaunch.jobspec.notify.NOTICE_EVENTS`.
        job_id: Slurm's id (an array task's ``<array>_<task>``).
        job_name: The job's name.
        summary: One line: what happened.
        details: More lines (a failure's log tail, the run time).
        facts: The same as data, for programs reading the webhook.
    """

    key: str
    event: str
    job_id: str
    job_name: str
    summary: str
    details: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The message as text: the summary, then the details."""
        head = f"hpclaunch: job {self.job_id} ({self.job_name}): {self.summary}"
        return "\n".join([head, *self.details])

    def webhook_json(self, sent_from: str) -> bytes:
        """Slack-compatible (``text``), with ``hpclaunch`` for programs."""
        body = {
            "text": self.text,
            "hpclaunch": {
                "event": self.event,
                "key": self.key,
                "job_id": self.job_id,
                "job_name": self.job_name,
                "sent_from": sent_from,
                **dict(self.facts),
            },
        }
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def subject(self) -> str:
        """A mail's subject (one line)."""
        return f"[hpclaunch] job {self.job_id} ({self.job_name}): {self.event}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the outbox keeps it so)."""
        data = asdict(self)
        data["details"] = list(self.details)
        data["facts"] = dict(self.facts)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Notice:
        """From :meth:`to_dict`."""
        return cls(
            key=str(data["key"]),
            event=str(data["event"]),
            job_id=str(data["job_id"]),
            job_name=str(data.get("job_name", "")),
            summary=str(data.get("summary", "")),
            details=tuple(str(x) for x in data.get("details", ())),
            facts=dict(data.get("facts") or {}),
        )


def log_tail_text(lines: Sequence[str]) -> tuple[str, ...]:
    """A failure's last log lines, bounded (:data:`MAX_TAIL_LINES` lines, each cut to
    ``MAX_LINE_CHARS`` characters, :data:`MAX_TAIL_CHARS` in all), control characters out."""
    kept: list[str] = []
    total = 0
    for line in reversed([x for x in lines if x.strip()][-MAX_TAIL_LINES:]):
        clean = "".join(c if c.isprintable() else " " for c in line)
        if len(clean) > MAX_LINE_CHARS:
            clean = clean[: MAX_LINE_CHARS - 1] + "…"
        if total + len(clean) > MAX_TAIL_CHARS:
            break
        kept.append(clean)
        total += len(clean) + 1
    return tuple(reversed(kept))
