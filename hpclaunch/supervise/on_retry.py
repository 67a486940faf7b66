"""The spec's ``retry:`` in the sidecar: a failed attempt (a user error, an OOM, a lost
controller ...) that the policy (:mod:`hpclaunch.supervise.retry`) retries is requeued, its
start held back by the backoff."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from hpclaunch.supervise.attempt import AttemptControl
from hpclaunch.supervise.requeue import (
    delay_start,
    issue_requeue,
    raise_memory,
    requeue_target,
    slurm_requeue_delay,
)
from hpclaunch.supervise.retry import RetryPolicy, decide_retry, raised_memory

__all__ = ["retry_failed"]


def retry_failed(
    sc: AttemptControl,
    reason: str,
    code: int,
    history: list[dict[str, Any]],
    *,
    mem_limit: int | None = None,
) -> dict[str, Any] | None:
    """Requeue the failed attempt if its ``retry:`` says so (after an OOM, with more memory
    when it has ``oom_memory_factor``; ``mem_limit``: the bytes enforced on this attempt).
    Returns what the attempt's end records (``retry``: its number, ``retry_wait``,
    ``retry_at``, ``retry_mem_mb``), or ``None``: not retried."""
    policy = RetryPolicy.from_env(sc.env)
    decision = decide_retry(
        policy,
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
    raised = (
        _more_memory(sc, policy, target, mem_limit)
        if reason == "oom" and policy is not None and policy.oom_memory_factor
        else {}
    )
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
    return {"retry": decision.number, "retry_wait": wait, "retry_at": round(at, 1), **raised}


def _more_memory(
    sc: AttemptControl, policy: RetryPolicy, target: str, mem_limit: int | None
) -> dict[str, Any]:
    """Raise the requeued job's memory (``retry.oom_memory_factor``); what the attempt's end
    records of it (``retry_mem_mb``), and a ``memory_raised`` event (or ``memory_not_raised``
    with why) in the ledger."""
    limit_mb = _limit_mb(sc.env, mem_limit)
    if limit_mb is None:
        sc.ledger.append(
            "memory_not_raised",
            target=target,
            why="the memory enforced on this attempt is unknown (no job cgroup, no "
            "SLURM_MEM_PER_NODE): the retry asks for what the job asked for",
        )
        return {}
    mb, why = raised_memory(policy, limit_mb)
    if mb == limit_mb:
        sc.ledger.append("memory_not_raised", target=target, mem_mb=mb, why=why)
        return {}
    outcome = raise_memory(sc.runner, target, mb)
    if not outcome.ok:
        sc.ledger.append("memory_not_raised", target=target, why=f"{why}, refused: {outcome.why}")
        return {}
    sc.ledger.append("memory_raised", target=target, mem_mb=mb, was_mb=limit_mb, why=why)
    sc.output.say(f"hpclaunch: out of memory: {why} for the next attempt")
    return {"retry_mem_mb": mb}


def _limit_mb(env: Mapping[str, str], mem_limit: int | None) -> int | None:
    """The memory enforced on this attempt, in MB: the job cgroup's limit, else what Slurm
    says it gave (``SLURM_MEM_PER_NODE``, set when the job asked ``--mem``)."""
    if mem_limit is not None:
        return -(-mem_limit // (1024 * 1024))
    per_node = env.get("SLURM_MEM_PER_NODE", "")
    return int(per_node) if per_node.isdigit() else None
