"""When an elastic job should run smaller, and when it should grow: the decisions the
simulator's ``ours-elastic`` policy makes (:mod:`hpclaunch.scheduling.simulate.engine`),
pure, so that the live arbiter can make them with the cluster's state.

Sizes are GPU totals; ``rate`` is the speed at a size relative to the full size (linear
speed-up: ``gpus / full_gpus``). A resize is a restart: a checkpoint (notice + write), the
requeue delay and the restart cost (``restart``, in seconds).
"""

from __future__ import annotations

import math

__all__ = ["growth_saving", "small_is_sooner"]


def small_is_sooner(
    *,
    left: float,
    overhead: float,
    gpus: int,
    full_gpus: int,
    now: float,
    full_at: float,
    min_interval: float,
    restart: float,
) -> bool:
    """Whether starting now at ``gpus`` (and growing to the full size once it is free,
    no sooner than ``min_interval`` after the start) ends before waiting to start at the
    full size at ``full_at`` (``inf``: unknown, so it never waits).

    Args:
        left: Work left, in seconds at the full size.
        overhead: The restart cost this start pays before work advances.
        restart: What a growth costs (seconds without work).
    """
    rate = gpus / full_gpus
    small_only = now + overhead + left / rate
    if math.isinf(full_at):
        return True
    grow_at = max(full_at, now + min_interval)
    done_small = max(0.0, grow_at - now - overhead) * rate
    grown = small_only if done_small >= left else grow_at + restart + left - done_small
    return min(small_only, grown) < full_at + overhead + left


def growth_saving(*, left: float, gpus: int, target: int, full_gpus: int, restart: float) -> float:
    """Seconds a running job saves by restarting at ``target`` GPUs instead of going on at
    ``gpus`` (negative: it would lose)."""
    return left * full_gpus / gpus - (left * full_gpus / target + restart)
