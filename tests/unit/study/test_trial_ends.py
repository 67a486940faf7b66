"""A trial from the trainer's side (runtime.report_progress with metrics, should_stop) and
the sidecar's (tell_trial), with the real Optuna and a journal in a temporary directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpclaunch import jobdir, runtime
from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.planning.study import study_config
from hpclaunch.runtime import trial as runtime_trial
from hpclaunch.study import engine
from hpclaunch.study.config import read_study, study_text
from hpclaunch.supervise.on_trial import tell_trial, trial_was_pruned

SWEEP = {
    "method": "random",
    "metric": {"name": "val_loss"},
    "parameters": {"lr": {"min": 0.01, "max": 0.1}},
    "trials": 6,
    "seed": 1,
    "early_terminate": {"type": "asha", "min_steps": 1, "reduction_factor": 2},
}


@pytest.fixture
def task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], Path]:
    """A study with three good trials done, and task 3 about to run its trial."""
    config = study_config(Sweep.model_validate(SWEEP), "s1", str(tmp_path))
    study_file = tmp_path / "study.json"
    study_file.write_text(study_text(config))
    engine.create_study(config)
    for index in range(3):
        (tmp_path / str(index)).mkdir()
        done = engine.take_trial(config, tmp_path / str(index), {})
        assert isinstance(done, engine.TakenTrial)
        for step in (1, 2, 4):
            engine.report(config, done.number, step, 1.0 / (step + index))
        engine.finish(config, done.number, "complete", 0.2)
    own = tmp_path / "tasks" / "3"
    (own / jobdir.CONTROL).mkdir(parents=True)
    taken = engine.take_trial(config, own, {})
    assert isinstance(taken, engine.TakenTrial)
    env = {
        "HPCLAUNCH_STUDY": str(study_file),
        "HPCLAUNCH_TRIAL": str(taken.number),
        "HPCLAUNCH_JOB_DIR": str(own),
        "HPCLAUNCH_CONTROL_DIR": str(own / jobdir.CONTROL),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(runtime_trial, "_TRIAL", runtime_trial._Trial())
    return env, own / jobdir.CONTROL


def _state(env: dict[str, str]) -> tuple[str, float | None]:
    config = read_study(env["HPCLAUNCH_STUDY"])
    frozen = engine.frozen_trial(config, int(env["HPCLAUNCH_TRIAL"]))
    return frozen.state.name, frozen.value


def test_a_trial_behind_the_others_is_stopped_and_told_pruned(
    task: tuple[dict[str, str], Path],
) -> None:
    env, control = task
    assert not runtime.should_stop()
    runtime.report_progress(1, metrics={"val_loss": 9.0}, force=True)
    assert runtime.should_stop()
    assert trial_was_pruned(control)
    assert json.loads((control / jobdir.TRIAL_PRUNED).read_text())["step"] == 1
    line = tell_trial(env, control, "pruned", requeued=False)
    assert line is not None
    assert "pruned at step 1" in line
    assert _state(env) == ("PRUNED", 9.0)


def test_a_trial_that_keeps_up_runs_on_and_completes_with_its_final_metric(
    task: tuple[dict[str, str], Path],
) -> None:
    env, control = task
    runtime.report_progress(1, metrics={"val_loss": 0.01}, force=True)
    assert not runtime.should_stop()
    runtime.report_metrics({"val_loss": 0.005})
    assert tell_trial(env, control, "success", requeued=False) is not None
    assert _state(env) == ("COMPLETE", 0.005)


@pytest.mark.parametrize("requeued", [True, False])
def test_a_requeued_or_preempted_attempt_leaves_the_trial_running(
    task: tuple[dict[str, str], Path], requeued: bool
) -> None:
    # requeued False: a preemption whose requeue is Slurm's (PreemptMode=REQUEUE).
    env, control = task
    runtime.report_progress(1, metrics={"val_loss": 0.01}, force=True)
    assert tell_trial(env, control, "preempted", requeued=requeued) is None
    assert _state(env) == ("RUNNING", None)


def test_a_metric_never_reported_fails_the_trial_and_says_how_to_report_it(
    task: tuple[dict[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    env, control = task
    runtime.report_progress(1, metrics={"loss": 0.3}, force=True)  # not the study's metric
    assert "'val_loss', which this report lacks" in capsys.readouterr().err
    line = tell_trial(env, control, "success", requeued=False)
    assert line is not None
    assert "never reported" in line
    assert "report_metrics({'val_loss': value})" in line
    assert _state(env) == ("FAIL", None)


def test_a_crash_fails_the_trial(task: tuple[dict[str, str], Path]) -> None:
    env, control = task
    assert tell_trial(env, control, "user_error", requeued=False) == (
        f"hpclaunch: trial {env['HPCLAUNCH_TRIAL']} failed (user_error)"
    )
    assert _state(env)[0] == "FAIL"


def test_a_trial_early_termination_never_judged_says_why(
    task: tuple[dict[str, str], Path],
) -> None:
    # The "early termination without intermediate values": the trial completes
    # (its final metric reported), and its log says what the pruner lacked.
    env, control = task
    runtime.report_metrics({"val_loss": 0.2})
    line = tell_trial(env, control, "success", requeued=False)
    assert line is not None
    number = env["HPCLAUNCH_TRIAL"]
    assert line.startswith(f"hpclaunch: trial {number} complete: val_loss 0.2\n")
    assert f"early_terminate (asha) could not judge trial {number}" in line
    assert "report_progress(step, metrics={'val_loss': value})" in line
    assert _state(env) == ("COMPLETE", 0.2)
