"""Preemptible work is charged less, and not to the project's in-quota standing (issue 26,
part 2).

The session's ``site apply`` gave the over-quota QOS ``UsageFactor=0.5`` (site-configs/
local.yaml's default); QOS normal keeps 1. Research runs over-quota (account research-oq,
QOS overquota) while vision runs the same work in-quota (account vision, QOS normal): same
CPUs and GPUs, same time, side by side. Slurm's fair-share usage (``sshare`` RawUsage,
updated every minute: PriorityCalcPeriod=1 on the test cluster) then grows by half as much
per second for research-oq as for vision, and research's own in-quota association is not
charged at all: its later in-quota jobs keep their fair-share standing. ``hpclaunch queue
--why`` names what puts one pending job before another.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from hpclaunch.slurm.priority import parse_sshare, sshare_argv

from .conftest import Cli, squeue

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.exclusive]

WORK = ("-n1", "-c2", "--gres=gpu:2", "--mem=50M", "--time=5", "--output=/dev/null")


def _sbatch(*args: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", *args], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().split(";")[0]


def _usage() -> dict[tuple[str, str | None], int]:
    out = subprocess.run(
        sshare_argv(["research", "research-oq", "vision"]),
        capture_output=True,
        text=True,
        check=True,
    )
    return {(s.account, s.user): s.raw_usage for s in parse_sshare(out.stdout)}


def _elapsed(job_id: str) -> int:
    """Seconds the job ran, once it ended (sacct); 0 before."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=State,ElapsedRaw"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    state, _, elapsed = (out[0] if out else "").partition("|")
    return int(elapsed) if state == "COMPLETED" and elapsed.isdigit() else 0


def _billing(job_id: str) -> int:
    """The job's billing units (sacct AllocTRES ``billing=N``: its CPUs here)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=AllocTRES"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for item in out.strip().split(","):
            key, _, value = item.partition("=")
            if key == "billing" and value.isdigit():
                return int(value)
        time.sleep(1)
    return 0


@pytest.fixture
def jobs() -> Iterator[list[str]]:
    ids: list[str] = []
    yield ids
    if ids:
        subprocess.run(["scancel", *ids], check=False, capture_output=True)


def test_over_quota_work_is_charged_half_and_not_to_the_in_quota_standing(
    slurm_cluster: object, jobs: list[str]
) -> None:
    before = _usage()
    over = _sbatch(
        "--account=research-oq",
        "--qos=overquota",
        "--job-name=it-fs-over",
        *WORK,
        "--wrap=sleep 30",
    )
    inq = _sbatch(
        "--account=vision", "--qos=normal", "--job-name=it-fs-in", *WORK, "--wrap=sleep 30"
    )
    jobs.extend([over, inq])
    billing = _billing(inq)
    assert billing == _billing(over) > 0
    deadline = time.monotonic() + 240
    while True:
        ran = {job: _elapsed(job) for job in (over, inq)}
        now = _usage()
        grown = {k: now.get(k, 0) - before.get(k, 0) for k in now}
        accounts = {a: grown.get((a, None), 0) for a in ("research", "research-oq", "vision")}
        # Charged in full once the decay thread ran after both ends (every minute): per
        # second of run time, vision's usage grows by its billing units, research-oq's by
        # half (the sacct and sshare clocks differ by up to a second: 10 % slack).
        if all(ran.values()):
            per_second_over = accounts["research-oq"] / ran[over]
            per_second_in = accounts["vision"] / ran[inq]
            if min(per_second_in, 2 * per_second_over) >= 0.9 * billing:
                break
        assert time.monotonic() < deadline, (ran, accounts, before, now)
        time.sleep(5)
    assert per_second_over / per_second_in == pytest.approx(0.5, rel=0.1), (accounts, ran)
    # research's in-quota standing: never charged. Its usage from earlier tests decays
    # meanwhile (PriorityDecayHalfLife, 7 days by default): after the tiers tests a run
    # saw it fall by 1 (clean-clone run 18), so it may shrink, never grow.
    assert accounts["research"] <= 0, accounts


@pytest.mark.backends
def test_queue_why_names_the_factors_of_the_jobs_ahead(
    slurm_cluster: object, hpclaunch: Cli, jobs: list[str]
) -> None:
    """A job holds n1, so two jobs that want every node whole wait: vision's low-tier one
    behind research's medium one, by the QOS factor; a third waiting for its begin time
    ranks before both but cannot start, and `queue --why` says so, in words and in JSON."""
    whole = ("-N4", "--exclusive", "--mem=50M", "--time=5", "--wrap=true")
    holder = _sbatch(
        "--account=vision",
        "--qos=normal",
        "--job-name=it-why-hold",
        "--nodelist=n1",
        "--gres=gpu:1",
        "--mem=50M",
        "--time=5",
        "--wrap=sleep 300",
    )
    jobs.append(holder)
    deadline = time.monotonic() + 60
    while squeue(holder, "%T") != "RUNNING":  # n1 taken before the others come
        assert time.monotonic() < deadline, squeue(holder, "%T")
        time.sleep(0.2)
    later = _sbatch(
        "--account=research", "--qos=high", "--job-name=it-why-later", "--begin=now+1hour", *whole
    )
    jobs.append(later)
    ahead = _sbatch("--account=research", "--qos=normal", "--job-name=it-why-a", *whole)
    behind = _sbatch("--account=vision-oq", "--qos=low", "--job-name=it-why-b", *whole)
    jobs.extend([ahead, behind])
    # The scene as described: the later job is waiting for its begin time.
    deadline = time.monotonic() + 60
    while squeue(later, "%r") != "BeginTime":
        assert time.monotonic() < deadline, squeue(later, "%r")
        time.sleep(0.5)
    out = hpclaunch("queue", "--why", behind)
    assert out.returncode == 0, out.stderr
    assert f"job {behind} waits (" in out.stdout
    assert f"job {ahead} (research, medium, priority " in out.stdout, out.stdout
    assert "QOS (tier) +10000 (normal vs low)" in out.stdout, out.stdout
    assert "1 more ranked before it cannot start yet" in out.stdout, out.stdout
    assert "Fair share of " in out.stdout
    data = json.loads(hpclaunch("queue", "--why", behind, "--json").stdout)
    nearest = {a["job"]["job_id"]: a for a in data["ahead"]}
    assert nearest[ahead]["factors"]["qos"] == 10000
    assert data["factors"]["qos"] == 0
    assert data["weights"]["fairshare"] == 100
    missing = hpclaunch("queue", "--why", "999999")
    assert missing.returncode != 0
    assert "job 999999 is not pending or running" in missing.stderr
    assert "Traceback" not in missing.stderr
