"""A trial whose task died without telling (its lock free, no requeue in its ledger) is
failed and run once more with the same parameters; a task that runs, or was requeued,
keeps its trial. The real Optuna, a journal in a temporary directory."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.planning.study import study_config
from hpclaunch.study import engine
from hpclaunch.study.config import StudyConfig

SWEEP = {
    "method": "random",
    "metric": {"name": "loss"},
    "parameters": {"x": {"min": 0.0, "max": 1.0}},
    "trials": 4,
    "seed": 5,
}


def _started(tmp_path: Path, index: int, *ledger: dict[str, Any]) -> tuple[StudyConfig, Path]:
    """A study whose task ``index`` took a trial, wrote ``ledger`` and left its lock."""
    config = study_config(Sweep.model_validate(SWEEP), "o1", str(tmp_path))
    engine.create_study(config)
    task = tmp_path / "tasks" / str(index)
    task.mkdir(parents=True)
    (task / ".running").touch()
    taken = engine.take_trial(config, task, {"task": str(index)})
    assert isinstance(taken, engine.TakenTrial)
    (task / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ledger))
    return config, task


def _next_task(config: StudyConfig, tmp_path: Path, index: int) -> engine.TakenTrial:
    task = tmp_path / "tasks" / str(index)
    task.mkdir(parents=True)
    (task / ".running").touch()
    taken = engine.take_trial(config, task, {"task": str(index)})
    assert isinstance(taken, engine.TakenTrial)
    return taken


def test_a_dead_tasks_trial_is_failed_and_its_parameters_run_again(tmp_path: Path) -> None:
    config, _ = _started(tmp_path, 0, {"event": "attempt_start", "attempt": 0})
    dead = engine.frozen_trial(config, 0)
    retry = _next_task(config, tmp_path, 1)
    assert retry.params == dead.params
    assert engine.frozen_trial(config, 0).state.name == "FAIL"
    assert engine.frozen_trial(config, retry.number).user_attrs == {"retry_of": 0, "task": "1"}
    fresh = _next_task(config, tmp_path, 2)  # the retry was taken once
    assert fresh.params != dead.params


def test_a_retry_that_dies_too_is_not_retried(tmp_path: Path) -> None:
    config, _ = _started(tmp_path, 0)
    retry = _next_task(config, tmp_path, 1)  # task 0 gone: its trial retried by task 1
    # task 1 dies too (its lock was never held in this test: it is free)
    third = _next_task(config, tmp_path, 2)
    assert engine.frozen_trial(config, retry.number).state.name == "FAIL"
    assert third.params != retry.params
    assert "retry_of" not in engine.frozen_trial(config, third.number).user_attrs


def test_a_running_task_keeps_its_trial(tmp_path: Path) -> None:
    config, task = _started(tmp_path, 0)
    fd = os.open(task / ".running", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as sweep_task.hold_point does for the task's life
        other = _next_task(config, tmp_path, 1)
    finally:
        os.close(fd)
    assert engine.frozen_trial(config, 0).state.name == "RUNNING"
    assert other.number == 1
    assert "retry_of" not in engine.frozen_trial(config, 1).user_attrs


@pytest.mark.parametrize("requeued", [True, False])  # False: Slurm's own requeue
def test_a_requeued_task_keeps_its_trial_while_it_waits_to_start_again(
    tmp_path: Path, requeued: bool
) -> None:
    ends = {"event": "attempt_end", "reason": "preempted", "requeued": requeued}
    config, _ = _started(tmp_path, 0, {"event": "attempt_start"}, ends)
    _next_task(config, tmp_path, 1)
    assert engine.frozen_trial(config, 0).state.name == "RUNNING"
