"""``hpclaunch estimate`` on the cluster: after two completed runs of a spec, its run times
and a suggested time limit (its 30 minutes are far above a few seconds), with Slurm's own
start estimate (``sbatch --test-only``: nothing queued). The busy-cluster case, where Slurm
expects a start in the future, is in test_queue_tier_on_cluster.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Run

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]


def test_estimate_after_two_runs_of_the_spec(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(
        command=["sleep", "2"], tier="medium", resources={"time": "00:30:00", "mem": "50M"}
    )
    for _ in range(2):
        done = hpclaunch("submit", "--wait", str(spec), timeout=180)
        assert done.returncode == 0, done.stderr
    out = hpclaunch("estimate", str(spec), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["past"]) == 2
    assert all(p["matched"] == "spec" and 2 <= p["ran_s"] <= 60 for p in data["past"])
    assert data["time_limit"] == 1800
    assert data["suggested_time"] == 300  # 1.5 x the longest run, at least 5 minutes
    assert data["slurm"] is not None, data["why_not"]
    assert data["slurm"]["partition"]
    text = hpclaunch("estimate", str(spec))
    assert "2 completed runs of the same spec ran " in text.stdout
    assert "suggested: --time 5:00 (resources.time)" in text.stdout
    queued = subprocess.run(
        ["squeue", "-h", f"--name={data['job_name']}", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert queued.stdout.strip() == ""  # the estimates queued nothing
