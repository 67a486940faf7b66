"""The spec's ``retry:`` inside the job: whether a failed attempt is retried, and when.

The plan passes the policy as ``HPCLAUNCH_RETRY`` (:meth:`hpclaunch.jobspec.retry.Retry.env_value`).
When an attempt fails and the built-in requeue policy (:func:`~hpclaunch.supervise.requeue.decide`)
does not requeue it, the sidecar asks :func:`decide_retry`: an ending the policy names, with
retries left, is retried after ``backoff * 2**(n-1)`` seconds (at most ``max_backoff``). The
sidecar requeues the job and then sets its start time (``scontrol update StartTime=now+N``;
never sooner than Slurm's own requeue delay, which lets the job's credential expire first):
slurmctld keeps a begin time that lies in the future when it finishes the requeue
(``batch_requeue_fini``: ``if (begin_time <= now) begin_time = now + requeue delay``,
src/slurmctld/job_mgr.c, 25.11.7), and a requeued job is already PENDING (its COMPLETING flag
aside), so the update is accepted then, and not before (a running job's start time cannot be
changed: ESLURM_JOB_NOT_PENDING).

The crash-loop breaker stays: a job that reports its progress (``runtime.report_progress`` or
a checkpoint) and was retried :data:`~hpclaunch.supervise.requeue.NO_PROGRESS_LIMIT` times in
a row without moving on is not retried again: it fails the same way at the same step. A job
that reports nothing cannot be judged so; ``times`` and the growing wait bound it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpclaunch.supervise.requeue import NO_PROGRESS_LIMIT, no_progress_streak

__all__ = [
    "OOM",
    "RetryDecision",
    "RetryPolicy",
    "decide_retry",
    "raised_memory",
    "retries_used",
]

#: What an out-of-memory ending leaves in the attempt's log: slurmstepd's OOM kill (cgroup,
#: "Detected 1 oom_kill event"; srun's "task 0: Out Of Memory"), PyTorch's CUDA OOM
#: (``torch.OutOfMemoryError: CUDA out of memory``) and Python's ``MemoryError``.
OOM = re.compile(
    r"oom[_-]kill|Out Of Memory|OutOfMemoryError|CUDA out of memory|^(?:\S+: )?MemoryError\b",
    re.IGNORECASE | re.MULTILINE,
)
#: Endings of the sidecar that the spec's ``job_lost`` names.
_LOST = frozenset({"job_lost", "controller_unreachable"})


@dataclass(frozen=True)
class RetryPolicy:
    """``HPCLAUNCH_RETRY`` read back (see :class:`hpclaunch.jobspec.retry.Retry`)."""

    times: int
    endings: frozenset[str]
    exit_codes: frozenset[int]
    backoff: float = 60.0
    max_backoff: float = 3600.0
    #: After an OOM, the next attempt's memory is the limit enforced times this...
    oom_memory_factor: float | None = None
    #: ...but no more than this (MB: the partition's nodes' memory; ``None``: unknown).
    max_mem_mb: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetryPolicy | None:
        """The job's policy, or ``None`` (no ``retry:``, or a value not written by us)."""
        try:
            data = json.loads(env.get("HPCLAUNCH_RETRY") or "null")
            if not isinstance(data, dict):
                return None
            return cls(
                times=int(data["times"]),
                endings=frozenset(str(e) for e in data.get("endings", ())),
                exit_codes=frozenset(int(c) for c in data.get("exit_codes", ())),
                backoff=float(data.get("backoff", 60)),
                max_backoff=float(data.get("max_backoff", 3600)),
                oom_memory_factor=_number(data.get("oom_memory_factor"), float),
                max_mem_mb=_number(data.get("max_mem_mb"), int),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def names(self, reason: str, exit_code: int | None) -> bool:
        """Whether an attempt that ended ``reason`` with ``exit_code`` is one to retry."""
        if reason in _LOST:
            return "job_lost" in self.endings
        if reason in ("node_failure", "oom"):
            return reason in self.endings or exit_code in self.exit_codes
        if reason == "user_error":
            return "user_error" in self.endings or exit_code in self.exit_codes
        return False

    def wait(self, number: int) -> float:
        """Seconds before retry ``number`` (1, 2, ...)."""
        return float(min(self.backoff * 2 ** max(0, number - 1), self.max_backoff))


def _number(value: Any, kind: type[float] | type[int]) -> Any:
    return None if value is None else kind(value)


def raised_memory(policy: RetryPolicy, limit_mb: int) -> tuple[int, str]:
    """The memory (MB) for the attempt after an OOM whose limit was ``limit_mb``, and the
    words for the ledger: ``limit * oom_memory_factor`` (rounded up), capped by the
    partition's nodes. The same figure as before when the cap is reached already."""
    factor = policy.oom_memory_factor or 1.0
    wanted = -(-int(limit_mb * factor * 1000) // 1000)  # ceil, free of float noise
    cap = policy.max_mem_mb
    if cap is not None and wanted > cap:
        if limit_mb >= cap:
            return limit_mb, (
                f"memory stays {limit_mb} MB: the partition's nodes have {cap} MB "
                "(retry.oom_memory_factor cannot raise it further)"
            )
        return cap, (
            f"memory {limit_mb} -> {cap} MB (x{factor:g} would be {wanted} MB: capped at "
            "the partition's nodes' memory)"
        )
    return wanted, f"memory {limit_mb} -> {wanted} MB (retry.oom_memory_factor x{factor:g})"


@dataclass(frozen=True)
class RetryDecision:
    """Whether to retry, which retry it is, and how long the job waits first."""

    retry: bool
    why: str
    number: int = 0
    wait: float = 0.0


def retries_used(history: Sequence[Mapping[str, Any]]) -> int:
    """Retries made so far (attempts that ended with one)."""
    return sum(1 for e in history if e.get("event") == "attempt_end" and e.get("retry"))


def decide_retry(
    policy: RetryPolicy | None,
    reason: str,
    exit_code: int | None,
    history: Sequence[Mapping[str, Any]],
    *,
    no_progress: bool,
    reports_progress: bool,
) -> RetryDecision | None:
    """The decision for an attempt that ended ``reason`` (``None``: the policy does not name
    that ending, nothing to say).

    Args:
        history: The ledger's events of the earlier attempts.
        no_progress: This attempt's step did not move.
        reports_progress: The job reports steps at all (this attempt or an earlier one).
    """
    if policy is None or not policy.names(reason, exit_code):
        return None
    used = retries_used(history)
    what = f"{reason} (exit code {exit_code})" if exit_code is not None else reason
    if used >= policy.times:
        return RetryDecision(False, f"{what}: retry.times ({policy.times}) used up")
    if reports_progress and no_progress:
        ends = [e for e in history if e.get("event") == "attempt_end"]
        streak = no_progress_streak(ends, "retry")
        if streak >= NO_PROGRESS_LIMIT:
            return RetryDecision(
                False,
                f"{what}: crash-loop breaker: {streak} attempts in a row failed at the same step",
            )
    number = used + 1
    return RetryDecision(
        True, f"{what}: retry {number} of {policy.times}", number, policy.wait(number)
    )
