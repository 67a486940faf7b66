"""The MLflow runs of a submission, made once from where hpclaunch runs (a login node
reaches the tracking server even where compute nodes cannot start runs of their own):
a job's run, or a sweep's parent run with a child run per task (MLflow's
``mlflow.parentRunId`` tag), their ids kept in the job directory's ``tracking.json``.

MLflow adopts ``MLFLOW_RUN_ID`` only for a run that already exists (``mlflow.start_run``
in mlflow/tracking/fluent.py), so the run must exist before the first attempt starts; each
attempt then continues it, and the run's status goes back to RUNNING when it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

__all__ = ["create_runs"]


def create_runs(
    tracking_uri: str,
    experiment: str,
    name: str,
    tags: Mapping[str, str],
    tasks: Sequence[tuple[str, Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Make the run of a job (``tasks`` ``None``), or a sweep's parent run and one child run
    per task (its name and parameters, empty for a study's trials: the trial logs them);
    what ``tracking.json`` keeps of them: ``{"tracking_uri", "experiment_id", "parent",
    "runs"}``."""
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    first = client.create_run(experiment_id, tags={**tags, MLFLOW_RUN_NAME: name})
    if tasks is None:
        return _kept(tracking_uri, experiment_id, None, [first.info.run_id])
    parent = first.info.run_id
    runs = []
    for task_name, params in tasks:
        child = client.create_run(
            experiment_id,
            tags={**tags, MLFLOW_PARENT_RUN_ID: parent, MLFLOW_RUN_NAME: task_name},
        )
        if params:  # one call per run, not per parameter
            client.log_batch(
                child.info.run_id, params=[Param(k, str(v)) for k, v in params.items()]
            )
        runs.append(child.info.run_id)
    return _kept(tracking_uri, experiment_id, parent, runs)


def _kept(uri: str, experiment_id: str, parent: str | None, runs: list[str]) -> dict[str, Any]:
    return {"tracking_uri": uri, "experiment_id": experiment_id, "parent": parent, "runs": runs}
