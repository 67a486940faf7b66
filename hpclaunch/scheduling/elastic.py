"""When an elastic job should grow: the decision the simulator's ``ours-elastic`` policy
makes (:mod:`hpclaunch.scheduling.simulate.engine`), pure, so that the live arbiter makes it
with the cluster's state (:func:`hpclaunch.scheduling.arbiter.decide.decide_growth`). An
elastic job runs smaller whenever its full size does not fit: no prediction is weighed.

Sizes are GPU totals; ``rate`` is the speed at a size relative to the full size (linear
speed-up: ``gpus / full_gpus``). A resize is a restart: a checkpoint (notice + write), the
requeue delay and the restart cost (``restart``, in seconds).
"""

from __future__ import annotations

__all__ = ["growth_saving"]


def growth_saving(
    *, left: float, gpus: float, target: float, full_gpus: float, restart: float
) -> float:
    """Seconds a running job saves by restarting at ``target`` GPUs instead of going on at
    ``gpus`` (negative: it would lose). Speeds are linear in the three sizes, so measured
    speeds (samples/s) may stand for them: ``left`` is then in seconds at ``full_gpus``'s
    speed."""
    return left * full_gpus / gpus - (left * full_gpus / target + restart)
