"""An adaptive sweep's trial as the trainer sees it: the metric reported on the way (to the
study's pruner) and whether to stop.

The sweep task that started this process asked the study for a trial and exported
``HPCLAUNCH_STUDY`` (the study's description) and ``HPCLAUNCH_TRIAL`` (its number). Each
``runtime.report_progress(step, metrics={...})`` with the study's metric in it reports that
value at ``step`` (rank 0); when the pruner says the trial falls behind, rank 0 writes
``trial-pruned.json`` in the control directory and :func:`should_stop` turns true. The
trainer then ends cleanly (exit 0): the sidecar tells the study the trial was pruned and
the task ends, freeing its GPUs for the array's next task.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from hpclaunch import jobdir
from hpclaunch._fs import write_json_atomic
from hpclaunch.runtime import _dist
from hpclaunch.runtime._paths import control_dir
from hpclaunch.study.config import StudyConfig, read_study

__all__ = ["report_trial", "should_stop", "trial_number"]


class _Trial:
    def __init__(self) -> None:
        self.config: StudyConfig | None = None
        self.warned = False
        self.pruned = False


_TRIAL = _Trial()


def trial_number() -> int | None:
    """This process's trial of an adaptive sweep, or ``None`` outside one."""
    raw = os.environ.get("HPCLAUNCH_TRIAL", "")
    return int(raw) if raw.isdigit() else None


def _config() -> StudyConfig | None:
    if _TRIAL.config is None:
        path = os.environ.get("HPCLAUNCH_STUDY")
        if not path or trial_number() is None:
            return None
        _TRIAL.config = read_study(path)
    return _TRIAL.config


def report_trial(step: int, metrics: Mapping[str, Any]) -> bool:
    """Report the study's metric among ``metrics`` at ``step`` (rank 0; other ranks and
    processes outside a study do nothing); whether the trial is to stop now."""
    config, number = _config(), trial_number()
    if config is None or number is None or _dist.rank() != 0:
        return False
    if config.metric not in metrics:
        if not _TRIAL.warned:
            _TRIAL.warned = True
            print(
                f"hpclaunch: the study optimises {config.metric!r}, which this report lacks "
                f"(it has {', '.join(sorted(metrics)) or 'nothing'}): report_progress(step, "
                f"metrics={{{config.metric!r}: value}}) lets early termination judge the trial",
                file=sys.stderr,
                flush=True,
            )
        return _TRIAL.pruned
    value = float(metrics[config.metric])
    if not math.isfinite(value):
        return _TRIAL.pruned
    from hpclaunch.study import engine  # noqa: PLC0415 (optuna: only in a study's trial)

    if engine.report(config, number, int(step), value) and not _TRIAL.pruned:
        _TRIAL.pruned = True
        write_json_atomic(
            control_dir() / jobdir.TRIAL_PRUNED,
            {"trial": number, "step": int(step), "value": value, "time": time.time()},
        )
    return _TRIAL.pruned


def should_stop() -> bool:
    """Whether the study stopped this trial (early termination): end training now, cleanly.

    **Collective** when torch.distributed is initialized, like
    :func:`~hpclaunch.runtime.should_checkpoint`: every rank calls it at the same steps
    (after :func:`~hpclaunch.runtime.report_progress`); the ranks agree through a MAX
    reduction, so all of them stop at the same step. Outside a study: always false.
    """
    if trial_number() is None:
        return False
    local = _TRIAL.pruned or (control_dir() / jobdir.TRIAL_PRUNED).exists()
    (stop,) = _dist.all_reduce_max([int(local)])
    return bool(stop)
