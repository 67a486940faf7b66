"""The sidecar's requeues: asked of Slurm after a warning or a node failure, left to Slurm
where it requeues a job it preempts (24.11+), refused by the policy
(:func:`~hpclaunch.supervise.requeue.decide`: the cap, a crash loop), or forbidden when
the work is done. Each returns an :class:`~hpclaunch.supervise.attempt.Ending`."""

from __future__ import annotations

from typing import Any

from hpclaunch.supervise.attempt import (
    EXIT_NOT_REQUEUED,
    EXIT_REQUEUE_FAILED,
    EXIT_REQUEUED,
    EXIT_STOPPED,
    AttemptControl,
    Ending,
    Launch,
)
from hpclaunch.supervise.on_trial import trial_was_pruned
from hpclaunch.supervise.requeue import (
    PACK_MORE_ENV,
    cancel_requeued,
    decide,
    forbid_requeue,
    issue_requeue,
    requeue_target,
    slurm_requeues_on_exit,
)

__all__ = ["finished_at_warning", "node_failed", "requeue"]


def requeue(sc: AttemptControl, reason: str, history: list[dict[str, Any]]) -> Ending:
    """Requeue the job for ``reason`` (``preempted``, ``time_limit``, ``node_failure``) if
    the policy allows: :data:`EXIT_REQUEUED`, else why not."""
    decision = decide(
        reason,
        history,
        max_requeues=sc.config.max_requeues,
        no_progress=sc.no_progress(),
        preemptible=sc.config.preemptible,
    )
    inside = "SLURM_JOB_ID" in sc.env
    target = requeue_target(sc.env) if inside else ""
    # Slurm 24.11+ requeues a job it preempts when the job exits; a requeue of ours on
    # top would make it run once more after it completes (requeue.py's docstring).
    by_slurm = inside and reason == "preempted" and slurm_requeues_on_exit(sc.runner, target)
    if not decision.requeue:
        if by_slurm:
            _forbid(sc, target)
        sc.ledger.append("requeue_skipped", why=decision.why)
        return Ending(EXIT_NOT_REQUEUED, decision.why)
    if not inside:
        sc.ledger.append("requeue_failed", target=None, why="not inside a Slurm job")
        return Ending(EXIT_REQUEUE_FAILED, "not inside a Slurm job")
    if by_slurm:
        sc.ledger.append("requeue_by_slurm", target=target, why=decision.why)
        return Ending(EXIT_REQUEUED)
    outcome = issue_requeue(sc.runner, target, attempt=sc.config.attempt)
    if outcome.ok:
        seen = {"seen": outcome.why} if outcome.why else {}
        sc.ledger.append("requeue_issued", target=outcome.target, why=decision.why, **seen)
        return Ending(EXIT_REQUEUED)
    sc.ledger.append(
        "requeue_failed", target=outcome.target, why=outcome.why, missing=outcome.missing
    )
    return Ending(EXIT_REQUEUE_FAILED, outcome.why)


def node_failed(sc: AttemptControl, launch: Launch, node: str, restarts: int) -> int:
    """A node of the job failed: Slurm already requeued it (NODE_FAIL). The requeue
    counts against ``max_requeues``; past the cap the requeued job is cancelled."""
    decision = decide(
        "node_failure",
        launch.history,
        max_requeues=sc.config.max_requeues,
        no_progress=sc.no_progress(),
        preemptible=sc.config.preemptible,
    )
    why = None
    if not decision.requeue:
        cancelled = cancel_requeued(sc.runner, requeue_target(sc.env))
        sc.ledger.append(
            "requeue_skipped",
            why=decision.why,
            cancelled=cancelled.target,
            ok=cancelled.ok,
            cancel_failed=cancelled.why,
        )
        why = decision.why
    sc.end(
        "node_failure",
        exit_code=launch.proc.returncode,
        requeued=decision.requeue,
        signal="TERM",
        restarts=restarts,
        failed_node=node,
        why=f"node {node} failed: Slurm requeued the job (NODE_FAIL); {decision.why}",
    )
    sc.say_end("node_failure", requeued=decision.requeue, why=why)
    return EXIT_STOPPED


def finished_at_warning(sc: AttemptControl, reason: str) -> int:
    """The launch ended by itself, successfully, as the warning came, before the sidecar
    stopped it and with no checkpoint for the request: the work is done. A requeue would
    run it again, from its last checkpoint or from the start (seen on 22.05 under load:
    a trainer warned at its 150th and last step trained all 150 again). Where Slurm
    itself requeues a preempted job when it exits (24.11+), that requeue is forbidden.

    A point of a packed sweep task with points after it (``HPCLAUNCH_PACK_MORE``) is done,
    but its task is not: the task is requeued as for any warning, and started again it
    skips the points that completed (sweep_pack.py)."""
    ended = "pruned" if trial_was_pruned(sc.control) else "success"
    if sc.env.get(PACK_MORE_ENV) == "1":
        ending = requeue(sc, reason, sc.ledger.history())
        requeued = ending.code == EXIT_REQUEUED
        sc.end(ended, exit_code=0, requeued=requeued, warned=reason, why=ending.why)
        return 0
    if reason == "preempted" and "SLURM_JOB_ID" in sc.env:
        target = requeue_target(sc.env)
        if slurm_requeues_on_exit(sc.runner, target):
            _forbid(sc, target)
    sc.end(ended, exit_code=0, requeued=False, warned=reason)
    return 0


def _forbid(sc: AttemptControl, target: str) -> None:
    """Stop Slurm requeuing the job it preempts when it exits, and say so in the ledger."""
    refused = forbid_requeue(sc.runner, target)
    sc.ledger.append("requeue_forbidden", target=target, ok=refused.ok, why=refused.why)
