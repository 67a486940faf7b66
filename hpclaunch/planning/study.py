"""An adaptive sweep's study as the planner describes it (:mod:`hpclaunch.study.config`)."""

from __future__ import annotations

import os
from typing import Any

from hpclaunch.jobspec.sweep import Sweep, SweepRange
from hpclaunch.study.config import STUDY_JOURNAL, StudyConfig

__all__ = ["study_config", "study_note"]


def study_config(sweep: Sweep, sweep_id: str, job_dir: str) -> StudyConfig:
    """The study of an adaptive ``sweep`` (``sweep.is_study``) whose job directory is
    ``job_dir`` (as the tasks see it)."""
    assert sweep.metric is not None  # callers ask sweep.is_study first
    parameters: dict[str, dict[str, Any]] = {}
    for name, values in sweep.parameters.items():
        if isinstance(values, SweepRange):
            parameters[name] = {
                "low": values.min,
                "high": values.max,
                "log": values.log,
                "int": values.integer,
            }
        else:
            parameters[name] = {"choices": list(values)}
    stop = sweep.early_terminate
    return StudyConfig(
        name=f"hpclaunch-{sweep_id}",
        storage=sweep.storage or f"journal:{os.path.join(job_dir, STUDY_JOURNAL)}",
        metric=sweep.metric.name,
        direction=sweep.metric.goal,
        method=sweep.method,
        trials=sweep.trial_count,
        parameters=parameters,
        seed=sweep.seed if "seed" in sweep.model_fields_set else None,
        pruner=stop.model_dump() if stop is not None else None,
    )


def study_note(config: StudyConfig) -> str:
    """The dry run's words for the study."""
    stop = config.pruner
    pruning = (
        f"{stop['type']} stops trials behind the others from step {stop['min_steps']}"
        if stop
        else "no early termination (every trial runs to its end)"
    )
    where = config.journal or "the RDB named in storage:"
    return (
        f"adaptive sweep ({config.method}, Optuna): {config.trials} trials "
        f"{config.direction[:-1]}ing {config.metric}; each task asks the study for its "
        f"trial when it starts and keeps it across requeues; {pruning}; study in {where}"
    )
