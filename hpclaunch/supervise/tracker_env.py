"""The trackers' variables each attempt's launch gets, so that a trainer's plain
``wandb.init()`` and ``mlflow.start_run()`` (or ``runtime.report_progress``) continue one
run per job, or per sweep task, in every attempt.

- W&B: ``WANDB_RUN_ID`` (the submission id; a sweep task's own) and ``WANDB_RESUME=allow``,
  tags naming the Slurm job, the attempt and the cluster; a sweep task's run is named after
  its point and grouped under the sweep.
- MLflow: ``MLFLOW_RUN_ID`` of the run the submit made (the job directory's
  ``tracking.json``; a sweep task's child run).

Variables the user set (spec ``env``, the submitting shell) are never overridden.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from hpclaunch import jobdir

__all__ = ["TRACKING_ENV", "point_words", "task_tracker_env", "tracked", "tracker_env", "wandb_env"]

#: The trackers a job logs to (``wandb,mlflow,tensorboard``): the plan sets it, the sidecar
#: and the runtime read it.
TRACKING_ENV = "HPCLAUNCH_TRACKING"


def tracked(env: Mapping[str, str]) -> set[str]:
    """The trackers the job's spec names (``TRACKING_ENV`` of ``env``)."""
    return set(filter(None, env.get(TRACKING_ENV, "").split(",")))


def point_words(params: Mapping[str, Any]) -> str:
    """A sweep point in a run's name: ``lr=0.01 width=64``."""
    return " ".join(f"{k}={v}" for k, v in params.items())


def wandb_env(env: Mapping[str, str]) -> dict[str, str]:
    """``WANDB_RUN_ID``/``WANDB_RESUME`` so that every attempt continues one W&B run.

    The run id is the submission id (uuid4 hex: 32 of W&B's allowed ``[a-z0-9]``, at most
    64), the same in every attempt; ``WANDB_RESUME=allow`` makes ``wandb.init`` resume it
    when it exists. Variables the user already set (spec ``env`` or the submitting shell)
    are never overridden; without a submission id (not submitted by hpclaunch), nothing.
    """
    run_id = re.sub(r"[^a-z0-9]", "", env.get("HPCLAUNCH_SUBMISSION_ID", "").lower())[:64]
    if not run_id:
        return {}
    out = {"WANDB_RUN_ID": run_id, "WANDB_RESUME": "allow"}
    return {key: value for key, value in out.items() if key not in env}


def tracker_env(env: Mapping[str, str], attempt: int) -> dict[str, str]:
    """The variables of this attempt's launch: W&B's run and tags, MLflow's run."""
    out = wandb_env(env)
    trackers = tracked(env)
    if "wandb" in trackers:
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        job = f"{array}_{task}" if array and task else env.get("SLURM_JOB_ID", "")
        tags = [t for t in env.get("WANDB_TAGS", "").split(",") if t]
        tags += [f"slurm-job:{job}", f"attempt:{attempt}"]
        if cluster := env.get("SLURM_CLUSTER_NAME"):
            tags.append(f"cluster:{cluster}")
        out["WANDB_TAGS"] = ",".join(tags)
    if "mlflow" in trackers and "MLFLOW_RUN_ID" not in env:
        run_id = mlflow_run_of(env)
        if run_id is not None:
            out["MLFLOW_RUN_ID"] = run_id
    return out


def mlflow_run_of(env: Mapping[str, str]) -> str | None:
    """The MLflow run the submit made for this job or sweep task (``None``: none found)."""
    where = env.get("HPCLAUNCH_SWEEP_DIR") or env.get("HPCLAUNCH_JOB_DIR", "")
    index = env.get("HPCLAUNCH_SWEEP_INDEX", "0")
    try:
        with open(os.path.join(where, jobdir.TRACKING_RUNS), encoding="utf-8") as fh:
            runs = json.load(fh)["mlflow"]["runs"]
        return str(runs[int(index)])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def task_tracker_env(
    env: Mapping[str, str], params: Mapping[str, Any], trial: int | None = None
) -> dict[str, str]:
    """A sweep task's W&B run name (the job's name and its point, or its trial) and group
    (the sweep's id, unless the spec named one)."""
    if "wandb" not in tracked(env):
        return {}
    words = point_words(params)
    name = " ".join(
        filter(
            None, (env.get("WANDB_NAME", ""), f"trial {trial}" if trial is not None else "", words)
        )
    )
    out = {"WANDB_NAME": name}
    if "WANDB_RUN_GROUP" not in env and (sweep := env.get("HPCLAUNCH_SUBMISSION_ID")):
        out["WANDB_RUN_GROUP"] = sweep
    return out
