"""The spec's ``retry:`` in the sidecar: a failed attempt (a user error, an OOM, a lost
controller ...) that the policy (:mod:`hpclaunch.supervise.retry`) retries is requeued, its
start held back by the backoff."""

from __future__ import annotations

import time
from typing import Any

from hpclaunch.supervise.attempt import AttemptControl
from hpclaunch.supervise.requeue import (
    delay_start,
    issue_requeue,
    requeue_target,
    slurm_requeue_delay,
)
from hpclaunch.supervise.retry import RetryPolicy, decide_retry

__all__ = ["retry_failed"]


def retry_failed(
    sc: AttemptControl, reason: str, code: int, history: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Requeue the failed attempt if its ``retry:`` says so. Returns what the attempt's end
    records (``retry``: its number, ``retry_wait``, ``retry_at``), or ``None``: not retried."""
    decision = decide_retry(
        RetryPolicy.from_env(sc.env),
        reason,
        code,
        history,
        no_progress=sc.no_progress(),
        reports_progress=sc.last_step() is not None
        or any(e.get("last_step") is not None for e in history),
    )
    if decision is None:
        return None
    if not decision.retry:
        sc.ledger.append("retry_skipped", why=decision.why)
        return None
    if "SLURM_JOB_ID" not in sc.env:
        sc.ledger.append("retry_failed", why="not inside a Slurm job")
        return None
    target = requeue_target(sc.env)
    # Never sooner than Slurm's own delay: the job's credential must expire first. Read
    # before the requeue, whose SIGTERM to the job's processes would kill the scontrol
    # asking (clean-clone run 33: Slurm's default taken, 121 s instead of 20).
    slurm_delay = slurm_requeue_delay(sc.runner)
    outcome = issue_requeue(sc.runner, target, attempt=sc.config.attempt)
    if not outcome.ok:
        sc.ledger.append("retry_failed", target=target, why=outcome.why, missing=outcome.missing)
        return None
    wait = max(decision.wait, float(slurm_delay))
    at = time.time() + wait
    delayed = delay_start(sc.runner, target, wait) if wait > slurm_delay else None
    why = f"{decision.why} in {wait:g} s"
    if wait > decision.wait:  # the backoff asked for less than Slurm allows
        why += (
            f" (backoff {decision.wait:g} s; Slurm starts a requeued job no sooner than "
            f"{float(slurm_delay):g} s: its credential must expire first)"
        )
    sc.ledger.append(
        "retry_scheduled",
        target=target,
        why=why,
        number=decision.number,
        wait=wait,
        at=round(at, 1),
        **({"delay_failed": delayed.why} if delayed is not None and not delayed.ok else {}),
    )
    sc.output.say(f"hpclaunch: {why} (the job waits in the queue until then)")
    return {"retry": decision.number, "retry_wait": wait, "retry_at": round(at, 1)}
