"""The Optuna adaptor: the only module that imports Optuna (others import it where a
study is at hand, so that a sweep without ``metric:`` never loads it).

A trial here outlives the process that asked for it: the sweep task asks the study for a
trial and keeps its number in the task's directory (``trial.json``); the trainer reports
intermediate values to it (:func:`report`, through ``runtime.report_progress``); the
sidecar tells its end (:func:`finish`). A task that Slurm requeues (preemption, a time
limit) finds its ``trial.json`` and resumes the same trial: Optuna ignores a step reported
twice, so the steps an attempt retrains after its checkpoint are not reported again.
Trials are found again by number through the storage's public API.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hpclaunch._fs import write_json_atomic
from hpclaunch.study.config import STUDY_LOCK, TRIAL_FILE, StudyConfig
from hpclaunch.study.orphans import sweep_lock, task_is_gone

__all__ = [
    "TakenTrial",
    "create_study",
    "distributions",
    "find_study",
    "finish",
    "frozen_trial",
    "importances",
    "load_study",
    "report",
    "revive_orphans",
    "take_trial",
]

# Optuna says every trial's start and end at INFO on stderr: the task's log has its own.
optuna.logging.set_verbosity(optuna.logging.WARNING)

#: How a sidecar tells a trial's end.
_STATES = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED, "fail": TrialState.FAIL}


@dataclass(frozen=True)
class TakenTrial:
    """The trial a task runs: its number, its parameters, and whether it resumes."""

    number: int
    params: dict[str, Any]
    resumed: bool = False


def open_storage(config: StudyConfig) -> BaseStorage:
    """The study's storage: the journal file (an open-file lock: NFS has no reliable
    symlink semantics across clients) or the RDB."""
    path = config.journal
    if path is not None:
        return JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
    return RDBStorage(config.storage)


def _sampler(config: StudyConfig, worker: str = "") -> optuna.samplers.BaseSampler:
    """The spec's sampler. Every task is a process of its own that makes its sampler: with
    one seed for all, tasks starting together drew the same random point (a grid, the same
    grid point); each task's seed is the spec's mixed with the task (``worker``), so a
    seeded sweep is repeatable and its tasks still differ."""
    seed = (
        None
        if config.seed is None
        else (config.seed * 1_000_003 + zlib.crc32(worker.encode())) % 2**32
    )
    if config.method == "grid":
        space = {name: p["choices"] for name, p in config.parameters.items()}
        return optuna.samplers.GridSampler(space, seed=seed)
    if config.method == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if config.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: trials running in parallel count as bad guesses meanwhile, so that
    # workers asking at once do not all get the same point.
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True)


def _pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    stop = config.pruner
    if stop is None:
        return optuna.pruners.NopPruner()
    if stop["type"] == "median":
        return optuna.pruners.MedianPruner(n_warmup_steps=stop["min_steps"])
    if stop["type"] == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=stop["min_steps"],
            max_resource=stop.get("max_steps") or "auto",
            reduction_factor=stop["reduction_factor"],
        )
    return optuna.pruners.SuccessiveHalvingPruner(
        min_resource=stop["min_steps"], reduction_factor=stop["reduction_factor"]
    )


def distributions(config: StudyConfig) -> dict[str, BaseDistribution]:
    """Each parameter's Optuna distribution."""
    out: dict[str, BaseDistribution] = {}
    for name, p in config.parameters.items():
        if "choices" in p:
            out[name] = CategoricalDistribution(p["choices"])
        elif p["int"]:
            low, high = math.ceil(p["low"]), math.floor(p["high"])
            out[name] = IntDistribution(low, high, log=p["log"])
        else:
            out[name] = FloatDistribution(p["low"], p["high"], log=p["log"])
    return out


def create_study(config: StudyConfig) -> optuna.Study:
    """Make the study (at submit; an existing one of that name is reused)."""
    study = optuna.create_study(
        study_name=config.name,
        storage=open_storage(config),
        direction=(
            StudyDirection.MAXIMIZE if config.direction == "maximize" else StudyDirection.MINIMIZE
        ),
        load_if_exists=True,
    )
    study.set_user_attr("metric", config.metric)
    study.set_user_attr("trials", config.trials)
    return study


@dataclass(frozen=True)
class _Opened:
    study: optuna.Study
    storage: BaseStorage
    study_id: int

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)


_OPEN: dict[tuple[str, str], _Opened] = {}


def _opened(config: StudyConfig) -> _Opened:
    key = (config.name, config.storage)
    if key not in _OPEN:
        storage = open_storage(config)
        study = optuna.load_study(
            study_name=config.name,
            storage=storage,
            sampler=_sampler(config),
            pruner=_pruner(config),
        )
        _OPEN[key] = _Opened(study, storage, storage.get_study_id_from_name(config.name))
    return _OPEN[key]


def load_study(config: StudyConfig) -> optuna.Study:
    """The study, with the spec's sampler and pruner (kept for the process: a journal is
    read again only from where this process last read it)."""
    return _opened(config).study


def find_study(config: StudyConfig) -> optuna.Study | None:
    """The study, or ``None`` while no task has made it yet (the first task to start
    makes it: a sweep still pending in the queue has none)."""
    try:
        return load_study(config)
    except KeyError:  # Optuna's "Record does not exist." for an unknown study name
        return None


def frozen_trial(config: StudyConfig, number: int) -> FrozenTrial:
    """Trial ``number`` of the study as the storage has it now."""
    opened = _opened(config)
    return opened.storage.get_trial(opened.trial_id(number))


def take_trial(
    config: StudyConfig, task_dir: str | os.PathLike[str], owner: Mapping[str, str]
) -> TakenTrial | FrozenTrial:
    """The trial the task whose directory is ``task_dir`` runs: the one it started before
    it was requeued (still running), or a new one asked of the study, its number then kept
    in ``trial.json`` and ``owner`` (job id, task index) in its user attributes. A finished
    trial of this task is returned frozen: the task has nothing left to run."""
    study = load_study(config)
    path = Path(task_dir) / TRIAL_FILE
    if path.exists():
        number = int(json.loads(path.read_text(encoding="utf-8"))["number"])
        frozen = frozen_trial(config, number)
        if frozen.state is not TrialState.RUNNING:
            return frozen
        return TakenTrial(number, dict(frozen.params), resumed=True)
    revive_orphans(config, Path(task_dir).parent)
    study.sampler = _sampler(config, worker=Path(task_dir).name)
    trial = study.ask(distributions(config))
    for key, value in owner.items():
        trial.set_user_attr(key, value)
    write_json_atomic(path, {"number": trial.number, "params": trial.params})
    return TakenTrial(trial.number, dict(trial.params))


def revive_orphans(config: StudyConfig, tasks_dir: Path) -> list[int]:
    """Fail the running trials whose task is gone (:func:`~hpclaunch.study.orphans.task_is_gone`:
    a node failure, an OOM kill of the whole task) and run each once more: its parameters
    are enqueued, and the next task that asks takes them. A retry that dies too is not
    retried. Returns the numbers of the trials failed."""
    study = load_study(config)
    failed: list[int] = []
    with sweep_lock(tasks_dir.parent / STUDY_LOCK):
        for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            task = frozen.user_attrs.get("task")
            if task is None or not task_is_gone(tasks_dir / str(task)):
                continue
            study.tell(frozen.number, state=TrialState.FAIL, skip_if_finished=True)
            failed.append(frozen.number)
            if "retry_of" not in frozen.user_attrs:
                study.enqueue_trial(frozen.params, user_attrs={"retry_of": frozen.number})
    return failed


def report(config: StudyConfig, number: int, step: int, value: float) -> bool:
    """Report ``value`` of the metric at ``step`` for trial ``number``; whether the pruner
    says to stop it now."""
    opened = _opened(config)
    trial = optuna.trial.Trial(opened.study, opened.trial_id(number))
    trial.report(value, step)
    return trial.should_prune()


def finish(config: StudyConfig, number: int, how: str, value: float | None = None) -> FrozenTrial:
    """Tell the study that trial ``number`` ended ``how`` (``complete`` with ``value``,
    ``pruned``, ``fail``); a trial already told is left as it is."""
    study = load_study(config)
    return study.tell(number, values=value, state=_STATES[how], skip_if_finished=True)


def importances(study: optuna.Study) -> dict[str, float] | None:
    """Each parameter's share in the metric's variance over the completed trials (Optuna's
    fANOVA evaluator), largest first; ``None`` before two trials completed."""
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(done) < 2:
        return None
    try:
        found = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError):  # e.g. every completed trial had the same parameters
        return None
    return {name: float(share) for name, share in found.items()}
