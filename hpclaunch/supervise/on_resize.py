"""What the sidecar does when ``hpclaunch resize`` (or the arbiter) asks an elastic job for
another size: checkpoint, requeue it held, update its node count and release it
(:mod:`hpclaunch.supervise.resize`); or refuse, and say why in the ledger."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from hpclaunch.supervise.attempt import (
    EXIT_REQUEUE_FAILED,
    EXIT_REQUEUED,
    AttemptControl,
    Launch,
)
from hpclaunch.supervise.requeue import issue_requeue, requeue_target
from hpclaunch.supervise.resize import elastic_interval, resize_at_requeue

__all__ = ["nodes_now", "on_resize", "resize_refusal", "resize_seconds"]


def on_resize(
    sc: AttemptControl, request: dict[str, Any], launch: Launch, sizes: tuple[int, ...]
) -> int | None:
    """Resize as ``request`` asks and return the sidecar's exit code; ``None``: the request
    was refused (said in the ledger) and the attempt goes on."""
    current = nodes_now(sc.env)
    to = request.get("nodes")
    refused = resize_refusal(to, current, request, launch.history, sizes, sc.env)
    sc.ledger.append(
        "resize_requested",
        from_nodes=current,
        to_nodes=to,
        why=request.get("why"),
        by=request.get("by"),
        refused=refused,
        request_id=request.get("request_id"),
    )
    if refused is not None or not isinstance(to, int):
        return None
    deadline = time.time() + max(1.0, sc.config.resize_wait)
    sc.checkpoint("resize", deadline, launch)
    sc.output.divert(sc.stop_log)  # the steps say they were stopped
    # Stopped before the requeue, not after: Slurm's requeue starts KillWait (SIGTERM, then
    # SIGKILL), and what follows it (the ledger's end, the 'resized' notice) must fit in it.
    # A clean-clone run killed the sidecar mid-send there (3.3 s of stopping, KillWait 5 s,
    # a loaded machine): the notice stayed claimed and was never sent.
    sc.stop(launch)
    target = requeue_target(sc.env)
    outcome = resize_at_requeue(sc.runner, target, to)
    sc.ledger.append(
        "resize_issued" if outcome.held else "resize_failed",
        target=target,
        from_nodes=current,
        to_nodes=to,
        resized=outcome.resized,
        released=outcome.released,
        codes=outcome.codes,
        why=outcome.why,
    )
    if not outcome.held:  # the launch is stopped: requeue it at this size
        plain = issue_requeue(sc.runner, target, attempt=sc.config.attempt)
        sc.end(
            "resize_failed",
            exit_code=launch.proc.returncode,
            requeued=plain.ok,
            from_nodes=current,
            to_nodes=to,
            why=f"scontrol requeuehold failed: {outcome.why}; "
            + ("requeued at the same size" if plain.ok else f"requeue failed: {plain.why}"),
        )
        sc.say_end("resize_failed", requeued=plain.ok, why=outcome.why)
        return EXIT_REQUEUED if plain.ok else EXIT_REQUEUE_FAILED
    sc.end(
        "resized",
        exit_code=launch.proc.returncode,
        requeued=True,
        from_nodes=current,
        to_nodes=to if outcome.resized else current,
        checkpoint_step=sc.committed_step,
    )
    sc.say_end(
        "resized",
        requeued=True,
        why=None if outcome.resized else outcome.why,
        resized=(current, to),
    )
    return EXIT_REQUEUED


def resize_refusal(
    to: Any,
    current: int,
    request: dict[str, Any],
    history: list[dict[str, Any]],
    sizes: tuple[int, ...],
    env: Mapping[str, str],
) -> str | None:
    """Why a resize to ``to`` nodes is not done now; ``None``: it is."""
    if not isinstance(to, int) or isinstance(to, bool):
        return f"not a node count: {request.get('nodes', request.get('invalid'))!r}"
    if to not in sizes:
        return f"{to} nodes is not one of the job's sizes (elastic.nodes {list(sizes)})"
    if to == current:
        return f"the job already runs on {to} nodes"
    if request.get("force"):
        return None
    last = max((e["time"] for e in history if e.get("event") == "resize_issued"), default=0)
    interval = elastic_interval(env)
    if time.time() - last < interval:
        return (
            f"the last resize was {time.time() - last:.0f} s ago, and elastic.min_interval "
            f"is {interval} s (force it with hpclaunch resize --force)"
        )
    return None


def resize_seconds(history: list[dict[str, Any]]) -> float | None:
    """Seconds from the resize request that ended the last attempt to now (this attempt's
    start): what the resize cost, checkpoint and Slurm's restart included. ``None``: the
    last attempt did not end resized."""
    ends = [e for e in history if e.get("event") == "attempt_end"]
    if not ends or ends[-1].get("reason") != "resized":
        return None
    asked = [e for e in history if e.get("event") == "resize_requested" and not e.get("refused")]
    when = asked[-1].get("time") if asked else None
    return round(time.time() - when, 1) if isinstance(when, (int, float)) else None


def nodes_now(env: Mapping[str, str]) -> int:
    """The nodes this attempt runs on (``SLURM_JOB_NUM_NODES``, older ``SLURM_NNODES``)."""
    for name in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        if env.get(name, "").isdigit():
            return int(env[name])
    return 1
