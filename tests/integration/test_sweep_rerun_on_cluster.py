"""A sweep point whose task Slurm ends before the batch script starts is run again by the
command `sweep status` prints (issue 26, part 4).

Slurm fails a task before its script when slurmstepd cannot open its output file: a
directory where ``slurm-<job id>.out`` should be (FAILED, exit 0:53, the node stays up;
measured on 25.11). That is forced here on one task of a 3-point sweep, the same end the
slurmctld-kill fault test meets by chance ("Duplicate jobid" launches). `sweep status`
marks the point ``never_ran`` and names `hpclaunch sweep rerun ID`; the rerun runs it once,
its new task replaces the old one, and a second rerun submits nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Cli

pytestmark = [pytest.mark.slurm, pytest.mark.backends]


def _status(hpclaunch: Cli, sweep_id: str) -> dict[str, Any]:
    out = hpclaunch("sweep", "status", sweep_id, "--json", "--no-metrics")
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _until(what: str, check: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


@pytest.fixture
def marks() -> Iterator[Path]:
    """A directory the nodes see (the home directory is shared), where each run of a point
    leaves one file."""
    path = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_point_slurm_failed_before_its_script_ran_is_rerun_once(
    hpclaunch: Cli, tmp_path: Path, marks: Path
) -> None:
    sweep_id = f"rerun-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": f"it-{sweep_id}",
                "project": "research",
                "launcher": "srun",
                "venv": str(REPO / ".venv"),
                "command": ["bash", "-c", 'touch "$1/$2.$SLURM_JOB_ID"', "mark", str(marks), "{i}"],
                "resources": {"time": "2", "mem": "100M"},
                # Time to break one task's output before any starts (the rerun waits too).
                "sbatch_extra": {"--begin": "now+15"},
                "sweep": {"method": "list", "points": [{"i": i} for i in range(3)]},
            }
        )
    )
    out = hpclaunch("sweep", "submit", str(spec), "--sweep-id", sweep_id)
    assert out.returncode == 0, out.stderr
    array = _status(hpclaunch, sweep_id)["arrays"][0]["job_id"]
    # Task 1 gets its own job id once split off the array (any update does that); a
    # directory at its output path makes slurmstepd fail it before the script runs.
    subprocess.run(["scontrol", "update", f"JobId={array}_1", "Nice=0"], check=True)
    shown = subprocess.run(
        ["scontrol", "show", "job", f"{array}_1"], capture_output=True, text=True, check=True
    ).stdout
    task_job = shown.split("JobId=", 1)[1].split()[0]
    job_dir = Path(hpclaunch.submitted_rows()[0]["job_dir"])
    (job_dir / f"slurm-{task_job}.out").mkdir()

    def ended() -> bool:
        counts = _status(hpclaunch, sweep_id)["counts"]
        return set(counts) <= {"COMPLETED", "FAILED"} and sum(counts.values()) == 3

    _until("the three tasks to end", ended)
    status = _status(hpclaunch, sweep_id)
    assert status["counts"] == {"COMPLETED": 2, "FAILED": 1}, status["counts"]
    lost = [t for t in status["tasks"] if t["never_ran"]]
    assert [(t["point"], t["job_id"], t["state"]) for t in lost] == [(1, f"{array}_1", "FAILED")]
    (said,) = [p for p in status["problems"] if "never ran" in p]
    assert f"'hpclaunch sweep rerun {sweep_id}'" in said

    rerun = hpclaunch("sweep", "rerun", sweep_id)
    assert rerun.returncode == 0, rerun.stderr
    assert "1 point(s) submitted again (1) as " in rerun.stdout, rerun.stdout
    _until("the rerun to end", lambda: _status(hpclaunch, sweep_id)["counts"] == {"COMPLETED": 3})
    final = _status(hpclaunch, sweep_id)
    rerun_task = final["tasks"][1]["job_id"]
    assert rerun_task.endswith("_1")
    assert not rerun_task.startswith(f"{array}_")
    assert [a["tasks"] for a in final["arrays"]] == [None, [1]]
    runs = Counter(p.name.split(".")[0] for p in marks.iterdir())
    assert runs == {"0": 1, "1": 1, "2": 1}, runs  # every point once
    again = hpclaunch("sweep", "rerun", sweep_id)
    assert again.returncode == 0, again.stderr
    assert "nothing to rerun" in again.stdout
    logs = hpclaunch("logs", rerun_task)
    assert logs.returncode == 0, logs.stderr
    assert "sweep point 1" in logs.stdout + logs.stderr
