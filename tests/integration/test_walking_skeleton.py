"""The whole flow on the real local cluster: spec -> plan -> render -> sbatch -> status."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import REPO, Run, job_status, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]


def test_hello_is_seen_running_then_completed(hpclaunch: Run) -> None:
    # hello's command waits for a file instead of its 2-s sleep: under a loaded CI machine
    # a status call once took longer than the whole job (CI, clean-clone run 22).
    release = Path.home() / ".hpclaunch-it" / f"release-{uuid.uuid4().hex[:8]}"
    release.parent.mkdir(parents=True, exist_ok=True)
    hold = f'echo "hello from $(hostname)"; while [ ! -e {release} ]; do sleep 0.1; done'
    command = json.dumps(["bash", "-c", hold])
    submitted = hpclaunch("submit", "examples/hello.yaml", "--set", f"command={command}")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert job_id.isdigit()
    try:
        running = wait_state(hpclaunch, job_id, {"RUNNING", "COMPLETED"})
        assert running["state"] == "RUNNING", "it waits for its file: status sees it running"
        assert running["nodes"] in {"n1", "n2", "n3", "n4"}
    finally:
        release.touch()
    done = wait_state(hpclaunch, job_id, {"COMPLETED", "FAILED", "CANCELLED"})
    release.unlink()
    assert done["state"] == "COMPLETED"
    assert done["exit_code"] == 0
    table = hpclaunch("status", job_id)
    assert re.search(rf"{job_id}\s+hello\s+medium\s+in-quota\s+normal\s+COMPLETED", table.stdout), (
        table.stdout
    )
    assert re.search(r"hello from n[1-4]\n", hpclaunch.log(job_id))


def test_four_node_job_runs_on_four_nodes_each_with_a_gpu(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(
        command=["bash", "-c", 'echo "task on $(hostname) gpus=${CUDA_VISIBLE_DEVICES:-none}"'],
        launcher="srun",
        resources={"nodes": 4, "gpus_per_node": 1, "time": "00:05:00", "mem": "100M"},
    )
    result = hpclaunch("submit", str(spec), "--wait", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    lines = re.findall(r"task on (n\d) gpus=(\S+)", hpclaunch.log(job_id))
    assert sorted(node for node, _ in lines) == ["n1", "n2", "n3", "n4"]
    assert all(gpus != "none" for _, gpus in lines), lines
    info = job_status(hpclaunch, job_id)
    assert info["state"] == "COMPLETED"
    assert info["nodes"] == "n[1-4]"


def test_failed_job_shows_failed_with_its_exit_code(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(command=["bash", "-c", "echo about to fail; exit 3"])
    result = hpclaunch("submit", str(spec), "--wait", "--timeout", "60")
    assert result.returncode == 1
    assert "ended FAILED, exit code 3" in result.stderr
    info = job_status(hpclaunch, result.stdout.strip())
    assert (info["state"], info["exit_code"]) == ("FAILED", 3)


def test_dry_run_submits_nothing(hpclaunch: Run, write_spec: Callable[..., Path]) -> None:
    spec = write_spec(command=["true"])
    name = spec.stem
    result = hpclaunch("submit", str(spec), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"#SBATCH --job-name={name}\n" in result.stdout
    queued = subprocess.run(
        ["squeue", "-h", "--name", name, "-o", "%i"], capture_output=True, text=True, check=True
    )
    assert queued.stdout.strip() == ""
    accounted = subprocess.run(
        ["sacct", "-n", "-X", "--name", name, "-o", "JobID", "-S", "now-1hour"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert accounted.stdout.strip() == ""


def test_the_demo_training_job_trains_with_torch_on_a_node(hpclaunch: Run) -> None:
    pytest.importorskip("torch", reason="the demo trainer needs torch (scripts/test installs it)")
    result = hpclaunch("submit", "examples/train.yaml", "--follow", "--timeout", "120")
    assert result.returncode == 0, result.stderr
    assert re.search(r"job \d+ on n[1-4]: torch ", result.stdout)
    assert "epoch  15/15" in result.stdout
    assert "done: final loss" in result.stdout
    assert (REPO / "examples" / "train.py").exists()
