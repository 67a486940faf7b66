"""When a running job should end, from what its trainer reports
(``hpclaunch.runtime.report_progress(step, total=N)`` → ``control/progress.json``).

The rate is this attempt's: steps since its first report over the time since. The end is
compared with the attempt's time limit (``SLURM_JOB_END_TIME``, which the trainer's process
sees): a job that will not make it is checkpointed and requeued at its limit, so the step it
will reach then is said too. Nothing is polled: the file is read when a command asks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hpclaunch.slurm.times import clock_text

__all__ = ["Eta", "eta_of"]

#: A report older than this (seconds) says the trainer stopped reporting: no ETA.
STALE_AFTER = 15 * 60


@dataclass(frozen=True)
class Eta:
    """A running job's progress and expected end.

    Attributes:
        step, total: Where training is, and the step it ends at.
        steps_per_s: This attempt's rate.
        ends_at: Unix time it should reach ``total`` (``None``: no rate yet).
        limit_at: Unix time of the attempt's time limit (``None``: unknown).
        step_at_limit: The step it reaches at its limit when that comes first.
    """

    step: int
    total: int
    steps_per_s: float | None
    ends_at: float | None
    limit_at: float | None
    step_at_limit: int | None

    @property
    def before_limit(self) -> bool | None:
        """Whether it should end before its time limit (``None``: unknown)."""
        if self.ends_at is None or self.limit_at is None:
            return None
        return self.ends_at <= self.limit_at

    def line(self) -> str:
        """``step 450/1000, ends ~14:20, before its time limit (15:00)``, or a warning."""
        head = f"step {self.step}/{self.total}"
        if self.ends_at is None or self.steps_per_s is None:
            return f"{head} (no rate yet)"
        rate = f"{self.steps_per_s:.3g} steps/s"
        ends = clock_text(self.ends_at)
        if self.limit_at is None:
            return f"{head} at {rate}, ends ~{ends}"
        limit = clock_text(self.limit_at)
        if self.before_limit:
            return f"{head} at {rate}, ends ~{ends}, before its time limit ({limit})"
        return (
            f"{head} at {rate}: it reaches its time limit ({limit}) at about step "
            f"{self.step_at_limit}, then is checkpointed and requeued (this attempt would end "
            f"~{ends})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "before_limit": self.before_limit}


def eta_of(progress: Mapping[str, Any], *, now: float | None = None) -> Eta | None:
    """The ETA ``progress.json`` allows (``None``: no ``total`` reported, or a stale file)."""
    now = time.time() if now is None else now
    step, total, at = progress.get("step"), progress.get("total"), progress.get("updated_at")
    if not isinstance(step, int) or not isinstance(total, int) or total <= 0:
        return None
    if not isinstance(at, (int, float)) or now - at > STALE_AFTER:
        return None
    rate = progress.get("steps_per_s")
    rate = float(rate) if isinstance(rate, (int, float)) and rate > 0 else None
    end = progress.get("job_end")
    limit_at = float(end) if isinstance(end, (int, float)) else None
    ends_at = None if rate is None else at + max(0, total - step) / rate
    at_limit = None
    if rate is not None and limit_at is not None and ends_at is not None and ends_at > limit_at:
        at_limit = min(total, step + int((limit_at - at) * rate))
    return Eta(step, total, rate, ends_at, limit_at, at_limit)
