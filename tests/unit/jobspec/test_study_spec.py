"""An adaptive sweep's spec (sweep: with metric:): what it takes, and the errors a user
makes, each naming the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import load_spec

HEAD = "name: t\nlauncher: srun\ncommand: [python, train.py, --lr, '{lr}']\nsweep:\n"


def _load(tmp_path: Path, sweep: str) -> object:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + sweep)
    return load_spec(path).sweep


def _error(tmp_path: Path, sweep: str) -> str:
    with pytest.raises(SpecError) as info:
        _load(tmp_path, sweep)
    text = str(info.value)
    assert "job.yaml" in text
    assert "errors.pydantic.dev" not in text
    return text


def test_a_tpe_sweep_with_asha() -> None:
    sweep = load_spec(Path(__file__).parents[3] / "examples" / "tpe-sweep.yaml").sweep
    assert sweep is not None
    assert sweep.is_study
    assert sweep.method == "tpe"
    assert sweep.metric is not None
    assert (sweep.metric.name, sweep.metric.goal) == ("val_loss", "minimize")
    assert sweep.early_terminate is not None
    assert sweep.early_terminate.type == "asha"
    assert sweep.trial_count == sweep.trials


def test_a_grid_study_runs_every_point_by_default(tmp_path: Path) -> None:
    sweep = _load(
        tmp_path,
        "  method: grid\n  metric: {name: acc, goal: maximize}\n"
        "  parameters: {lr: [0.1, 0.01], width: [64, 128, 256]}\n",
    )
    assert sweep.trial_count == 6  # type: ignore[attr-defined]


def test_distribution_words_mean_log_and_int(tmp_path: Path) -> None:
    sweep = _load(
        tmp_path,
        "  method: tpe\n  metric: {name: loss}\n  trials: 4\n  parameters:\n"
        "    lr: {distribution: log_uniform, min: 0.0001, max: 0.1}\n"
        "    layers: {distribution: int_uniform, min: 1, max: 8}\n",
    )
    lr, layers = sweep.parameters["lr"], sweep.parameters["layers"]  # type: ignore[attr-defined]
    assert (lr.log, lr.integer) == (True, False)
    assert (layers.log, layers.integer) == (False, True)


@pytest.mark.parametrize(
    ("sweep", "words"),
    [
        (  # a sampler without a metric
            "  method: tpe\n  trials: 4\n  parameters: {lr: [0.1]}\n",
            ["sweep", "method tpe", "metric: {name: val_loss, goal: minimize}"],
        ),
        (  # early termination on an enumerated sweep
            "  method: grid\n  parameters: {lr: [0.1]}\n  early_terminate: {type: asha}\n",
            ["early_terminate", "needs metric:"],
        ),
        (  # a distribution without its bounds
            "  method: tpe\n  metric: {name: l}\n  trials: 4\n"
            "  parameters: {lr: {distribution: log_uniform, min: 0.001}}\n",
            ["sweep.parameters", "lr", "log_uniform needs max"],
        ),
        (  # a distribution's name misspelt
            "  method: tpe\n  metric: {name: l}\n  trials: 4\n"
            "  parameters: {lr: {distribution: loguniform, min: 0.001, max: 0.1}}\n",
            ["'loguniform'", "log_uniform"],
        ),
        (  # how many trials?
            "  method: tpe\n  metric: {name: l}\n  parameters: {lr: [0.1, 0.2]}\n",
            ["method tpe needs trials"],
        ),
        (  # count is the enumerated random sweep's word
            "  method: random\n  metric: {name: l}\n  count: 5\n"
            "  parameters: {lr: {min: 0.1, max: 0.2}}\n",
            ["count", "trials: N"],
        ),
        (  # more trials than a grid has points
            "  method: grid\n  metric: {name: l}\n  trials: 9\n  parameters: {lr: [0.1, 0.2]}\n",
            ["trials (9)", "grid's 2 points"],
        ),
        (  # a goal that is not one
            "  method: tpe\n  metric: {name: l, goal: max}\n  trials: 2\n"
            "  parameters: {lr: [0.1]}\n",
            ["sweep.metric.goal", "minimize", "maximize"],
        ),
        (  # the metric's name alone: which way is better?
            "  method: tpe\n  metric: val_loss\n  trials: 2\n  parameters: {lr: [0.1]}\n",
            ["sweep.metric", "{name: val_loss, goal: minimize}", "maximize"],
        ),
        (  # max_steps is Hyperband's
            "  method: tpe\n  metric: {name: l}\n  trials: 2\n  parameters: {lr: [0.1]}\n"
            "  early_terminate: {type: asha, max_steps: 100}\n",
            ["sweep.early_terminate", "max_steps", "hyperband only"],
        ),
    ],
)
def test_mistakes_are_named(tmp_path: Path, sweep: str, words: list[str]) -> None:
    text = _error(tmp_path, sweep)
    for word in words:
        assert word in text, (word, text)


def test_a_study_needs_the_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: t\ncommand: [python, train.py, '{lr}']\nsweep:\n  method: tpe\n"
        "  metric: {name: l}\n  trials: 2\n  parameters: {lr: [0.1]}\n"
    )
    with pytest.raises(SpecError, match=r"launcher none has no sidecar: set\s+launcher: srun"):
        load_spec(path)
