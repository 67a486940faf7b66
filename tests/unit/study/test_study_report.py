"""An adaptive sweep's report: the study's line, its optimisation history and the
parameters' importances, from a real study (Optuna, a journal in a temporary directory)."""

from __future__ import annotations

import json
from pathlib import Path

from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.ops.sweep_status import SweepStatus
from hpclaunch.planning.study import study_config
from hpclaunch.report.sweep import SweepReport
from hpclaunch.store.sweeps import SweepRecord
from hpclaunch.study import engine
from hpclaunch.study.summary import study_summary
from tests.unit.conftest import run
from tests.unit.fakes import FakeSlurm


def _study(tmp_path: Path) -> dict[str, object]:
    sweep = {
        "method": "random",
        "metric": {"name": "loss"},
        "parameters": {"lr": {"min": 0.001, "max": 0.1, "log": True}, "w": [8, 16]},
        "trials": 6,
        "seed": 2,
    }
    config = study_config(Sweep.model_validate(sweep), "r1", str(tmp_path))
    engine.create_study(config)
    for index in range(5):
        (tmp_path / "tasks" / str(index)).mkdir(parents=True)
        taken = engine.take_trial(config, tmp_path / "tasks" / str(index), {})
        assert isinstance(taken, engine.TakenTrial)
        engine.report(config, taken.number, 1, 1.0)
        if index == 4:
            engine.finish(config, taken.number, "pruned")
        else:
            engine.finish(config, taken.number, "complete", taken.params["lr"] * 10)
    study = engine.load_study(config)
    return {**study_summary(study, "loss"), "importances": engine.importances(study)}


def test_the_report_shows_the_history_and_the_importances(tmp_path: Path) -> None:
    record = SweepRecord.__new__(SweepRecord)  # the page reads only these four fields
    for name, value in (
        ("sweep_id", "r1"),
        ("name", "rep"),
        ("points", 6),
        ("submitted_at", "now"),
    ):
        object.__setattr__(record, name, value)
    report = SweepReport(SweepStatus(record, (), ()), study=_study(tmp_path))
    history = report.history()
    assert history is not None
    assert len(history.dots) == 5  # four complete, one pruned (its last value)
    bars = report.importance_bars()
    shares = [share for _, share, _ in bars]
    assert shares == sorted(shares, reverse=True)  # largest first
    assert {name for name, _, _ in bars} == {"lr", "w"}
    assert abs(sum(share for _, share, _ in bars) - 1.0) < 1e-6
    page = report.html(now=0)
    section = page.split('<section id="study">')[1].split("</section>")[0]
    assert "study: 5 trials (4 complete, 1 pruned); best loss" in section
    assert section.count("<circle ") == 5
    assert section.count("<rect ") == 2
    lines = report.lines()
    assert lines[1].startswith("study: 5 trials")
    assert any(line.startswith("importance of lr: ") for line in lines)


def test_a_study_whose_tasks_are_all_pending_has_a_status_and_a_report(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    # The first task to start makes the study: before that (a busy queue) its status,
    # report and study() said Optuna's "KeyError: 'Record does not exist.'" with a traceback.
    spec = tmp_path / "study.yaml"
    spec.write_text(
        "name: st\ncommand: ['echo', '{lr}']\nproject: research\nlauncher: srun\n"
        "sweep: {method: tpe, metric: {name: loss}, trials: 3,\n"
        "        parameters: {lr: {min: 0.001, max: 0.1}}}\n"
    )
    made = run(env, "sweep", "--no-check", str(spec))
    assert made.exit_code == 0, made.output
    sweep_id = made.stdout.strip()  # the id alone when piped
    shown = run(env, "sweep", "status", sweep_id)
    assert shown.exit_code == 0, shown.output
    assert "study: no trial started yet" in shown.stdout
    data = json.loads(run(env, "sweep", "status", sweep_id, "--json").stdout)
    assert data["study"]["trials"] == {}
    assert data["study"]["best"] is None
    page = tmp_path / "report.html"
    report = run(env, "report", sweep_id, "--html", str(page))
    assert report.exit_code == 0, report.output
    assert "study: no trial started yet" in report.stdout
    assert "study: no trial started yet" in page.read_text()
