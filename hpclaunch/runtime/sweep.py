"""A sweep task's parameters, and its final metrics for ``hpclaunch sweep status``."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch._fs import write_json_atomic
from hpclaunch.runtime import _dist
from hpclaunch.runtime.control import attempt, job_dir

__all__ = ["report_metrics", "sweep_params"]


def sweep_params() -> dict[str, Any] | None:
    """This task's point of the sweep (``{"lr": 0.01, "batch": 64}``), or ``None`` outside a
    sweep. The same values ``{name}`` placeholders in the command were replaced with."""
    raw = os.environ.get("HPCLAUNCH_SWEEP_PARAMS")
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def report_metrics(metrics: Mapping[str, Any]) -> Path | None:
    """Record this run's final metrics (rank 0 only; a no-op on other ranks).

    Written atomically to ``<job dir>/final-metrics.json``; a later call replaces it (report
    again after a requeue and resume). Values must be numbers, text, booleans or ``None``;
    scalars of numpy/torch (anything with ``.item()``) are converted.

    Returns:
        The file written, or ``None`` on ranks other than 0.

    Raises:
        TypeError: A key is not text or a value is not a scalar.
    """
    if _dist.rank() != 0:
        return None
    clean: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric names must be text, got {key!r}")
        clean[key] = _scalar(key, value)
    path = job_dir() / jobdir.FINAL_METRICS
    data = {"metrics": clean, "reported_at": time.time(), "attempt": attempt()}
    write_json_atomic(path, data)
    return path


def _scalar(key: str, value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no NaN/inf
    raise TypeError(f"metric {key!r}: {value!r} is not a number, text or boolean")
