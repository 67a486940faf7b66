"""A job spec's ``tracking:``: the experiment trackers the job's run goes to, one logical
run per job (per sweep task) however often it is requeued.

::

    tracking:
      wandb: {project: vision, entity: my-lab, mode: auto}   # group: the sweep, by default
      mlflow: {tracking_uri: "sqlite:////shared/me/mlflow.db", experiment: resnet}
      tensorboard: true     # event files in the job directory (hpclaunch forward JOB 6006)

``wandb: true`` (or ``mlflow: true``) takes every field from the site's ``tracking:``, which
fills what a spec leaves unset (a lab's W&B entity, its MLflow server) but turns no tracker
on by itself; its ``offline: true`` says the compute nodes cannot reach the internet:
``mode: auto`` then runs W&B offline and ``hpclaunch sync JOB|SWEEP`` uploads the runs from
the login node.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["MlflowRun", "Tracking", "WandbRun", "merge_tracking"]

_TRACKERS = ("wandb", "mlflow", "tensorboard")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class WandbRun(_Model):
    """A W&B run: its id is the job's (the sweep task's), resumed by every attempt."""

    project: str | None = Field(None, min_length=1, description="The W&B project.")
    entity: str | None = Field(None, min_length=1, description="The W&B team or user.")
    group: str | None = Field(
        None, min_length=1, description="The run group (default: a sweep's id; none for a job)."
    )
    mode: Literal["online", "offline", "auto"] = Field(
        "auto",
        description="online; offline (files in the job directory, uploaded by 'hpclaunch "
        "sync'); auto: offline where the site says its compute nodes have no internet.",
    )
    tags: tuple[str, ...] = Field((), description="Tags besides the job id, attempt, cluster.")


class MlflowRun(_Model):
    """An MLflow run, made once at submit (a sweep: a parent and a child per task)."""

    tracking_uri: str | None = Field(
        None,
        min_length=1,
        description="Where runs are kept: a server (http://...) the login and compute nodes "
        "reach, or a store on the shared filesystem (sqlite:////abs/path/mlflow.db, or "
        "sqlite:///~/mlflow.db in your home on the cluster; MLflow 3 takes file:/// stores "
        "only with MLFLOW_ALLOW_FILE_STORE=true).",
        examples=["sqlite:////home/me/mlflow.db"],
    )
    experiment: str = Field("Default", min_length=1, description="The experiment's name.")

    @field_validator("tracking_uri")
    @classmethod
    def _a_uri(cls, value: str | None) -> str | None:
        if value is not None and "://" not in value and not value.startswith("databricks"):
            raise ValueError(
                f"{value!r} is no URI: write sqlite:////abs/path/mlflow.db for a store on "
                "the shared filesystem, or http://host:5000 for a server"
            )
        return value


class Tracking(_Model):
    """The trackers of a job (or the site's defaults)."""

    wandb: WandbRun | None = Field(None, description="A W&B run continued by every attempt.")
    mlflow: MlflowRun | None = Field(
        None, description="An MLflow run made at submit, continued by every attempt."
    )
    tensorboard: bool = Field(
        False, description="TensorBoard event files in the job directory's tensorboard/."
    )
    offline: bool = Field(
        False,
        description="(site) The compute nodes cannot reach the internet: W&B mode auto runs "
        "offline there.",
    )

    @model_validator(mode="before")
    @classmethod
    def _known_tracker(cls, data: object) -> object:
        if isinstance(data, dict):
            data = {k: {} if k in ("wandb", "mlflow") and v is True else v for k, v in data.items()}
            for key in data:
                if key not in (*_TRACKERS, "offline") and isinstance(key, str):
                    close = [t for t in _TRACKERS if t[:2] == key[:2].lower()]
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ValueError(
                        f"unknown tracker {key!r}{hint}: hpclaunch knows {', '.join(_TRACKERS)}"
                    )
        return data

    @property
    def names(self) -> tuple[str, ...]:
        """The trackers this block turns on, in a fixed order."""
        on = {"wandb": self.wandb is not None, "mlflow": self.mlflow is not None}
        on["tensorboard"] = self.tensorboard
        return tuple(name for name in _TRACKERS if on[name])


def merge_tracking(spec: Tracking | None, site: Tracking | None) -> Tracking | None:
    """The spec's trackers, each with the site's fields it leaves unset; ``offline`` is the
    site's. ``None``: the spec names no tracker (the site's turn none on)."""
    if spec is None or not spec.names:
        return None
    if site is None:
        return spec
    merged: dict[str, object] = {"tensorboard": spec.tensorboard, "offline": site.offline}
    for name in ("wandb", "mlflow"):
        own, default = getattr(spec, name), getattr(site, name)
        if own is not None and default is not None:
            fields = default.model_dump(exclude_unset=True) | own.model_dump(exclude_unset=True)
            merged[name] = type(own).model_validate(fields)
        else:
            merged[name] = own
    return Tracking.model_validate(merged)
