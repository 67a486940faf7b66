"""A spec's ``sweep:``: its methods, parameters (lists, ranges, random draws) and limits,
checked as the spec is read (planning/points.py expands them). With ``metric:`` it is an
adaptive sweep, an Optuna study (:mod:`hpclaunch.jobspec.study`)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hpclaunch.jobspec.study import ADAPTIVE_METHODS, EarlyTerminate, SweepMetric

__all__ = ["MAX_SWEEP_POINTS", "Sweep", "SweepRange", "SweepValue"]


SweepValue = bool | int | float | str
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Most points one sweep may expand to (a bigger grid is almost surely a typo).
MAX_SWEEP_POINTS = 100_000
#: ``distribution:`` of a range → (log, int).
_DISTRIBUTIONS = {
    "uniform": (False, False),
    "log_uniform": (True, False),
    "int_uniform": (False, True),
    "int_log_uniform": (True, True),
}


class SweepRange(BaseModel):
    """A random sweep parameter drawn between ``min`` and ``max``.

    Attributes:
        min, max: The bounds (``min < max``).
        log: Draw uniformly in log space (learning rates); needs ``min > 0``.
        integer: Round to an integer (written ``int: true`` in YAML).

    ``distribution: uniform | log_uniform | int_uniform | int_log_uniform`` (W&B's and
    Optuna's words) may be written instead of ``log`` and ``int``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True)

    min: float = Field(description="Lower bound.")
    max: float = Field(description="Upper bound.")
    log: bool = Field(False, description="Uniform in log space (needs min > 0).")
    integer: bool = Field(False, alias="int", description="Round to an integer.")
    distribution: Literal["uniform", "log_uniform", "int_uniform", "int_log_uniform"] | None = (
        Field(
            None,
            exclude=True,
            description="Instead of log and int: uniform, log_uniform, int_uniform or "
            "int_log_uniform.",
        )
    )

    @model_validator(mode="before")
    @classmethod
    def _distribution(cls, value: Any) -> Any:
        if not isinstance(value, dict) or "distribution" not in value:
            return value
        rest = dict(value)
        kind = rest["distribution"]
        if kind not in _DISTRIBUTIONS:
            raise ValueError(
                f"distribution {kind!r} is not one of {', '.join(_DISTRIBUTIONS)} (a list of "
                "values is the categorical one)"
            )
        missing = [bound for bound in ("min", "max") if bound not in rest]
        if missing:
            raise ValueError(f"distribution {kind} needs {' and '.join(missing)}")
        clash = sorted({"log", "int"} & set(rest))
        if clash:
            raise ValueError(f"{clash[0]}: distribution {kind} already says it; give one")
        log, integer = _DISTRIBUTIONS[kind]
        return {**rest, "log": log, "int": integer}

    @model_validator(mode="after")
    def _ordered(self) -> SweepRange:
        if not self.min < self.max:
            raise ValueError(f"min ({self.min:g}) must be below max ({self.max:g})")
        if self.log and self.min <= 0:
            raise ValueError(f"log: true needs min > 0 (got {self.min:g})")
        return self


class Sweep(BaseModel):
    """Many runs of one job with different parameters (``hpclaunch sweep``).

    Attributes:
        method: ``grid`` (every combination of ``parameters``' lists), ``random`` (``count``
            points drawn with ``seed``: a list is a set of choices, ``{min, max, log, int}``
            a range) or ``list`` (the ``points`` as written).
        parameters: Name → values (grid, random) or a range (random).
        count: How many points to draw (random only).
        seed: The random generator's seed (random only): the same spec gives the same points.
        points: The points (list only), each a mapping name → value.
        max_concurrent: At most this many tasks run at once (``--array=...%N``), over the
            whole sweep.
        metric: What a study optimises; with it the sweep is adaptive (method ``tpe``,
            ``cmaes``, ``random`` or ``grid`` as Optuna's sampler, ``trials`` of them).
        early_terminate: Stop trials that fall behind (a study only).
        trials: How many trials a study runs (default for grid: every combination).
        storage: Where a study lives (an RDB URL such as ``mysql+pymysql://...``); default:
            a journal file in the sweep's job directory, on the shared filesystem.
        pack: Points per array task: each task runs this many points one after another in
            its allocation, each as its own job step with its own log, ledger, result and
            retry (:mod:`hpclaunch.supervise.sweep_pack`). Slurm then holds points/pack job
            records, and a short point pays no job's scheduling and start of its own.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    method: Literal["grid", "random", "list", "tpe", "cmaes"] = Field(
        description="grid, random or list; with metric: tpe, cmaes, random or grid."
    )
    parameters: dict[str, tuple[SweepValue, ...] | SweepRange] = Field(
        default_factory=dict,
        description="Name -> list of values, or (random) {min, max, log, int}.",
        examples=[{"lr": [0.1, 0.01], "batch": [32, 64]}],
    )
    count: int | None = Field(None, ge=1, description="Points to draw (random).")
    seed: int = Field(0, description="Seed of the random draw (random).")
    points: tuple[dict[str, SweepValue], ...] = Field(
        (), description="The points (list): [{lr: 0.1, batch: 32}, ...]."
    )
    max_concurrent: int | None = Field(
        None, ge=1, description="At most this many tasks at once (%N), over the whole sweep."
    )
    metric: SweepMetric | None = Field(
        None, description="What an adaptive sweep optimises: {name: val_loss, goal: minimize}."
    )
    early_terminate: EarlyTerminate | None = Field(
        None, description="Stop trials that fall behind: {type: asha, min_steps: 100}."
    )
    trials: int | None = Field(None, ge=1, description="Trials of an adaptive sweep.")
    storage: str | None = Field(
        None, min_length=1, description="The study's RDB URL (default: a journal file)."
    )
    pack: int = Field(
        1, ge=1, le=10000, description="Points each array task runs, one after another."
    )

    @property
    def is_study(self) -> bool:
        """Whether this sweep is adaptive: an Optuna study, not a list of points."""
        return self.metric is not None

    @property
    def trial_count(self) -> int:
        """How many trials a study runs (its array's size)."""
        if self.trials is not None:
            return self.trials
        return _grid_size(self)

    @field_validator("metric", mode="before")
    @classmethod
    def _metric_mapping(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                f"give the metric and its goal: metric: {{name: {value}, goal: minimize}} "
                "(or goal: maximize, for an accuracy)"
            )
        return value

    @field_validator("parameters", mode="before")
    @classmethod
    def _lists_or_ranges(cls, value: Any) -> Any:
        # Sorted out here, so that a mistake gets one clear message, not one per union member.
        if not isinstance(value, dict):
            return value
        return {str(name): _list_or_range(str(name), values) for name, values in value.items()}

    @field_validator("parameters")
    @classmethod
    def _valid_parameters(
        cls, value: dict[str, tuple[SweepValue, ...] | SweepRange]
    ) -> dict[str, tuple[SweepValue, ...] | SweepRange]:
        for name, values in value.items():
            _check_param_name(name)
            if isinstance(values, tuple):
                if not values:
                    raise ValueError(f"{name}: the list of values is empty")
                _no_nul_values(name, values)
        return value

    @field_validator("points")
    @classmethod
    def _valid_points(
        cls, value: tuple[dict[str, SweepValue], ...]
    ) -> tuple[dict[str, SweepValue], ...]:
        first = set(value[0]) if value else set()
        for index, point in enumerate(value):
            for name in point:
                _check_param_name(name)
            _no_nul_values(f"point {index}", tuple(point.values()))
            if set(point) != first:
                raise ValueError(
                    f"point {index} has parameters {sorted(point)}, point 0 has {sorted(first)}: "
                    "every point must name the same parameters"
                )
        return value

    @model_validator(mode="after")
    def _fits_method(self) -> Sweep:
        if self.is_study:
            if self.pack > 1:
                raise ValueError(
                    "pack: not for an adaptive sweep (each task asks the study for its trial "
                    "as it starts); remove pack, or sweep a grid, random or list of points"
                )
            _check_study(self)
            return self
        study_only = sorted({"early_terminate", "trials", "storage"} & self.model_fields_set)
        if self.method in ADAPTIVE_METHODS or study_only:
            what = f"method {self.method}" if self.method in ADAPTIVE_METHODS else study_only[0]
            raise ValueError(
                f"{what}: for an adaptive sweep, which needs metric: {{name: val_loss, goal: "
                "minimize} (the value its trials are compared on)"
            )
        wrong = {
            "grid": {"count", "seed", "points"},
            "random": {"points"},
            "list": {"parameters", "count", "seed"},
        }[self.method] & self.model_fields_set
        if wrong:
            raise ValueError(f"{', '.join(sorted(wrong))}: not used by method {self.method}")
        if self.method == "list":
            if not self.points:
                raise ValueError("method list needs points: [{name: value, ...}, ...]")
            return self
        if not self.parameters:
            raise ValueError(f"method {self.method} needs parameters: {{name: [values]}}")
        if self.method == "grid":
            _check_grid(self)
        elif self.count is None:
            raise ValueError("method random needs count: how many points to draw")
        elif self.count > MAX_SWEEP_POINTS:
            raise ValueError(f"count {self.count} is more than {MAX_SWEEP_POINTS}")
        return self


def _check_study(sweep: Sweep) -> None:
    """An adaptive sweep: a sampler over ``parameters``, ``trials`` of them."""
    if sweep.method == "list":
        raise ValueError(
            "method list runs its points as written; an adaptive sweep (metric:) samples "
            "them: use method grid for fixed values, or tpe to search"
        )
    wrong = sorted({"count", "points"} & sweep.model_fields_set)
    if wrong:
        raise ValueError(f"{wrong[0]}: an adaptive sweep (metric:) runs trials: N, not {wrong[0]}")
    if not sweep.parameters:
        raise ValueError(
            f"method {sweep.method} needs parameters: {{name: [values] or {{min, max}}}}"
        )
    if sweep.method == "grid":
        _check_grid(sweep)
        size = _grid_size(sweep)
        if sweep.trials is not None and sweep.trials > size:
            raise ValueError(f"trials ({sweep.trials}) is more than the grid's {size} points")
        return
    if sweep.trials is None:
        raise ValueError(f"method {sweep.method} needs trials: how many to run")
    if sweep.trials > MAX_SWEEP_POINTS:
        raise ValueError(f"trials {sweep.trials} is more than {MAX_SWEEP_POINTS}")


def _check_grid(sweep: Sweep) -> None:
    ranges = [n for n, v in sweep.parameters.items() if isinstance(v, SweepRange)]
    if ranges:
        raise ValueError(
            f"{', '.join(ranges)}: a grid takes lists of values; min/max ranges are for "
            "method random (or tpe, cmaes)"
        )
    size = _grid_size(sweep)
    if size > MAX_SWEEP_POINTS:
        raise ValueError(f"the grid has {size} points, more than {MAX_SWEEP_POINTS}")


def _grid_size(sweep: Sweep) -> int:
    return math.prod([len(v) for v in sweep.parameters.values() if isinstance(v, tuple)])


def _list_or_range(name: str, values: Any) -> Any:
    if isinstance(values, SweepRange):
        return values
    if isinstance(values, dict):
        unknown = sorted(set(map(str, values)) - {"min", "max", "log", "int", "distribution"})
        if unknown:
            raise ValueError(
                f"{name}: unknown key {unknown[0]!r}; a range has min, max, log, int (or "
                "distribution)"
            )
        try:
            return SweepRange.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(part) for part in err["loc"])
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ValueError(f"{name}{'.' + where if where else ''}: {msg}") from None
    if not isinstance(values, (list, tuple)):
        raise ValueError(
            f"{name}: give a list of values (e.g. [0.1, 0.01]) or, for random, "
            f"{{min: ..., max: ...}}; got {values!r}"
        )
    for value in values:
        if not isinstance(value, (bool, int, float, str)):
            raise ValueError(
                f"{name}: {value!r} is not a single value (a number, text or true/false)"
            )
    return tuple(values)


def _check_param_name(name: str) -> None:
    if not _PARAM_NAME.match(name):
        raise ValueError(
            f"{name!r} is not a parameter name (letters, digits and _, not starting with a "
            "digit): it is written {name} in command and args"
        )


def _no_nul_values(where: str, values: tuple[SweepValue, ...]) -> None:
    for value in values:
        if isinstance(value, str) and "\x00" in value:
            raise ValueError(f"{where}: {value!r} contains a NUL character")
