"""An adaptive sweep's trial told its end, by the sidecar of the task that ran it.

The sweep task exported ``HPCLAUNCH_STUDY`` and ``HPCLAUNCH_TRIAL``; at the attempt's end
the sidecar tells the study (:mod:`hpclaunch.study.engine`):

- an exit 0 after the pruner stopped the trial (``trial-pruned.json``): ``pruned``;
- an exit 0 otherwise: ``complete``, with the metric from ``final-metrics.json``
  (``runtime.report_metrics``), else the trial's last reported value; with neither, the
  trial ``fail``\\ s and the log says which metric was never reported and how to report it;
- any other end that is not requeued: ``fail``;
- a requeued attempt (preemption, time limit, a retry), or a preemption whose requeue is
  Slurm's (``preempted``): nothing: the next attempt of the task resumes the same trial
  (a task that does not come back is found gone by the next one: study/orphans.py).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch.supervise.ledger import SLURM_MAY_REQUEUE

__all__ = ["study_of", "tell_trial", "trial_was_pruned"]


def study_of(env: Mapping[str, str]) -> tuple[str, int] | None:
    """The study description's path and the trial's number of this task, if in a study."""
    path, number = env.get("HPCLAUNCH_STUDY", ""), env.get("HPCLAUNCH_TRIAL", "")
    return (path, int(number)) if path and number.isdigit() else None


def trial_was_pruned(control: Path) -> bool:
    """Whether the trainer's pruner stopped this trial (``trial-pruned.json``)."""
    return (control / jobdir.TRIAL_PRUNED).exists()


def _final_value(job_dir: str, metric: str) -> float | None:
    try:
        data = json.loads(Path(job_dir, jobdir.FINAL_METRICS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("metrics", {}).get(metric) if isinstance(data, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def tell_trial(env: Mapping[str, str], control: Path, reason: str, requeued: bool) -> str | None:
    """Tell the study how this task's trial ended (nothing when requeued or outside a
    study); a line for the task's log."""
    found = study_of(env)
    if found is None or requeued or reason in SLURM_MAY_REQUEUE:
        return None
    path, number = found
    from hpclaunch.study import engine  # noqa: PLC0415 (optuna: only in a study's task)
    from hpclaunch.study.config import read_study  # noqa: PLC0415 (only in a study's task)

    config = read_study(path)
    if reason == "pruned":
        frozen = engine.finish(config, number, "pruned")
        return f"hpclaunch: trial {number} pruned at step {frozen.last_step} ({frozen.value})"
    if reason != "success":
        engine.finish(config, number, "fail")
        return f"hpclaunch: trial {number} failed ({reason})"
    value = _final_value(env.get("HPCLAUNCH_JOB_DIR", os.getcwd()), config.metric)
    reported = engine.frozen_trial(config, number).intermediate_values
    if value is None:
        value = reported[max(reported)] if reported else None
    if value is None:
        engine.finish(config, number, "fail")
        return (
            f"hpclaunch: trial {number} failed: the study optimises {config.metric!r}, which "
            f"the trainer never reported: call runtime.report_metrics({{{config.metric!r}: "
            f"value}}) at the end, or report_progress(step, metrics={{{config.metric!r}: "
            "value}}) on the way"
        )
    frozen = engine.finish(config, number, "complete", value)
    said = f"hpclaunch: trial {number} complete: {config.metric} {value:g}"
    if config.pruner is not None and not reported:
        said += (
            f"\nhpclaunch: early_terminate ({config.pruner['type']}) could not judge trial "
            f"{frozen.number}: the trainer reported no {config.metric!r} on the way; call "
            f"runtime.report_progress(step, metrics={{{config.metric!r}: value}}) each epoch"
        )
    return said
