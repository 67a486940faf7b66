"""Tracker runs across a requeue on the real cluster, with both backends: a job tracked by
W&B (offline), MLflow (a sqlite store on the shared filesystem) and TensorBoard is
preempted at step 5: warned as Slurm warns a preempted job (``scancel --batch
--signal=USR1``, what ``--signal=B:USR1`` sends), its trainer stops at the sidecar's
request and the sidecar requeues it; attempt 1 resumes from the checkpoint at step 3 and
reports steps 4 and 5 again. Each tracker holds
one run with every step once, in order: W&B's two offline run directories share the run id
(attempt 0's steps 1-5, attempt 1's 6-8), MLflow's run (made at submit) has 1-8 once,
TensorBoard's event files too; ``hpclaunch sync --dry-run`` finds both W&B directories,
and a sync without a W&B login says so. A two-point sweep's tasks each log to their own
child run of the sweep's MLflow run, and to W&B runs named after their point in the
sweep's group. About 40 s a backend."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.trackers import mlflow_history, tensorboard_scalars, wandb_offline_runs

from .conftest import Cli, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.backends]

REPO = Path(__file__).resolve().parents[2]
TRAINER = str(Path(__file__).with_name("tracked_trainer.py"))
#: The nodes enforce memory: the trainer imports W&B, MLflow and TensorBoard's writer.
TRACKED_MEM = "700M"
PYTHON = str(REPO / ".venv" / "bin" / "python")


def test_a_requeued_job_continues_one_run_in_each_tracker(
    hpclaunch: Cli, write_spec: object, shared_dir: Path, backend: str
) -> None:
    uri = f"sqlite:///{shared_dir / 'mlflow.db'}"
    spec = write_spec(  # type: ignore[operator]
        command=[PYTHON, TRAINER, "--hold"],
        launcher="srun",
        resources={"time": "00:05:00", "mem": TRACKED_MEM},
        env={"WANDB_SILENT": "true"},
        tracking={
            "wandb": {"project": "it", "mode": "offline"},
            "mlflow": {"tracking_uri": uri, "experiment": "it"},
            "tensorboard": True,
        },
    )
    out = hpclaunch("submit", str(spec))
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().splitlines()[-1]
    record = hpclaunch.submitted()[job]
    job_dir = Path(record["job_dir"])
    deadline = time.monotonic() + 120
    while not (job_dir / "holding").exists():
        assert time.monotonic() < deadline, f"job {job} never reached step 5"
        time.sleep(0.3)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, capture_output=True)
    end = wait_state(hpclaunch, job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=180)
    assert end["state"] == "COMPLETED", hpclaunch.log(job)
    log = hpclaunch.log(job)
    assert "attempt 1 resumes at 3" in log
    # One run per tracker, each step once: 1-5 from attempt 0, 6-8 from attempt 1.
    expected = [(step, 0.0 if step <= 5 else 1.0) for step in range(1, 9)]
    [run_id] = json.loads((job_dir / "tracking.json").read_text())["mlflow"]["runs"]
    assert mlflow_history(uri, run_id, "attempt") == expected
    assert tensorboard_scalars(job_dir / "tensorboard", "attempt") == expected
    runs = wandb_offline_runs(job_dir / "wandb")
    assert [r.steps for r in runs] == [(1, 2, 3, 4, 5), (6, 7, 8)]
    assert {i for r in runs for i in r.run_ids} == {record["submission_id"]}
    assert {f"slurm-job:{job}", "attempt:1", "cluster:hpclaunch"} <= set(runs[1].tags)
    # From the login node: the two run directories to upload; without a login, W&B's words.
    dry = hpclaunch("sync", job, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split() == [w for r in runs for w in ("to", "sync:", str(r.path))]
    unlogged = Cli(shared_dir / "state")
    unlogged.env.pop("WANDB_API_KEY", None)
    unlogged.env["HOME"] = str(shared_dir)  # no ~/.netrc: no W&B login
    unlogged.history = hpclaunch.history
    unlogged.env.update({k: v for k, v in hpclaunch.env.items() if k.startswith("XDG_")})
    said = unlogged("sync", job)
    assert said.returncode == 1
    assert "wandb sync of 2 offline run(s) failed" in said.stderr
    assert "wandb login" in said.stderr
    assert "Traceback" not in said.stderr


def test_a_sweeps_tasks_log_to_child_runs_named_after_their_points(
    hpclaunch: Cli, write_spec: object, shared_dir: Path, backend: str
) -> None:
    from mlflow.tracking import MlflowClient
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    uri = f"sqlite:///{shared_dir / 'mlflow.db'}"
    spec = write_spec(  # type: ignore[operator]
        command=[PYTHON, TRAINER, "--lr", "{lr}"],
        launcher="srun",
        resources={"time": "00:05:00", "mem": TRACKED_MEM},
        env={"WANDB_SILENT": "true"},
        sweep={"method": "grid", "parameters": {"lr": [0.1, 0.01]}},
        tracking={"wandb": {"mode": "offline"}, "mlflow": {"tracking_uri": uri}},
    )
    out = hpclaunch("sweep", str(spec))
    assert out.returncode == 0, out.stderr
    sweep_id = out.stdout.strip()
    deadline = time.monotonic() + 120
    while True:
        status = json.loads(hpclaunch("sweep", "status", sweep_id, "--json").stdout)
        if status["counts"].get("COMPLETED") == 2:
            break
        assert time.monotonic() < deadline, status
        time.sleep(1)
    job_dir = Path(status["job_dir"])
    kept = json.loads((job_dir / "tracking.json").read_text())["mlflow"]
    client = MlflowClient(uri)
    for run_id in kept["runs"]:
        assert client.get_run(run_id).data.tags[MLFLOW_PARENT_RUN_ID] == kept["parent"]
        assert mlflow_history(uri, run_id, "attempt") == [(s, 0.0) for s in range(1, 9)]
    runs = wandb_offline_runs(job_dir / "wandb")
    assert len(runs) == 2
    assert len({i for r in runs for i in r.run_ids}) == 2  # a run per task
    assert all(r.steps == tuple(range(1, 9)) for r in runs)
    assert {r.group for r in runs} == {sweep_id}
    assert sorted(r.name.split()[-1] for r in runs) == ["lr=0.01", "lr=0.1"]
