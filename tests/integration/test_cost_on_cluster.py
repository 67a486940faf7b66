"""``hpclaunch cost`` and ``hpclaunch history`` against the real cluster's accounting.

A few short GPU jobs in research and vision (one of them over vision's quota of 4 GPUs) run
to the end; then ``cost --json`` for the period since the test began must give, for those
jobs, exactly the GPU-hours computed here from a raw ``sacct`` call (gres/gpu count x
ElapsedRaw / 3600), grouped as the site says (vision-oq counts towards vision, the over-quota
QOS is the tier ``over-quota``), and ``history --json`` lists them with their final states.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from .conftest import Cli, wait_state

pytestmark = [pytest.mark.slurm, pytest.mark.backends, pytest.mark.exclusive]

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
WriteSpec = Callable[..., Path]


def submit(cli: Cli, spec: Path) -> str:
    result = cli("submit", str(spec))
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def raw_sacct(job_ids: list[str]) -> dict[str, float]:
    """GPU-hours per job from sacct's own numbers (every attempt: -D)."""
    argv = ["sacct", "-X", "-D", "-n", "-P", f"--jobs={','.join(job_ids)}"]
    out = subprocess.run(
        [*argv, "--format=JobID,ElapsedRaw,AllocTRES,End"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    hours: dict[str, float] = {}
    for line in out.splitlines():
        job_id, elapsed, tres, end = line.split("|")
        if end == "Unknown":  # not in the accounting's final form yet
            raise LookupError(line)
        gpus = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
        hours[job_id] = hours.get(job_id, 0.0) + int(gpus.get("gres/gpu", 0)) * int(elapsed) / 3600
    return hours


def test_cost_matches_sacct_and_history_has_final_states(
    hpclaunch: Cli, write_spec: WriteSpec
) -> None:
    start = datetime.now().replace(microsecond=0) - timedelta(seconds=1)
    research = write_spec(
        command=["sleep", "3"],
        resources={"time": "00:02:00", "mem": "100M", "gpus_per_node": 2},
    )
    # It holds vision's GPUs until the next job is submitted: a "sleep 4" had ended before
    # that submit under load, which then found the quota free (clean-clone run 24).
    release = Path.home() / ".hpclaunch-it" / f"release-{uuid.uuid4().hex[:8]}"
    release.parent.mkdir(parents=True, exist_ok=True)
    hold = f"sleep 2; for i in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done"
    vision = write_spec(
        project="vision",
        tier="high",
        command=["bash", "-c", hold],
        resources={"time": "00:02:00", "mem": "100M", "gpus_per_node": 4},
    )
    over = write_spec(  # vision's 4 guaranteed GPUs are taken by the job before it
        project="vision",
        command=["sleep", "5"],
        resources={"time": "00:02:00", "mem": "100M", "gpus_per_node": 4},
    )
    ids = {"research": submit(hpclaunch, research)}
    ids["vision"] = submit(hpclaunch, vision)
    ids["over"] = submit(hpclaunch, over)
    release.touch()
    for job_id in ids.values():
        assert wait_state(hpclaunch, job_id, FINAL, timeout=60)["state"] == "COMPLETED"
    release.unlink()

    deadline = time.monotonic() + 30
    while True:  # slurmdbd may lag behind slurmctld by a moment
        try:
            expected = raw_sacct(list(ids.values()))
            if set(expected) == set(ids.values()):
                break
        except LookupError:
            pass
        assert time.monotonic() < deadline, "sacct never showed the jobs finished"
        time.sleep(0.5)
    assert all(hours > 0 for hours in expected.values()), expected

    until = datetime.now().replace(microsecond=0) + timedelta(seconds=1)
    period = ["--since", start.isoformat(), "--until", until.isoformat()]
    result = hpclaunch("cost", *period, "--json", "--by", "project", "--by", "tier")
    assert result.returncode == 0, result.stderr
    cost = json.loads(result.stdout)
    ours = [a for a in cost["attempts"] if a["job_id"] in expected]
    got: dict[str, float] = {}
    for attempt in ours:
        got[attempt["job_id"]] = got.get(attempt["job_id"], 0.0) + attempt["gpu_hours"]
    assert got.keys() == expected.keys()
    for job_id, hours in expected.items():
        assert got[job_id] == pytest.approx(hours, abs=1e-6), job_id
    assert sum(got.values()) == pytest.approx(sum(expected.values()), abs=1e-6)
    # The totals are the attempts' sum; the groups are the site's projects and tiers.
    assert cost["total"]["gpu_hours"] == pytest.approx(
        sum(a["gpu_hours"] for a in cost["attempts"]), abs=1e-9
    )
    where = {a["job_id"]: (a["project"], a["tier"], a["account"]) for a in ours}
    assert where == {
        ids["research"]: ("research", "medium", "research"),
        ids["vision"]: ("vision", "high", "vision"),
        ids["over"]: ("vision", "over-quota", "vision-oq"),
    }
    groups = {(g["project"], g["tier"]): g for g in cost["groups"]}
    assert {("research", "medium"), ("vision", "high"), ("vision", "over-quota")} <= set(groups)
    assert cost["currency"] == "EUR"  # site-configs/local.yaml: 2.5 per GPU-hour
    assert cost["total"]["cost"] == pytest.approx(cost["total"]["gpu_hours"] * 2.5, abs=1e-9)
    print(hpclaunch("cost", *period, "--by", "project", "--by", "tier").stdout)

    history = hpclaunch("history", "--json", "--since", start.isoformat())
    assert history.returncode == 0, history.stderr
    listed = {r["job_id"]: r for r in json.loads(history.stdout)}
    assert set(listed) == set(ids.values())
    for name, job_id in ids.items():
        record = listed[job_id]
        assert (record["state"], record["attempts"], record["exit_code"]) == ("COMPLETED", 1, 0)
        assert record["quota"] == ("over-quota" if name == "over" else "in-quota")
        assert record["user"]
        assert len(record["spec_hash"]) == 64
