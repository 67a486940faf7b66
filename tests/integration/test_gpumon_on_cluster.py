"""GPU monitoring and the W&B run id under the sidecar on the real cluster.

The cluster's GPUs are fake devices (no NVIDIA driver): every node records
``gpu_monitor_off`` once per attempt (srun launcher with 2 tasks per node: only the node's
first task samples), ``hpclaunch top`` says why there are no samples, and the job, requeued
with ``scontrol requeue`` after its first attempt started, sees the same ``WANDB_RUN_ID``
(the submission id) in both attempts. With an idle guard, ``hpclaunch status`` says while
it runs that the guard can never stop it (issue 45: it said nothing anywhere), and the
operator's requeue is told to the job's webhook (it sent nothing).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webhook import Webhook, webhook_server

from .conftest import Cli

pytestmark = pytest.mark.slurm

VENV = str(Path(__file__).resolve().parents[2] / ".venv")
# Each task writes what it sees to the job dir; attempt 0 waits to be requeued.
DUMP = (
    "import os, pathlib, time; e = os.environ; "
    "d = pathlib.Path(e['HPCLAUNCH_JOB_DIR']); a = e['HPCLAUNCH_ATTEMPT']; "
    "(d / f\"wandb-{a}-{e['SLURM_PROCID']}.txt\").write_text("
    "e.get('WANDB_RUN_ID', '-') + ' ' + e.get('WANDB_RESUME', '-')); "
    "time.sleep(30 if a == '0' else 0)"
)


def _wait_for(path_glob: tuple[Path, str], count: int, timeout: float) -> list[Path]:
    folder, pattern = path_glob
    deadline = time.monotonic() + timeout
    while True:
        found = sorted(folder.glob(pattern)) if folder.exists() else []
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"only {found} in {folder} after {timeout} s"
        time.sleep(0.2)


def _gone(job_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.strip():
        assert time.monotonic() < deadline, f"job {job_id} still queued after {timeout} s"
        time.sleep(0.5)


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with webhook_server() as server:
        yield server


def test_monitor_off_once_per_node_top_says_why_and_wandb_run_survives_requeue(
    hpclaunch: Cli, write_spec: object, tmp_path: Path, hook: Webhook
) -> None:
    hpclaunch.env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    saved = hpclaunch("notify", "add", "lab", input_text=hook.url + "\n")
    assert saved.returncode == 0, saved.stderr
    spec = write_spec(  # type: ignore[operator]
        command=["python", "-c", DUMP],
        launcher="srun",
        tier="low",
        venv=VENV,
        idle={"notify_after": 10, "stop_after": 30},
        notify={"webhook": "lab", "events": ["started", "preempted", "resumed"]},
        resources={
            "nodes": 2,
            # srun launcher, 2 GPUs, the default 1 CPU per task: the plan must allocate
            # 2 tasks per node or the step is refused ("More processors requested").
            "gpus_per_node": 2,
            "time": "00:02:00",
            "mem": "100M",
        },
    )
    out = hpclaunch("submit", str(spec))
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().splitlines()[-1]
    record = hpclaunch.submitted()[job_id]
    job_dir = Path(record["job_dir"])

    # Generous: the cluster is shared, the job may wait for whole nodes.
    _wait_for((job_dir, "wandb-0-*.txt"), 4, 300)
    # Each node said at its start that it samples nothing; status says what that means.
    status = hpclaunch("status", job_id)
    assert status.returncode == 0, status.stderr
    line = next(x for x in status.stdout.splitlines() if "idle guard" in x)
    said = f"job {job_id}: the idle guard cannot stop it, no GPU is sampled ("
    assert line.startswith(said), line
    assert line.count(": nvmlInit failed") + line.count(": pynvml") == 2, line  # both nodes
    subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True)
    _wait_for((job_dir, "wandb-1-*.txt"), 4, 300)
    _gone(job_id, 60)

    # The same W&B run in both attempts: the submission id, resumed.
    seen = {p.name: p.read_text() for p in job_dir.glob("wandb-*.txt")}
    assert set(seen.values()) == {f"{record['submission_id']} allow"}, seen

    ledger = json.loads(hpclaunch("events", job_id, "--json").stdout)["ledger"]
    off = [e for e in ledger if e["event"] == "gpu_monitor_off"]
    for attempt in (0, 1):
        nodes = [e["node"] for e in off if e["attempt"] == attempt]
        assert len(nodes) == 2, off  # 2 nodes x 2 tasks: one sampler per node
        assert len(set(nodes)) == 2, off
    # No NVIDIA driver here (or, without the [gpu] extra, no pynvml).
    assert all("nvmlInit failed" in e["reason"] or "pynvml" in e["reason"] for e in off), off
    assert not (job_dir / "metrics.jsonl").exists()

    top = hpclaunch("top", job_id)
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("no GPU samples: "), top.stdout
    assert off[0]["reason"] in top.stdout
    data = json.loads(hpclaunch("top", job_id, "--json").stdout)
    assert data["samples"] == []
    assert len(data["off"]) == 2  # one line per node (the same reason in both attempts)

    # The operator's requeue, told once, from the node, as a preemption it resumes from.
    deadline = time.monotonic() + 30
    while len(hook.of_job(job_id)) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    told = [(b["hpclaunch"]["event"], b["text"]) for b in hook.of_job(job_id)]
    assert [event for event, _ in told] == ["started", "preempted", "resumed"], told
    assert "requeued by Slurm" in told[1][1], told
    assert "scontrol requeue by a user or operator" in told[1][1], told
