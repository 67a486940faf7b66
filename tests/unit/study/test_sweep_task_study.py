"""The sweep task of an adaptive sweep, run as the batch script runs it (a process that
execs the command): it takes its trial, puts the trial's values in the command and the
environment, and points everything at the task's own directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.planning.study import study_config
from hpclaunch.study.config import study_text

SWEEP = {
    "method": "random",
    "metric": {"name": "loss"},
    "parameters": {"x": {"min": 0.0, "max": 1.0}, "w": [8, 16]},
    "trials": 2,
}
SHOW = (
    'printf "%s|%s|%s|%s\\n" "$HPCLAUNCH_JOB_DIR" "$HPCLAUNCH_TRIAL" "$HPCLAUNCH_SWEEP_PARAMS" '
    '"$1" >> "$0"'
)


def _run(job_dir: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HPCLAUNCH_JOB_DIR=str(job_dir), HPCLAUNCH_SWEEP_INDEX="0")
    argv = [
        sys.executable,
        "-m",
        "hpclaunch.supervise.sweep_task",
        "--params",
        str(job_dir / "sweep-params.jsonl"),
        "--study",
        str(job_dir / "study.json"),
        "--",
        "sh",
        "-c",
        SHOW,
        str(out),
        "{x}",
    ]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def test_a_task_runs_its_trial_in_its_own_directory_and_resumes_it(tmp_path: Path) -> None:
    config = study_config(Sweep.model_validate(SWEEP), "t1", str(tmp_path))
    (tmp_path / "study.json").write_text(study_text(config))
    (tmp_path / "sweep-params.jsonl").write_text(
        "".join(json.dumps({"index": i, "params": {}}) + "\n" for i in range(2))
    )
    out = tmp_path / "seen.txt"
    first = _run(tmp_path, out)
    assert first.returncode == 0, first.stderr
    assert "sweep point 0: trial 0\n" in first.stdout
    again = _run(tmp_path, out)  # the task requeued: the same trial
    assert again.returncode == 0, again.stderr
    assert "trial 0 (resumed after a requeue)" in again.stdout
    rows = [line.split("|") for line in out.read_text().splitlines()]
    assert len(rows) == 2
    assert rows[0] == rows[1]
    job_dir, number, params, word = rows[0]
    assert job_dir == str(tmp_path / "tasks" / "0")  # not tasks/0/tasks/0
    assert number == "0"
    point = json.loads(params)
    assert set(point) == {"x", "w"}
    assert word == str(point["x"])
    trial = json.loads((tmp_path / "tasks" / "0" / "trial.json").read_text())
    assert trial == {"number": 0, "params": point}
    assert not (tmp_path / "tasks" / "0" / "tasks").exists()
