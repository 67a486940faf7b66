"""The parts of a spec's ``sweep:`` that make it an adaptive sweep (an Optuna study): the
metric to optimise and the early termination of bad trials.

A sweep with ``metric:`` is a study: its ``method`` names Optuna's sampler (``tpe``,
``cmaes``, ``random``, ``grid``), ``trials`` how many trials run, and ``early_terminate`` the
pruner that stops a trial whose intermediate values (``runtime.report_progress(step,
metrics=...)``) fall behind the others'. Without ``metric:`` a sweep is enumerated as
before (grid, random or list: every point runs to its end).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ADAPTIVE_METHODS", "EarlyTerminate", "SweepMetric"]

#: The methods that are Optuna samplers only (a study, so ``metric:`` is required).
ADAPTIVE_METHODS = frozenset({"tpe", "cmaes"})


class SweepMetric(BaseModel):
    """What the study optimises.

    Attributes:
        name: The metric's key, as the trainer reports it (``report_progress(step,
            metrics={name: value})`` on the way, ``report_metrics({name: value})`` at the
            end).
        goal: ``minimize`` (a loss) or ``maximize`` (an accuracy).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str = Field(min_length=1, description="The metric's key, as the trainer reports it.")
    goal: Literal["minimize", "maximize"] = Field(
        "minimize", description="minimize (a loss) or maximize (an accuracy)."
    )


class EarlyTerminate(BaseModel):
    """Stop trials whose intermediate values fall behind (Optuna's pruners).

    Attributes:
        type: ``asha`` (successive halving, asynchronous: no trial waits for a rung to
            fill), ``hyperband`` (several brackets of ASHA) or ``median`` (stop a trial
            worse than the median of the others at the same step).
        min_steps: No trial is stopped before this step (ASHA's minimum resource, the
            median rule's warm-up).
        reduction_factor: ASHA and Hyperband keep about 1 in this many trials at each rung.
        max_steps: Hyperband's maximum resource: the step a trial that is never stopped
            ends at (default: the largest step reported by the first completed trial).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: Literal["asha", "hyperband", "median"] = Field(description="asha, hyperband or median.")
    min_steps: int = Field(1, ge=1, description="No trial is stopped before this step.")
    reduction_factor: int = Field(
        3, ge=2, description="ASHA/Hyperband keep about 1 in this many trials a rung."
    )
    max_steps: int | None = Field(
        None, ge=1, description="Hyperband: the step an unstopped trial ends at."
    )

    @model_validator(mode="after")
    def _fits_type(self) -> EarlyTerminate:
        if self.max_steps is not None and self.type != "hyperband":
            raise ValueError(f"max_steps: used by type hyperband only, not {self.type}")
        if self.max_steps is not None and self.max_steps <= self.min_steps:
            raise ValueError(
                f"max_steps ({self.max_steps}) must be above min_steps ({self.min_steps})"
            )
        return self
