"""A study as ``study.json``: plain data (the standard library only), so that the planner
writes it (:func:`hpclaunch.planning.study.study_config`) and a sweep task reads it before
it imports the engine.

The study is one per sweep, named ``hpclaunch-<sweep id>``. By default it lives in a journal
file next to ``study.json`` (Optuna's ``JournalStorage`` with its open-file lock, made for
NFS: every node of the cluster reaches the sweep's job directory); ``storage:`` in the
spec names an RDB instead (``mysql+pymysql://...``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "STUDY_FILE",
    "STUDY_JOURNAL",
    "STUDY_LOCK",
    "TRIAL_FILE",
    "StudyConfig",
    "read_study",
    "study_text",
]

#: In the sweep's job directory: the study's description, and its default storage.
STUDY_FILE = "study.json"
STUDY_JOURNAL = "study.journal"
#: In the sweep's job directory: held while a task looks for trials whose task is gone.
STUDY_LOCK = "study.lock"
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


def study_text(config: StudyConfig) -> str:
    """``config`` as the text of ``study.json`` (written where Slurm runs: over SSH too)."""
    return json.dumps(asdict(config), sort_keys=True) + "\n"


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
