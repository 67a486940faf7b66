"""The Optuna adaptor with the real library, a journal file in a temporary directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.planning.study import study_config
from hpclaunch.study import engine
from hpclaunch.study.config import TRIAL_FILE, read_study, study_text
from hpclaunch.study.summary import study_summary, summary_line


def _config(tmp_path: Path, **sweep: Any) -> Any:
    spec = {
        "method": "tpe",
        "metric": {"name": "val_loss"},
        "parameters": {
            "lr": {"distribution": "log_uniform", "min": 1e-4, "max": 1e-1},
            "width": [64, 128, 256],
        },
        "trials": 8,
        "seed": 3,
        **sweep,
    }
    config = study_config(
        Sweep.model_validate(spec), f"s{len(list(tmp_path.iterdir()))}", str(tmp_path)
    )
    engine.create_study(config)
    return config


def test_the_description_round_trips(tmp_path: Path) -> None:
    config = _config(tmp_path, early_terminate={"type": "asha", "min_steps": 2})
    (tmp_path / "study.json").write_text(study_text(config))
    assert read_study(tmp_path / "study.json") == config
    assert config.journal == str(tmp_path / "study.journal")
    assert config.parameters["lr"] == {"low": 1e-4, "high": 1e-1, "log": True, "int": False}
    assert config.pruner == {
        "type": "asha",
        "min_steps": 2,
        "reduction_factor": 3,
        "max_steps": None,
    }


def test_a_task_takes_a_trial_once_and_resumes_it_after_a_requeue(tmp_path: Path) -> None:
    config = _config(tmp_path)
    task = tmp_path / "tasks" / "0"
    task.mkdir(parents=True)
    first = engine.take_trial(config, task, {"job_id": "7_0"})
    assert isinstance(first, engine.TakenTrial)
    assert not first.resumed
    assert 1e-4 <= first.params["lr"] <= 1e-1
    assert first.params["width"] in (64, 128, 256)
    assert json.loads((task / TRIAL_FILE).read_text())["number"] == first.number
    engine._OPEN.clear()  # the next attempt is another process
    again = engine.take_trial(config, task, {"job_id": "7_0"})
    assert again == engine.TakenTrial(first.number, first.params, resumed=True)
    assert len(engine.load_study(config).trials) == 1  # no second trial asked
    engine.finish(config, first.number, "complete", 0.5)
    done = engine.take_trial(config, task, {"job_id": "7_0"})
    assert not isinstance(done, engine.TakenTrial)
    assert done.state.name == "COMPLETE"
    assert done.value == 0.5
    assert done.user_attrs == {"job_id": "7_0"}


def test_a_step_reported_again_after_a_resume_keeps_its_first_value(tmp_path: Path) -> None:
    config = _config(tmp_path)
    (tmp_path / "t").mkdir()
    taken = engine.take_trial(config, tmp_path / "t", {})
    assert isinstance(taken, engine.TakenTrial)
    for step in (1, 2, 3):
        engine.report(config, taken.number, step, 1.0 / step)
    engine._OPEN.clear()
    with pytest.warns(UserWarning, match="already reported"):
        engine.report(config, taken.number, 3, 99.0)  # retrained after the checkpoint at 2
    engine.report(config, taken.number, 4, 0.2)
    values = engine.frozen_trial(config, taken.number).intermediate_values
    assert values == {1: 1.0, 2: 0.5, 3: 1.0 / 3, 4: 0.2}


def test_asha_stops_a_trial_behind_the_others_at_its_rung(tmp_path: Path) -> None:
    config = _config(
        tmp_path, early_terminate={"type": "asha", "min_steps": 1, "reduction_factor": 2}
    )
    good: list[int] = []
    for index in range(3):  # three trials that learn well, finished
        (tmp_path / str(index)).mkdir()
        taken = engine.take_trial(config, tmp_path / str(index), {})
        assert isinstance(taken, engine.TakenTrial)
        pruned = [engine.report(config, taken.number, s, 1.0 / (s + index)) for s in (1, 2, 4)]
        assert not any(pruned)
        engine.finish(config, taken.number, "complete", 1.0 / (4 + index))
        good.append(taken.number)
    (tmp_path / "bad").mkdir()
    bad = engine.take_trial(config, tmp_path / "bad", {})
    assert isinstance(bad, engine.TakenTrial)
    assert engine.report(config, bad.number, 1, 50.0)  # far behind at the first rung
    engine.finish(config, bad.number, "pruned")
    frozen = engine.frozen_trial(config, bad.number)
    assert frozen.state.name == "PRUNED"
    assert frozen.value == 50.0


def test_a_grid_gives_each_task_another_point(tmp_path: Path) -> None:
    config = _config(
        tmp_path, method="grid", parameters={"a": [1, 2], "b": ["x", "y"]}, trials=None
    )
    seen = set()
    for index in range(4):
        (tmp_path / f"g{index}").mkdir()
        taken = engine.take_trial(config, tmp_path / f"g{index}", {})
        assert isinstance(taken, engine.TakenTrial)
        seen.add((taken.params["a"], taken.params["b"]))
    assert seen == {(1, "x"), (1, "y"), (2, "x"), (2, "y")}


def test_the_summary_counts_trials_and_names_the_best(tmp_path: Path) -> None:
    config = _config(tmp_path)
    for index, (how, value) in enumerate([("complete", 0.5), ("pruned", None), ("complete", 0.2)]):
        (tmp_path / f"s{index}").mkdir()
        taken = engine.take_trial(config, tmp_path / f"s{index}", {})
        assert isinstance(taken, engine.TakenTrial)
        if how == "pruned":
            engine.report(config, taken.number, 1, 9.0)
        engine.finish(config, taken.number, how, value)
    (tmp_path / "s3").mkdir()
    engine.take_trial(config, tmp_path / "s3", {})  # still running
    summary = study_summary(engine.load_study(config), "val_loss")
    assert summary["trials"] == {"complete": 2, "pruned": 1, "running": 1}
    assert summary["best"]["trial"] == 2
    assert summary["best"]["value"] == 0.2
    line = summary_line(summary)
    assert line.startswith(
        "study: 4 trials (2 complete, 1 pruned, 1 running); best val_loss 0.2 (trial 2: lr="
    )


def test_seeded_tasks_that_start_together_draw_different_points(tmp_path: Path) -> None:
    # Each task is its own process with its own sampler: one seed for all drew one point.
    config = _config(tmp_path, method="random")
    drawn = []
    for index in range(4):
        engine._OPEN.clear()  # a process of its own
        (tmp_path / "tasks" / str(index)).mkdir(parents=True)
        taken = engine.take_trial(config, tmp_path / "tasks" / str(index), {})
        assert isinstance(taken, engine.TakenTrial)
        drawn.append(taken.params["lr"])
    assert len(set(drawn)) == 4
