"""The idle guard's stop (the spec's ``idle.stop_after``, or the site's): whether every GPU
of the job has been idle long enough, from what each node's GPU sampler leaves in
``control/idle/<node>.json`` (:mod:`hpclaunch.supervise.gpumon`).

The sidecar asks :func:`idle_for` every few seconds; a node that has not sampled this attempt
(no NVML, or not started) or whose last sample is stale is not idle, so a job is stopped only
when every node of it says so.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from hpclaunch import jobdir

__all__ = ["clear_idle_state", "idle_for"]


def clear_idle_state(control_dir: Path) -> None:
    """Forget the nodes' idle states of an earlier attempt."""
    shutil.rmtree(control_dir / jobdir.IDLE, ignore_errors=True)


def idle_for(control_dir: Path, nodes: Sequence[str], now: float, since: float) -> float | None:
    """Seconds every GPU of the job has been idle, or ``None`` when one node's are busy or
    unknown. ``since``: this attempt's start (older states do not count)."""
    longest: float | None = None
    for node in nodes:
        try:
            state = json.loads((control_dir / jobdir.IDLE / f"{node}.json").read_text())
            began, at = state.get("since"), float(state["at"])
            interval = float(state.get("interval") or 30)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not isinstance(began, (int, float)) or at < since or now - at > 3 * interval + 5:
            return None
        idle = now - max(float(began), since)
        longest = idle if longest is None else min(longest, idle)
    return longest
