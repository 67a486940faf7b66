"""A job's trackers as environment variables: what ``wandb.init()``, ``mlflow.start_run()``
and :mod:`hpclaunch.runtime.tracking` read inside the job.

W&B reads its own variables (``WANDB_PROJECT``, ``WANDB_ENTITY``, ``WANDB_RUN_GROUP``,
``WANDB_NAME``, ``WANDB_MODE``, ``WANDB_DIR``); the run id and ``WANDB_RESUME=allow`` come
from the sidecar (the submission's id, each sweep task its own: supervise/launch.py), so
a trainer's plain ``wandb.init()`` continues the same run in every attempt. MLflow's run is
made at submit (:mod:`hpclaunch.ops.tracking`) and its id kept in the job directory's
``tracking.json``; the sidecar exports ``MLFLOW_RUN_ID`` from it.
"""

from __future__ import annotations

from hpclaunch.errors import PlanError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.jobspec.tracking import Tracking, merge_tracking
from hpclaunch.supervise.tracker_env import TRACKING_ENV

__all__ = ["tracking_env", "tracking_note", "tracking_of"]


def tracking_of(spec: JobSpec, site: Tracking | None, home: str) -> Tracking | None:
    """The spec's trackers with the site's defaults, checked whole; a store in one's home
    written ``sqlite:///~/mlflow.db`` made absolute with ``home`` (the cluster's).

    Raises:
        PlanError: MLflow without a tracking URI from the spec or the site.
    """
    tracking = merge_tracking(spec.tracking, site)
    if tracking is None or tracking.mlflow is None:
        return tracking
    uri = tracking.mlflow.tracking_uri
    if not uri:
        raise PlanError(
            "tracking.mlflow: no tracking_uri, in the spec or the site's tracking:",
            hint="add tracking_uri: sqlite:////shared/path/mlflow.db (a store on the shared "
            "filesystem) or http://host:5000 (a server the nodes reach)",
        )
    scheme, sep, rest = uri.partition(":///~/")
    if sep and scheme in ("sqlite", "file"):
        mlflow = tracking.mlflow.model_copy(update={"tracking_uri": f"{scheme}:///{home}/{rest}"})
        tracking = tracking.model_copy(update={"mlflow": mlflow})
    return tracking


def tracking_env(tracking: Tracking, job_dir: str, name: str) -> list[tuple[str, str]]:
    """The variables of a job's trackers (a sweep task's run name, and its group by default
    the sweep's id, are the task's: supervise/sweep_task.py). TensorBoard's event files go
    to the job's (the task's) directory: ``runtime.tensorboard_dir()``."""
    env = [(TRACKING_ENV, ",".join(tracking.names))]
    if (wandb := tracking.wandb) is not None:
        mode = wandb.mode
        if mode == "auto":
            mode = "offline" if tracking.offline else "online"
        env += [("WANDB_MODE", mode), ("WANDB_DIR", job_dir), ("WANDB_NAME", name)]
        for key, value in (
            ("WANDB_PROJECT", wandb.project),
            ("WANDB_ENTITY", wandb.entity),
            ("WANDB_RUN_GROUP", wandb.group),
            ("WANDB_TAGS", ",".join(wandb.tags) or None),
        ):
            if value:
                env.append((key, value))
    if (mlflow := tracking.mlflow) is not None:
        assert mlflow.tracking_uri is not None  # tracking_of made sure
        env += [
            ("MLFLOW_TRACKING_URI", mlflow.tracking_uri),
            ("MLFLOW_EXPERIMENT_NAME", mlflow.experiment),
        ]
    return env


def tracking_note(tracking: Tracking, env: list[tuple[str, str]]) -> str:
    """The plan's line on the trackers: each one's run, and where it is kept."""
    values = dict(env)
    parts = []
    if tracking.wandb is not None:
        mode = values["WANDB_MODE"]
        where = "offline (hpclaunch sync JOB uploads it)" if mode == "offline" else "online"
        parts.append(f"W&B {where}, run id the submission's, resumed by each attempt")
    if tracking.mlflow is not None:
        parts.append(f"MLflow run made at submit in {values['MLFLOW_TRACKING_URI']}")
    if tracking.tensorboard:
        parts.append("TensorBoard files in the job directory's tensorboard/")
    return "tracking: " + "; ".join(parts) + " (runtime.report_progress(step, metrics=...) logs)"
