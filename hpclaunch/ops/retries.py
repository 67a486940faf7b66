"""Jobs waiting for a retry (the spec's ``retry:``): which retry, why, and when the job may
start (``hpclaunch status``), from the job's ledger (``events.jsonl``; read by
:func:`hpclaunch.ops.progress.job_notes`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hpclaunch.slurm.times import clock_text

__all__ = ["RetryWait", "retry_wait"]


@dataclass(frozen=True)
class RetryWait:
    """A job requeued by its retry policy, waiting out its backoff.

    Attributes:
        number: Which retry (1, 2, ...).
        why: The sidecar's words (``user_error (exit code 3): retry 1 of 3 in 60 s``).
        at: When it may start (epoch seconds).
    """

    number: int
    why: str
    at: float

    def line(self, now: float | None = None) -> str:
        """``retried: user_error (exit code 3): retry 1 of 3 in 60 s; may start from 14:05``
        (within the hour, to the second: ``may start at 00:14:20``, not ``00:14`` for a
        backoff of 20 s; ``now``: the clock to compare with, default the wall clock)."""

        now = time.time() if now is None else now
        if self.at <= now:
            return f"retried: {self.why}; may start now"
        if self.at - now < 3600:
            at = time.strftime("%H:%M:%S", time.localtime(self.at))
            return f"retried: {self.why}; may start at {at} (in {self.at - now:.0f} s)"
        return f"retried: {self.why}; may start from {clock_text(self.at, now)}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def retry_wait(ledger: Sequence[Mapping[str, Any]]) -> RetryWait | None:
    """The retry the job waits for, if its last attempt ended with one."""
    ends = [e for e in ledger if e.get("event") == "attempt_end"]
    if not ends or not ends[-1].get("retry"):
        return None
    scheduled = [e for e in ledger if e.get("event") == "retry_scheduled"]
    why = str(scheduled[-1].get("why", "")) if scheduled else ""
    end = ends[-1]
    at = end.get("retry_at")
    return RetryWait(int(end["retry"]), why, float(at) if isinstance(at, (int, float)) else 0.0)
