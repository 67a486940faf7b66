"""A job spec's ``elastic:``: the sizes a job may run at and how its batch follows the size.

::

    resources: {nodes: 4, gpus_per_node: 4}
    launcher: torchrun
    elastic:
      nodes: [1, 2, 4]          # the sizes it may be resized to (the submitted one included)
      global_batch: 512         # samples per optimizer step at the submitted size
      max_batch_per_gpu: 32     # the most one rank takes per micro-step
      batch: fixed              # or linear / sqrt / adaptive (hpclaunch.jobspec.batchplan)
      max_global_batch: 4096    # adaptive only: the largest batch it may choose
      min_interval: 600         # seconds between two resizes, at least

A resize goes through a requeue (Slurm cannot grow a running job since 19.05): checkpoint,
``scontrol requeuehold``, ``scontrol update NumNodes=K``, ``scontrol release``; the next
attempt starts at the new size and resumes from the checkpoint.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpclaunch.jobspec.batchplan import BatchPolicy

__all__ = ["Elastic"]


class Elastic(BaseModel):
    """The sizes an elastic job may run at, and its batch at each."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    nodes: tuple[int, ...] = Field(
        min_length=1,
        description="Node counts the job may run at, the submitted resources.nodes among them.",
        examples=[[1, 2, 4]],
    )
    global_batch: int = Field(
        ge=1, description="Samples per optimizer step at the submitted size (all ranks)."
    )
    max_batch_per_gpu: int = Field(
        ge=1, description="The most samples one rank takes per micro-step (its memory limit)."
    )
    batch: BatchPolicy = Field(
        "fixed",
        description="fixed: the global batch stays and accumulation makes up the difference "
        "(the same samples per step at every size); linear/sqrt: the global batch grows "
        "with the ranks and the learning rate by the ratio or its square root; adaptive: "
        "at each restart, the batch with the most progress per second from the job's "
        "measured speeds and gradient statistics (Pollux's goodput), the learning rate "
        "scaled by its statistical efficiency (AdaScale).",
    )
    max_global_batch: int | None = Field(
        None,
        ge=1,
        description="adaptive: the largest global batch it may choose (one the training "
        "still converges with); at least global_batch.",
        examples=[4096],
    )
    max_lr_factor: float = Field(
        8.0, gt=0, description="Cap on the learning-rate factor (linear/sqrt)."
    )
    warmup_steps: int = Field(
        100, ge=0, description="Steps to reach a new learning rate after a resize (linear/sqrt)."
    )
    min_interval: int = Field(
        600, ge=0, description="Seconds between two resizes, at least (a resize costs a restart)."
    )

    @field_validator("nodes")
    @classmethod
    def _sorted_sizes(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 1 for n in value):
            raise ValueError("node counts must be at least 1")
        if len(set(value)) != len(value):
            raise ValueError(f"{list(value)} repeats a size")
        return tuple(sorted(value))

    @model_validator(mode="after")
    def _adaptive_limit(self) -> Elastic:
        if self.batch == "adaptive" and self.max_global_batch is None:
            raise ValueError(
                "batch adaptive chooses a global batch between global_batch and "
                "max_global_batch: add max_global_batch (the largest batch your training "
                f"converges with, e.g. {self.global_batch * 8})"
            )
        if self.max_global_batch is not None and self.max_global_batch < self.global_batch:
            raise ValueError(
                f"max_global_batch ({self.max_global_batch}) is below global_batch "
                f"({self.global_batch}); raise it to {self.global_batch} or more"
            )
        if self.max_global_batch is not None and self.batch != "adaptive":
            raise ValueError(
                f"max_global_batch is for batch adaptive, and batch is {self.batch}; "
                "drop max_global_batch or set batch: adaptive"
            )
        return self
