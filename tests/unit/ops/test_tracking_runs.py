"""The MLflow runs a submit makes before the first attempt (a real MLflow on a sqlite
store), against the fake Slurm: one run per job, made once however often the submit is
tried again; a sweep's parent run and a child run per task, with the task's parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

import hpclaunch
from hpclaunch.errors import SubmissionError
from hpclaunch.ops.tracking import tracker_lines
from hpclaunch.store.sweeps import find_sweep
from tests.unit.conftest import run
from tests.unit.fakes import FakeSlurm

Env = dict[str, str]


def _spec(tmp_path: Path, uri: str, sweep: str = "") -> Path:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: tracked\ncommand: [python, train.py, '{lr}']\nlauncher: srun\nproject: research\n"
        f"tracking: {{mlflow: {{tracking_uri: '{uri}', experiment: exp}}, wandb: {{}}}}\n" + sweep
    )
    return spec


def test_a_job_gets_one_run_however_often_its_submit_is_tried(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = _spec(tmp_path, uri).read_text().replace(" '{lr}'", "")
    (tmp_path / "job.yaml").write_text(spec)
    job = session.submit(tmp_path / "job.yaml", check=False, submission_id="try-1")
    again = session.submit(tmp_path / "job.yaml", check=False, submission_id="try-1")
    assert again.id == job.id
    kept = json.loads(Path(job.job_dir, "tracking.json").read_text())["mlflow"]
    client = MlflowClient(uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "exp"]
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_id for r in runs] == kept["runs"]  # one run, made once
    assert runs[0].data.tags[MLFLOW_RUN_NAME] == "tracked"
    assert runs[0].data.tags["hpclaunch.submission_id"] == "try-1"
    assert oct(Path(job.job_dir, "tracking.json").stat().st_mode)[-3:] == "600"
    [script] = [text for text, _ in slurm.scripts.values()]
    assert "MLFLOW_TRACKING_URI=" in script
    assert "HPCLAUNCH_TRACKING=" in script


def test_a_sweep_gets_a_parent_run_and_a_child_per_task(
    session: hpclaunch.Session, tmp_path: Path
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = _spec(tmp_path, uri, "sweep: {method: grid, parameters: {lr: [0.1, 0.01]}}\n")
    swept = session.sweeps.submit(spec, check=False)
    job_dir = find_sweep(swept.sweep_id).job_dir
    kept = json.loads(Path(job_dir, "tracking.json").read_text())["mlflow"]
    client = MlflowClient(uri)
    children = [client.get_run(run_id) for run_id in kept["runs"]]
    assert [c.data.tags[MLFLOW_PARENT_RUN_ID] for c in children] == [kept["parent"]] * 2
    assert [c.data.params for c in children] == [{"lr": "0.1"}, {"lr": "0.01"}]
    assert [c.data.tags[MLFLOW_RUN_NAME] for c in children] == [
        "tracked lr=0.1",
        "tracked lr=0.01",
    ]


def test_a_store_that_cannot_be_reached_submits_nothing(
    session: hpclaunch.Session, slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, "file:///nonexistent/mlruns").read_text().replace(" '{lr}'", "")
    (tmp_path / "job.yaml").write_text(spec)
    with pytest.raises(SubmissionError, match="could not make the run") as info:
        session.submit(tmp_path / "job.yaml", check=False)
    assert "nothing was submitted" in (info.value.hint or "")
    assert slurm.submitted == []


def test_a_tracker_missing_from_the_jobs_python_is_said_at_submit(
    env: Env, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    warned: list[str] = []
    session = hpclaunch.Session(warn=warned.append)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: t\ncommand: [python, t.py]\nlauncher: srun\ntracking: {wandb: {}}\n")
    session.submit(spec, check=False)
    [said] = [w for w in warned if w.startswith("tracking:")]
    assert "lacks wandb" in said
    assert "pip install 'hpclaunch[tracking]'" in said


def test_the_report_says_where_the_runs_are_and_what_waits_for_a_sync(
    env: Env, session: hpclaunch.Session, tmp_path: Path
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = _spec(tmp_path, uri).read_text().replace(" '{lr}'", "")
    (tmp_path / "job.yaml").write_text(spec)
    job = session.submit(tmp_path / "job.yaml", check=False)
    job_dir = Path(job.job_dir)
    [run_id] = json.loads((job_dir / "tracking.json").read_text())["mlflow"]["runs"]
    for name in ("offline-run-20261207_010000-x", "offline-run-20261207_020000-x"):
        (job_dir / "wandb" / name).mkdir(parents=True)
    (job_dir / "wandb" / "offline-run-20261207_010000-x" / "run-x.wandb.synced").touch()
    (job_dir / "tensorboard").mkdir()
    lines = tracker_lines(session, str(job_dir), job.id)
    assert lines == [
        f"MLflow: run {run_id} in {uri}",
        f"W&B: 1 offline run directory not uploaded: hpclaunch sync {job.id}",
        f"TensorBoard: {job_dir}/tensorboard (hpclaunch forward {job.id} 6006 while it runs)",
    ]
    shown = run(env, "report", job.id)
    assert shown.exit_code == 0, shown.output
    assert "trackers:\n  MLflow: run " in shown.stdout
    assert f"hpclaunch sync {job.id}" in shown.stdout
    dry = run(env, "sync", job.id, "--dry-run")
    assert dry.stdout.split() == ["to", "sync:", f"{job_dir}/wandb/offline-run-20261207_020000-x"]


def test_a_job_without_trackers_has_nothing_to_sync(
    env: Env, session: hpclaunch.Session, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: plain\ncommand: [python, t.py]\n")
    job = session.submit(spec, check=False)
    assert tracker_lines(session, job.job_dir, job.id) == []
    said = run(env, "sync", job.id)
    assert said.exit_code == 0, said.output
    assert said.stdout == f"{job.id}: no offline W&B run to sync\n"
