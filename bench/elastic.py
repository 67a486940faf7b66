"""Shrink instead of evict, on the cluster: an elastic low-tier job against a rigid one.

    .venv/bin/python bench/elastic.py [--runs 1] [--critical-seconds 60]

Needs the running local cluster (Slurm 25.11). The local site is switched to
``preemption: arbiter`` (``site apply``) for the run and back to ``local`` after. Each run
has two variants, one after the other, with ``hpclaunch arbiter`` running:

* ``evict``: a low-tier torchrun job of examples/elastic_train.py on all 4 nodes (4 GPUs
  each, one rank per node) without an ``elastic:`` block. A critical job that needs 2
  whole nodes for ``--critical-seconds`` arrives once it trained 20 steps; the arbiter has
  it checkpoint and requeue (evicted); it starts again on 4 nodes once the critical job
  ended.
* ``elastic``: the same job with ``elastic: {nodes: [2, 4], min_interval: 15}``; the
  arbiter shrinks it to 2 nodes (it trains on), and grows it back to 4 after.

Printed per variant (medians over the runs), from sacct and the trainer's step log:

    critical wait       the critical job's start - its submission
    low completion      the low job's last end - its submission
    low GPU-s held      sum over its attempts of GPUs x elapsed (sacct -D)
    low GPU-s lost      held - useful, useful = the trainer's sleep (its "work": 0.1 s per
                        micro-step of a rank) x the GPUs, for each trained step
    restarts            attempts - 1

Every job submitted here is cancelled at the end, also on errors or Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from arbiter_cluster import apply  # noqa: E402  (bench/ is on sys.path: the script's folder)

from tests.integration.conftest import HPCLAUNCH, Cli, wait_progress  # noqa: E402

STEPS = 400
SLEEP = 0.1
GPUS_PER_NODE = 4
VENV = str(REPO / ".venv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--critical-seconds", type=int, default=60)
    args = parser.parse_args()
    work = Path.home() / ".hpclaunch-it" / f"bench-elastic-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    site = work / "local-arbiter.yaml"
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site.write_text(yaml.safe_dump(data | {"preemption": "arbiter"}))
    cli = Cli(work / "state", site=str(site))
    submitted: list[str] = []
    results: dict[str, list[dict[str, float]]] = {"evict": [], "elastic": []}
    apply(str(site), cli)
    try:
        for run in range(args.runs):
            for variant in results:
                out = work / f"{variant}-{run}"
                figures = _one(cli, out, variant, args.critical_seconds, submitted)
                results[variant].append(figures)
                print(
                    f"run {run} {variant}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
                )
    finally:
        if submitted:
            subprocess.run(["scancel", *submitted], check=False, capture_output=True)
        apply("local", cli)
        shutil.rmtree(work, ignore_errors=True)
    _report(results, args)


def _one(
    cli: Cli, out: Path, variant: str, critical_s: int, submitted: list[str]
) -> dict[str, float]:
    spec: dict[str, Any] = {
        "name": f"bench-el-{variant}-{uuid.uuid4().hex[:6]}",
        "project": "research",
        "tier": "low",
        "command": [
            "python",
            "examples/elastic_train.py",
            "--steps",
            str(STEPS),
            "--sleep",
            str(SLEEP),
            "--log-dir",
            str(out),
        ],
        "launcher": "torchrun",
        "processes_per_node": 1,
        "venv": VENV,
        "resources": {
            "nodes": 4,
            "gpus_per_node": GPUS_PER_NODE,
            "time": "00:15:00",
            "mem": "300M",
        },
    }
    if variant == "elastic":
        spec["elastic"] = {
            "nodes": [2, 4],
            "global_batch": 16,
            "max_batch_per_gpu": 4,
            "min_interval": 15,
        }
    low = _submit(cli, out.parent / f"{variant}.yaml", spec)
    submitted.append(low)
    job_dir = Path(cli.submitted()[low]["job_dir"])
    wait_progress(job_dir, 20, timeout=180)
    critical = _submit(
        cli,
        out.parent / f"{variant}-critical.yaml",
        {
            "name": f"bench-el-critical-{uuid.uuid4().hex[:6]}",
            "project": "research",
            "tier": "critical",
            "command": ["sleep", str(critical_s)],
            "resources": {
                "nodes": 2,
                "gpus_per_node": GPUS_PER_NODE,
                "time": "00:05:00",
                "mem": "100M",
            },
        },
    )
    submitted.append(critical)
    log = out.parent / f"{variant}-arbiter.jsonl"
    daemon = subprocess.Popen(
        [HPCLAUNCH, "--site", cli.site, "arbiter", "--log", str(log), "--interval", "0.5"],
        cwd=REPO,
        env=cli.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 900
        while _queued(low) or _queued(critical):
            if time.monotonic() > deadline:
                raise SystemExit(f"{variant}: jobs {low}, {critical} did not end in 15 min")
            time.sleep(1)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=30)
    low_rows, critical_rows = _sacct(low), _sacct(critical)
    if low_rows[-1]["State"] != "COMPLETED":
        raise SystemExit(f"{variant}: the low job ended {low_rows[-1]['State']}")
    held = sum(float(r["gpus"]) * float(r["ElapsedRaw"]) for r in low_rows)
    worlds = [int(line.split()[1]) for line in (out / "samples.log").read_text().splitlines()]
    # A step at w of 4 nodes is 4 // w micro-steps of SLEEP on w x GPUS_PER_NODE GPUs.
    useful = sum(SLEEP * (4 // w) * w * GPUS_PER_NODE for w in worlds)
    return {
        "critical wait s": _ts(critical_rows[-1]["Start"]) - _ts(critical_rows[0]["Submit"]),
        "low completion s": _ts(low_rows[-1]["End"]) - _ts(low_rows[0]["Submit"]),
        "low GPU-s held": held,
        "low GPU-s lost": held - useful,
        "restarts": float(len(low_rows) - 1),
    }


def _submit(cli: Cli, path: Path, spec: dict[str, Any]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    res = cli("submit", str(path))
    if res.returncode:
        raise SystemExit(f"submit failed: {res.stderr}")
    return res.stdout.strip().splitlines()[-1]


def _queued(job_id: str) -> bool:
    res = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    )
    return bool(res.stdout.strip())


def _sacct(job_id: str) -> list[dict[str, str]]:
    """Every attempt of the job (sacct -D), oldest first, with its GPU count."""
    fields = ["Submit", "Start", "End", "ElapsedRaw", "State", "AllocTRES"]
    res = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-D", "-j", job_id, "-o", ",".join(fields)],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in res.stdout.splitlines():
        row = dict(zip(fields, line.split("|"), strict=True))
        tres = dict(kv.split("=", 1) for kv in row["AllocTRES"].split(",") if "=" in kv)
        row["gpus"] = tres.get("gres/gpu", "0")
        rows.append(row)
    return rows


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _report(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    keys = list(results["evict"][0])
    print(
        f"\nmedians over {args.runs} run(s), critical job {args.critical_seconds} s on 2 of 4 nodes"
    )
    print(f"| {'':18} | {'evict':>10} | {'elastic':>10} | {'ratio':>6} |")
    print(f"|{'-' * 20}|{'-' * 12}|{'-' * 12}|{'-' * 8}|")
    for key in keys:
        a = statistics.median(r[key] for r in results["evict"])
        b = statistics.median(r[key] for r in results["elastic"])
        ratio = f"{b / a:.2f}" if a else "-"
        print(f"| {key:18} | {a:10.1f} | {b:10.1f} | {ratio:>6} |")


if __name__ == "__main__":
    main()
