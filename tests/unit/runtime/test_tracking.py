"""The trainer's tracker runs across two attempts, with the real libraries offline: W&B in
offline mode, MLflow on a sqlite store, TensorBoard's event files. Attempt 0 logs steps
1..6 and stops (for a preemption: cleanly; or killed); attempt 1 resumes from the
checkpoint at step 3 and logs 4..10. Each tracker then has each step once, in order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trackers import mlflow_history, tensorboard_scalars, wandb_offline_runs

REPO = Path(__file__).resolve().parents[3]
TRAINER = """
import os, signal, sys
from hpclaunch import runtime
first, last, end = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for step in range(first, last + 1):
    attempt = float(os.environ["HPCLAUNCH_ATTEMPT"])
    runtime.report_progress(step, metrics={"loss": 1 / step, "attempt": attempt}, force=True)
if end == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _attempt(env: dict[str, str], attempt: int, first: int, last: int, end: str) -> int:
    return subprocess.run(
        [sys.executable, "-c", TRAINER, str(first), str(last), end],
        env={**env, "HPCLAUNCH_ATTEMPT": str(attempt)},
        capture_output=True,
        timeout=120,
        check=False,
    ).returncode


@pytest.mark.parametrize("end", ["stopped", "killed"])
def test_one_run_per_tracker_each_step_once_across_a_requeue(tmp_path: Path, end: str) -> None:
    from hpclaunch.tracking.mlflow_runs import create_runs

    job = tmp_path / "job"
    job.mkdir()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    made = create_runs(uri, "exp", "job", {"hpclaunch.submission_id": "s1"})
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HPCLAUNCH_JOB_DIR": str(job),
        "HPCLAUNCH_TRACKING": "wandb,mlflow,tensorboard",
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(job),
        "WANDB_RUN_ID": "s1run",
        "WANDB_RESUME": "allow",
        "WANDB_SILENT": "true",
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_RUN_ID": made["runs"][0],
    }
    first = _attempt(env, 0, 1, 6, end)
    assert first == (-9 if end == "killed" else 0)
    assert _attempt(env, 1, 4, 10, "stopped") == 0
    # MLflow and TensorBoard: 1..10 once each; 7..10 from attempt 1 (4..6 kept from 0).
    expected = [(s, 0.0 if s <= 6 else 1.0) for s in range(1, 11)]
    assert mlflow_history(uri, made["runs"][0], "attempt") == expected
    assert tensorboard_scalars(job / "tensorboard", "attempt") == expected
    # W&B: one run id; a stopped attempt's steps are in its files, a killed one's never
    # were (W&B writes them at the end), so attempt 1 logs all it retrained.
    runs = wandb_offline_runs(job / "wandb")
    assert len(runs) == 2
    if end == "stopped":
        assert [r.steps for r in runs] == [(1, 2, 3, 4, 5, 6), (7, 8, 9, 10)]
        assert {i for r in runs for i in r.run_ids} == {"s1run"}
    else:
        assert [r.steps for r in runs] == [(), (4, 5, 6, 7, 8, 9, 10)]
        assert runs[1].run_ids == {"s1run"}


def test_a_tracker_the_jobs_python_lacks_is_named_with_the_fix(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
        "HPCLAUNCH_JOB_DIR": str(tmp_path),
        "HPCLAUNCH_TRACKING": "wandb",
    }
    (tmp_path / "wandb.py").write_text("raise ImportError('no wandb here')\n")
    out = subprocess.run(
        [sys.executable, "-c", TRAINER, "1", "1", "stopped"],
        env={**env, "HPCLAUNCH_ATTEMPT": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert "the job's tracking: names wandb, but this Python" in out.stderr
    assert "pip install 'hpclaunch[tracking]'" in out.stderr
