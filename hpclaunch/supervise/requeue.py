"""Requeue the job, and decide whether to.

``scontrol requeue <id>`` from inside the job puts it back in the queue; Slurm then ends
the running attempt (SIGTERM to the batch shell) and starts it again with
``SLURM_RESTART_COUNT`` one higher after ``cred_expire + 1`` s (slurm.conf(5), 22.05). For
an array task the id must be ``<array job id>_<task id>``: the plain array job id would
requeue every task of the array (scontrol(1)).

Policy (:func:`decide`): preemption is requeued without limit; time limits and node
failures at most ``max_requeues`` times over the job's life; a failure of the user's code
never; and a crash-loop breaker stops requeuing after :data:`NO_PROGRESS_LIMIT` attempts in
a row that made no progress (the trainer's ``progress.json`` step did not move).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpclaunch.errors import CommandTimeout, ProgramNotFound, TransportError
from hpclaunch.transport.base import Runner

__all__ = [
    "CAPPED_REASONS",
    "NO_PROGRESS_LIMIT",
    "Decision",
    "RequeueOutcome",
    "decide",
    "issue_requeue",
    "requeue_target",
    "slurm_restarts",
]

#: Attempts in a row that ended by requeue without progress before the breaker trips.
NO_PROGRESS_LIMIT = 2
#: Reasons whose requeues count against ``max_requeues``.
CAPPED_REASONS = frozenset({"time_limit", "node_failure"})
_RESTARTS = re.compile(r"\bRestarts=(\d+)")


def requeue_target(env: Mapping[str, str]) -> str:
    """``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID``."""
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env["SLURM_JOB_ID"]


@dataclass(frozen=True)
class RequeueOutcome:
    """What ``scontrol requeue`` did.

    Attributes:
        ok: The job is requeued.
        target: The id given to scontrol.
        why: Why not (scontrol's message), when not ``ok``.
        missing: ``scontrol`` is not installed where the sidecar runs.
    """

    ok: bool
    target: str
    why: str | None = None
    missing: bool = False


def issue_requeue(runner: Runner, target: str, *, timeout: float = 20) -> RequeueOutcome:
    """Run ``scontrol requeue <target>``; never raises."""
    try:
        result = runner.run(["scontrol", "requeue", target], timeout=timeout)
    except ProgramNotFound as exc:
        return RequeueOutcome(False, target, f"scontrol not found: {exc.message}", missing=True)
    except CommandTimeout as exc:
        return RequeueOutcome(False, target, exc.message)
    except TransportError as exc:
        return RequeueOutcome(False, target, exc.message)
    if result.returncode != 0:
        why = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        return RequeueOutcome(False, target, why)
    return RequeueOutcome(True, target)


def slurm_restarts(runner: Runner, job_id: str, *, timeout: float = 5) -> int | None:
    """The job's restart count as slurmctld has it now, or ``None`` when unknown.

    ``scontrol show job`` prints ``Restarts=N``. Slurm raises it when the job is requeued,
    *before* it SIGTERMs the running attempt (measured on 22.05: ``scontrol requeue`` gives
    the batch shell SIGTERM with ``Restarts`` already one above ``SLURM_RESTART_COUNT``;
    ``scancel`` leaves it unchanged). So a SIGTERM that comes with a higher count is a
    requeue, not a cancel.
    """
    try:
        result = runner.run(["scontrol", "show", "job", job_id], timeout=timeout)
    except TransportError:
        return None
    match = _RESTARTS.search(result.stdout) if result.returncode == 0 else None
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Decision:
    """Whether to requeue, and why (written to the ledger)."""

    requeue: bool
    why: str


def decide(
    reason: str, history: Sequence[Mapping[str, Any]], *, max_requeues: int, no_progress: bool
) -> Decision:
    """Decide whether an attempt that ended for ``reason`` is requeued.

    Args:
        reason: ``preempted``, ``time_limit``, ``node_failure``, ``user_error``, ...
        history: The ledger's events of the earlier attempts.
        max_requeues: The spec's ``checkpoint.max_requeues`` (0: never requeue).
        no_progress: This attempt made no progress.
    """
    if reason not in ("preempted", *CAPPED_REASONS):
        return Decision(False, f"{reason}: not requeued")
    if max_requeues <= 0:
        return Decision(False, "max_requeues is 0: never requeued")
    ends = [e for e in history if e.get("event") == "attempt_end"]
    if no_progress:
        streak = 1
        for end in reversed(ends):
            if end.get("reason") == "requeued":
                continue  # requeued by a user or operator: no crash, and no progress either
            if not (end.get("requeued") and end.get("no_progress")):
                break
            streak += 1
        if streak >= NO_PROGRESS_LIMIT:
            return Decision(
                False,
                f"crash-loop breaker: {streak} attempts in a row ended without progress",
            )
    if reason in CAPPED_REASONS:
        used = sum(1 for e in ends if e.get("requeued") and e.get("reason") in CAPPED_REASONS)
        if used >= max_requeues:
            return Decision(
                False, f"{reason}: max_requeues ({max_requeues}) used up by earlier attempts"
            )
        return Decision(True, f"{reason}: requeue {used + 1} of {max_requeues}")
    return Decision(True, "preempted: requeued without limit")
