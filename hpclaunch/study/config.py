"""A study as ``study.json``: plain data, no Optuna, so that the planner writes it and the
job reads it without importing the engine.

The study is one per sweep, named ``hpclaunch-<sweep id>``. By default it lives in a journal
file next to ``study.json`` (Optuna's ``JournalStorage`` with its open-file lock, made for
NFS: every node of the cluster reaches the sweep's job directory); ``storage:`` in the
spec names an RDB instead (``mysql+pymysql://...``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch._fs import write_json_atomic
from hpclaunch.jobspec.sweep import Sweep, SweepRange

__all__ = [
    "STUDY_FILE",
    "STUDY_JOURNAL",
    "TRIAL_FILE",
    "StudyConfig",
    "read_study",
    "study_config",
    "write_study",
]

#: In the sweep's job directory: the study's description, and its default storage.
STUDY_FILE = "study.json"
STUDY_JOURNAL = "study.journal"
#: In a task's directory: the trial the task runs (kept across its requeues).
TRIAL_FILE = "trial.json"


@dataclass(frozen=True)
class StudyConfig:
    """Everything a worker needs to open the study and run its trials.

    Attributes:
        name: The study's name in its storage.
        storage: An RDB URL, or ``journal:<path>`` (the default, in the job directory).
        metric: The value optimised; ``direction``: ``minimize`` or ``maximize``.
        method: The sampler (``tpe``, ``cmaes``, ``random``, ``grid``); ``seed`` its seed.
        trials: How many trials the sweep runs (its array's tasks).
        parameters: Name → ``{"choices": [...]}`` or ``{"low", "high", "log", "int"}``.
        pruner: ``{"type", "min_steps", "reduction_factor", "max_steps"}``, or ``None``.
    """

    name: str
    storage: str
    metric: str
    direction: str
    method: str
    trials: int
    parameters: dict[str, dict[str, Any]]
    seed: int | None = None
    pruner: dict[str, Any] | None = None
    version: int = field(default=1)

    @property
    def journal(self) -> str | None:
        """The journal file's path, when the study lives in one."""
        return (
            self.storage.removeprefix("journal:") if self.storage.startswith("journal:") else None
        )


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


def write_study(config: StudyConfig, path: Path) -> None:
    """Write ``config`` to ``path`` (``<job dir>/study.json``), atomically."""
    write_json_atomic(path, asdict(config))


def read_study(path: str | os.PathLike[str]) -> StudyConfig:
    """The study described at ``path``.

    Raises:
        OSError: It cannot be read. ValueError: It is not a study's description.
    """
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError(f"{path}: not a study description of this hpclaunch")
    try:
        return StudyConfig(**data)
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from None
