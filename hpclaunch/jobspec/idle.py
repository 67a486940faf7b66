"""A job spec's ``idle:`` guard (and a site's default for it): what happens to a job whose
GPUs all sit idle.

::

    idle:
      notify_after: 10     # minutes with every GPU of a node below the threshold: gpu_idle
      stop_after: 30       # minutes with every GPU of the job below it: checkpoint and stop
      threshold: 5         # % utilisation under which a GPU counts as idle

A stopped job is not requeued: its attempt ends ``stopped_idle`` (the ledger, ``hpclaunch
events``, the job's ``notify:``), after the trainer was asked for a checkpoint as at a
preemption. Centers cancel such jobs by hand (Princeton's Job Defense Shield); this lets the
job save its work first. Measured by the GPU sampler (NVML): a node without NVML never counts
as idle.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Idle"]


class Idle(BaseModel):
    """When idle GPUs are told of, and when the job is stopped."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    notify_after: float = Field(
        10, gt=0, le=10080, description="Minutes all of a node's GPUs are idle before gpu_idle."
    )
    stop_after: float | None = Field(
        None,
        gt=0,
        le=10080,
        description="Minutes all of the job's GPUs are idle before it is checkpointed and "
        "stopped, not requeued (stopped_idle); none: never stopped.",
    )
    threshold: float = Field(
        5, ge=0, le=100, description="GPU utilisation (%) under which a GPU counts as idle."
    )

    @model_validator(mode="after")
    def _stop_after_notify(self) -> Idle:
        if self.stop_after is not None and self.stop_after < self.notify_after:
            raise ValueError(
                f"stop_after ({self.stop_after:g} min) comes before notify_after "
                f"({self.notify_after:g} min): the job would be stopped before anyone is told"
            )
        return self

    def env(self) -> tuple[tuple[str, str], ...]:
        """What the GPU sampler and the sidecar read (seconds, percent)."""
        out = [
            ("HPCLAUNCH_GPU_IDLE_SECONDS", f"{self.notify_after * 60:g}"),
            ("HPCLAUNCH_GPU_IDLE_UTIL", f"{self.threshold:g}"),
        ]
        if self.stop_after is not None:
            out.append(("HPCLAUNCH_IDLE_STOP_SECONDS", f"{self.stop_after * 60:g}"))
        return tuple(out)
