"""``hpclaunch queue`` and ``hpclaunch tier`` on the local cluster (4 nodes x 4 GPUs).

The cluster is filled with work that nothing pending may preempt: project research's
guaranteed 8 GPUs (critical, in-quota), vision's 4 (critical, in-quota) and every CPU of the
fourth node (critical, no GPUs). Then three 1-GPU research jobs wait: critical and medium
are over-quota (research holds its 8), low is preemptible; none of their QOS may preempt.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hpclaunch.slurm.times import slurm_epoch

from .conftest import Run, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends, pytest.mark.exclusive]

WriteSpec = Callable[..., Path]
SLEEP = ["sleep", "600"]


def submit(hpclaunch: Run, spec: Path) -> str:
    result = hpclaunch("submit", str(spec))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def queue(hpclaunch: Run) -> list[dict[str, object]]:
    result = hpclaunch("queue", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    return data


def pending_of(rows: list[dict[str, object]], ids: set[str]) -> list[dict[str, object]]:
    return [r for r in rows if r["job_id"] in ids and r["state"] == "PENDING"]


def wait_reasons(hpclaunch: Run, ids: set[str], timeout: float = 60) -> list[dict[str, object]]:
    """The queue once the scheduler has looked at every job of ``ids`` (reason not None)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = queue(hpclaunch)
        mine = pending_of(rows, ids)
        if len(mine) == len(ids) and all(r["reason"] not in (None, "None") for r in mine):
            return rows
        assert time.monotonic() < deadline, f"no reasons yet: {mine}"
        time.sleep(1)


def squeue_qos(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job_id}", "--format=%q|%a|%y"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _assert_start_estimates(
    hpclaunch: Run, write_spec: WriteSpec, waiting: set[str], one_gpu: dict[str, object]
) -> None:
    """Slurm's expected starts: of the waiting jobs in the queue (squeue StartTime, once
    backfill computed them), and of one more such job before it is submitted (hpclaunch
    estimate: sbatch --test-only). Every GPU is held until the busy jobs' 10-minute limits
    end, so each start is in the future: the waiting jobs' no later than that, the new one's
    at most their 5-minute limits after."""
    now = time.time()
    deadline = time.monotonic() + 60
    while True:
        mine = pending_of(queue(hpclaunch), waiting)
        if all(r["expected_start"] for r in mine):
            break
        assert time.monotonic() < deadline, f"no expected start from Slurm: {mine}"
        time.sleep(1)
    for row in mine:
        start = slurm_epoch(str(row["expected_start"]))
        assert start is not None
        assert now < start <= now + 11 * 60, row
    spec = write_spec(command=SLEEP, tier="medium", resources=one_gpu)
    out = hpclaunch("estimate", str(spec), "--json")
    assert out.returncode == 0, out.stderr
    slurm = json.loads(out.stdout)["slurm"]
    start = slurm_epoch(slurm["start"])
    assert start is not None
    # Behind the waiting jobs too (seen: 11.8 minutes out): at most their 5 minutes more.
    assert now < start <= now + 16 * 60, slurm
    assert slurm["preempts"] == []  # over-quota: it preempts nothing
    dry = hpclaunch("submit", "--dry-run", str(spec))
    assert "# estimate:\n#   Slurm expects it to start at " in dry.stdout
    name = json.loads(out.stdout)["job_name"]
    queued = subprocess.run(
        ["squeue", "-h", f"--name={name}", "-o", "%i"], capture_output=True, text=True, check=True
    )
    assert queued.stdout.strip() == ""  # neither queued anything


def test_queue_order_reasons_and_tier_move(hpclaunch: Run, write_spec: WriteSpec) -> None:
    busy = [
        write_spec(
            command=SLEEP,
            tier="critical",
            resources={"nodes": 2, "gpus_per_node": 4, "time": "00:10:00", "mem": "100M"},
        ),
        write_spec(
            command=SLEEP,
            tier="critical",
            project="vision",
            resources={"nodes": 1, "gpus_per_node": 4, "time": "00:10:00", "mem": "100M"},
        ),
        write_spec(
            command=SLEEP,
            tier="critical",
            resources={"nodes": 1, "cpus_per_task": 8, "time": "00:10:00", "mem": "100M"},
        ),
    ]
    running = [submit(hpclaunch, spec) for spec in busy]
    for job_id in running:
        wait_state(hpclaunch, job_id, {"RUNNING"})

    one_gpu = {"gpus_per_node": 1, "time": "00:05:00", "mem": "100M"}
    low, medium, critical = (
        submit(hpclaunch, write_spec(command=SLEEP, tier=tier, resources=one_gpu))
        for tier in ("low", "medium", "critical")
    )
    waiting = {low, medium, critical}

    rows = wait_reasons(hpclaunch, waiting)
    started = [r for r in rows if r["state"] != "PENDING"]
    assert {r["job_id"] for r in started} >= set(running)
    assert rows[: len(started)] == started  # running work first
    mine = pending_of(rows, waiting)
    assert [r["job_id"] for r in mine] == [critical, medium, low]
    assert [r["tier"] for r in mine] == ["critical", "medium", "low"]
    assert [r["quota"] for r in mine] == ["over-quota"] * 3
    assert all(r["why"] and r["reason"] for r in mine)
    # None of them may preempt the in-quota work: each says it waits for idle GPUs.
    assert [str(r["why"]).split("; ")[-1] for r in mine] == [
        "over-quota: waits for idle GPUs (it preempts nothing)",
        "over-quota: waits for idle GPUs (it preempts nothing)",
        "preemptible: waits for idle GPUs (it preempts nothing)",
    ]
    ranks = [r["rank"] for r in mine]
    assert ranks == sorted(ranks)
    text = hpclaunch("queue")
    assert text.returncode == 0, text.stderr
    print(text.stdout)  # shown with pytest -s: the table the README talks about
    _assert_start_estimates(hpclaunch, write_spec, waiting, one_gpu)

    # A running job's tier cannot change.
    refused = hpclaunch("tier", running[0], "low")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "the tier of a job that has started cannot change" in refused.stderr
    assert "cancel it and resubmit" in refused.stderr

    # low -> critical: research still holds its 8 GPUs, so over-quota at nice 0.
    moved = hpclaunch("tier", low, "critical")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert "tier: low → critical" in moved.stdout
    assert "QOS: low → overquota" in moved.stdout
    assert squeue_qos(low) == "overquota|research-oq|0"
    assert hpclaunch.submitted()[low]["tier"] == "critical"

    deadline = time.monotonic() + 60
    while True:  # the priority of the critical job, and submitted before it
        order = [r["job_id"] for r in pending_of(queue(hpclaunch), waiting)]
        if order == [low, critical, medium]:
            break
        assert time.monotonic() < deadline, order
        time.sleep(1)
    (row,) = [r for r in queue(hpclaunch) if r["job_id"] == low]
    assert row["tier"] == "critical"
