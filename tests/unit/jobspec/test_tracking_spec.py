"""A spec's tracking: what it takes, the site's defaults, the variables the job gets, and
the mistakes users make, each named with the file, the field and the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.errors import PlanError, SpecError
from hpclaunch.jobspec.job import load_spec
from hpclaunch.jobspec.tracking import Tracking
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.supervise.tracker_env import task_tracker_env, tracker_env
from tests.unit.conftest import HOME, SUBMISSION_ID, make_site, make_spec

PlanFor = Callable[..., SubmissionPlan]
HEAD = "name: t\nlauncher: srun\ncommand: [python, train.py]\n"
JOB_DIR = f"{HOME}/.hpclaunch/jobs/{SUBMISSION_ID}"


def _error(tmp_path: Path, tracking: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + tracking)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    text = str(info.value)
    assert "job.yaml" in text
    assert "tracking" in text
    return text


@pytest.mark.parametrize(
    ("tracking", "words"),
    [
        ("tracking: {wandbb: {project: p}}", ["unknown tracker 'wandbb'", "'wandb'"]),
        ("tracking: {mlfow: true}", ["unknown tracker 'mlfow'", "'mlflow'"]),
        ("tracking: {mlflow: {tracking_uri: /shared/mlruns}}", ["no URI", "sqlite:////"]),
        ("tracking: {wandb: {mode: offlne}}", ["mode", "online", "offline", "auto"]),
        ("tracking: {wandb: {projct: p}}", ["projct"]),
    ],
)
def test_mistakes_are_named(tmp_path: Path, tracking: str, words: list[str]) -> None:
    text = _error(tmp_path, tracking + "\n")
    for word in words:
        assert word in text


def _env(plan: SubmissionPlan) -> dict[str, str]:
    return dict(plan.runtime_env)


def test_wandb_offline_where_the_site_says_the_nodes_have_no_internet(plan_for: PlanFor) -> None:
    spec = make_spec(tracking={"wandb": {"project": "vision", "tags": ["a", "b"]}})
    online = _env(plan_for(spec))
    assert online["WANDB_MODE"] == "online"  # auto, the site says nothing
    assert online["WANDB_DIR"] == JOB_DIR
    assert (online["WANDB_PROJECT"], online["WANDB_NAME"], online["WANDB_TAGS"]) == (
        "vision",
        "test",
        "a,b",
    )
    assert online["HPCLAUNCH_TRACKING"] == "wandb"
    site = make_site(tracking={"offline": True, "wandb": {"entity": "lab", "project": "x"}})
    offline = _env(plan_for(spec, on=site))
    assert offline["WANDB_MODE"] == "offline"
    assert offline["WANDB_ENTITY"] == "lab"  # the site's default
    assert offline["WANDB_PROJECT"] == "vision"  # the spec's own wins
    forced = make_spec(tracking={"wandb": {"mode": "online"}})
    assert _env(plan_for(forced, on=site))["WANDB_MODE"] == "online"


def test_the_site_fills_mlflow_but_turns_on_no_tracker(plan_for: PlanFor) -> None:
    site = make_site(tracking={"mlflow": {"tracking_uri": "http://mlflow:5000"}})
    plain = plan_for(make_spec(), on=site)
    assert plain.tracking is None
    assert not any(k.startswith(("MLFLOW_", "WANDB_MODE")) for k in _env(plain))
    tracked = plan_for(make_spec(tracking={"mlflow": True, "tensorboard": True}), on=site)
    env = _env(tracked)
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert env["MLFLOW_EXPERIMENT_NAME"] == "Default"
    assert env["HPCLAUNCH_TRACKING"] == "mlflow,tensorboard"
    assert (
        "tracking: MLflow run made at submit in http://mlflow:5000; TensorBoard files in the "
        "job directory's tensorboard/ (runtime.report_progress(step, metrics=...) logs)"
    ) in tracked.notes
    home = plan_for(make_spec(tracking={"mlflow": {"tracking_uri": "sqlite:///~/m.db"}}))
    assert _env(home)["MLFLOW_TRACKING_URI"] == f"sqlite:///{HOME}/m.db"  # the cluster's ~
    assert home.tracking.mlflow.tracking_uri == f"sqlite:///{HOME}/m.db"
    with pytest.raises(PlanError, match="tracking_uri") as info:
        plan_for(make_spec(tracking={"mlflow": {"experiment": "e"}}))
    assert "sqlite:////" in (info.value.hint or "")


def test_each_attempt_continues_the_run_tagged_with_the_job_and_attempt(tmp_path: Path) -> None:
    (tmp_path / "tracking.json").write_text('{"mlflow": {"runs": ["run-0", "run-1"]}}')
    env = {
        "HPCLAUNCH_SUBMISSION_ID": "ab12",
        "HPCLAUNCH_TRACKING": "wandb,mlflow",
        "HPCLAUNCH_JOB_DIR": str(tmp_path),
        "SLURM_JOB_ID": "77",
        "SLURM_CLUSTER_NAME": "hpclaunch",
        "WANDB_TAGS": "mine",
    }
    out = tracker_env(env, attempt=2)
    assert out["WANDB_RUN_ID"] == "ab12"
    assert out["WANDB_RESUME"] == "allow"
    assert out["WANDB_TAGS"] == "mine,slurm-job:77,attempt:2,cluster:hpclaunch"
    assert out["MLFLOW_RUN_ID"] == "run-0"
    # A sweep task: its own child run, and a run named after its point in the sweep's group.
    task = {
        **env,
        "HPCLAUNCH_SWEEP_DIR": str(tmp_path),
        "HPCLAUNCH_SWEEP_INDEX": "1",
        "SLURM_ARRAY_JOB_ID": "70",
        "SLURM_ARRAY_TASK_ID": "1",
    }
    assert tracker_env(task, attempt=0)["MLFLOW_RUN_ID"] == "run-1"
    assert "slurm-job:70_1" in tracker_env(task, attempt=0)["WANDB_TAGS"]
    named = task_tracker_env({**task, "WANDB_NAME": "t"}, {"lr": 0.1}, trial=3)
    assert named == {"WANDB_NAME": "t trial 3 lr=0.1", "WANDB_RUN_GROUP": "ab12"}
    # What the user set is kept; without trackers, nothing but W&B's run id.
    assert "MLFLOW_RUN_ID" not in tracker_env({**env, "MLFLOW_RUN_ID": "x"}, attempt=0)
    bare = tracker_env({"HPCLAUNCH_SUBMISSION_ID": "ab12"}, attempt=0)
    assert set(bare) == {"WANDB_RUN_ID", "WANDB_RESUME"}


def test_wandb_true_takes_every_field_from_the_site() -> None:
    assert Tracking.model_validate({"wandb": True}).names == ("wandb",)
