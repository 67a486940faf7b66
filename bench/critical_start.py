"""How long a critical job waits when low-tier jobs hold every GPU: with and without preemption.

    .venv/bin/python bench/critical_start.py [--runs 3] [--low-seconds 30]

Needs the running local cluster (16 GPUs: 4 nodes x 4) with the local site applied
(`hpclaunch --site local site apply --yes`). Each run fills all 16 GPUs with four 4-GPU
tier-low jobs, waits 3 s, submits one 4-GPU critical job with `hpclaunch submit` and polls
squeue every 0.05 s until it runs. Time = critical submission (before the CLI starts) to
RUNNING. Three variants, in the same run:

* ``sidecar``: the low jobs train under the sidecar (launcher srun, tests/integration/
  tiny_trainer.py); at preemption Slurm signals the batch shell at once (B:USR1,
  preempt_send_user_signal), the trainer commits a checkpoint, the sidecar requeues the job and
  its GPUs are free;
* ``no handler``: the low jobs are plain commands (launcher none: no --signal, nothing to
  checkpoint); Slurm stops and requeues the victim when the QOS GraceTime (10 s) ends;
* ``no preemption`` (baseline): the same critical job through a site whose critical tier maps to
  a QOS with the same priority but no ``Preempt`` list: it waits until a low job ends by
  itself, i.e. for the rest of the low jobs' run time (``--low-seconds``; real training jobs run
  for hours).

Goal (issue 4): the critical job starts within the grace time + 2 s. Every job is cancelled at
the end of each run, also on errors.
"""

from __future__ import annotations

import argparse
import fcntl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.conftest import CLUSTER_LOCK, Cli  # noqa: E402

VENV = str(REPO / ".venv")
TRAINER = str(REPO / "tests/integration/tiny_trainer.py")
NOPREEMPT_QOS = "bench-nopreempt"
GRACE = 10


def sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def states(ids: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return dict(line.split("|") for line in out.splitlines() if "|" in line)


def submit(cli: Cli, specs: Path, tier: str, **fields: object) -> str:
    spec = {"name": f"bench-crit-{uuid.uuid4().hex[:6]}", "project": "research", "tier": tier}
    spec.update(fields)
    path = specs / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = cli("submit", str(path))
    if out.returncode != 0:
        raise SystemExit(f"submit failed: {out.stderr}")
    return out.stdout.strip().splitlines()[-1]


def wait_running(ids: list[str], timeout: float, poll: float = 0.05) -> float:
    deadline = time.monotonic() + timeout
    while True:
        now = states(ids)
        if all(now.get(i) == "RUNNING" for i in ids):
            return time.time()
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {ids} not running after {timeout} s: {now}")
        time.sleep(poll)


def one_run(variant: str, cli: Cli, specs: Path, low_seconds: int) -> float:
    gpus = {"gpus_per_node": 4, "time": "00:05:00", "mem": "400M"}
    if variant == "sidecar":
        low = {
            "command": ["python", TRAINER, "--steps", "100000"],
            "launcher": "srun",
            "venv": VENV,
        }
    else:
        low = {"command": ["sleep", str(low_seconds)]}
    ids = [submit(cli, specs, "low", resources=gpus, **low) for _ in range(4)]
    try:
        wait_running(ids, 60)
        time.sleep(3)
        site_cli = cli
        if variant == "no preemption":
            site_cli = Cli(specs / "state", site=str(specs / "nopreempt.yaml"))
            site_cli.env["HPCLAUNCH_CAPS_MAX_AGE"] = "0"  # the bench's QOS is new
        t0 = time.time()
        crit = submit(site_cli, specs, "critical", command=["sleep", "1"], resources=gpus)
        ids.append(crit)
        started = wait_running([crit], low_seconds + 60)
        return started - t0
    finally:
        subprocess.run(["scancel", *ids], capture_output=True, check=False)
        deadline = time.monotonic() + 60
        while states(ids) and time.monotonic() < deadline:
            time.sleep(0.2)


def nopreempt_site(specs: Path) -> None:
    """A copy of the local site whose critical tier maps to a QOS that preempts nothing."""
    sh("sacctmgr", "-i", "add", "qos", NOPREEMPT_QOS, "priority=1000", "description=bench")
    users = sh("sacctmgr", "-n", "-P", "show", "assoc", "account=research", "format=user")
    for user in {u for u in users.split() if u}:
        sh("sacctmgr", "-i", "modify", "user", user, "where", "account=research", "set",
           f"qos+={NOPREEMPT_QOS}")  # fmt: skip
    data = yaml.safe_load((REPO / "site-configs/local.yaml").read_text())
    data["tiers"]["critical"] = {"qos": NOPREEMPT_QOS}
    (specs / "nopreempt.yaml").write_text(yaml.safe_dump(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--low-seconds", type=int, default=30)
    args = parser.parse_args()
    variants = ("sidecar", "no handler", "no preemption")
    results: dict[str, list[float]] = {v: [] for v in variants}
    with CLUSTER_LOCK.open("a") as lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        specs = Path(tmp)
        cli = Cli(specs / "state")
        nopreempt_site(specs)
        try:
            for run in range(args.runs):
                for variant in variants:
                    seconds = one_run(variant, cli, specs, args.low_seconds)
                    results[variant].append(seconds)
                    print(f"run {run + 1} {variant:>13}: critical started after {seconds:.2f} s")
        finally:
            subprocess.run(["sacctmgr", "-i", "delete", "qos", NOPREEMPT_QOS],
                           capture_output=True, check=False)  # fmt: skip
    print(f"\ncritical job: submission -> RUNNING, median of {args.runs} (min - max); goal "
          f"<= grace + 2 = {GRACE + 2} s")  # fmt: skip
    base = statistics.median(results["no preemption"])
    for variant in variants:
        values = results[variant]
        med = statistics.median(values)
        print(f"  {variant:>13}: {med:6.2f} s ({min(values):.2f} - {max(values):.2f})"
              f"  {base / med:5.1f}x faster than no preemption")  # fmt: skip


if __name__ == "__main__":
    main()
