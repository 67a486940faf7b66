"""The arbiter's two policies on the real cluster, the same workload twice (issue 49):
``--policy slurm-order`` (Slurm orders the queue; the arbiter preempts across tiers, shrinks
elastic jobs for them, grows them into idle GPUs and starts them small) against ``--policy
las`` (the simulator's least-attained-service plan, :mod:`hpclaunch.scheduling.las`).

    .venv/bin/python bench/arbiter_policy_cluster.py [--jobs 12] [--seed 3] [--json FILE]

Needs the running local cluster (4 nodes x 4 GPUs) and nothing else on it. The workload is
seeded: arrivals over ``--span`` seconds, each job one of

* **elastic** (tier low, 40 %): ``tests/integration/tiny_trainer.py --elastic`` under the
  sidecar, launcher srun, one rank per node of 4 GPUs, asking 2 or 4 nodes, ``elastic:
  nodes [1, 2, 4]``, a fixed global batch of 16 (4 per rank per micro-step: at 1 node a
  step takes 4 micro-steps), 0.1 s per micro-step and a sync of 0-0.15 s per step on more
  than one node (some scale well, some not), 150-500 steps;
* **rigid** (tier low, 40 %): the same trainer at its size, 1 or 2 nodes, 20-90 s of steps;
* **high** (20 %): ``sleep`` 10-30 s on 1 node (not preemptible: it preempts).

Every trainer commits on request and every 50 steps. Measured per run: the average job
completion time (end of its last attempt - submission, ``sacct -D``), per class; the
resizes and preemptions the arbiter made; and, for every trainer job, that each step was
trained exactly once across its attempts (``steps-attempt-*.log``). Prints the ratio
las / slurm-order of the average JCT (the goal: below 1), and exits 1 when a step was
trained twice or not at all.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from arbiter_cluster import apply, attempts, drain, site_file  # noqa: E402

from tests.integration.conftest import HPCLAUNCH, Cli  # noqa: E402

VENV = str(REPO / ".venv")
TRAINER = str(REPO / "tests/integration/tiny_trainer.py")
MICRO = 0.1  # seconds per micro-step
#: las: the first level of service, GPU-seconds (the workload is short: a node for a minute)
QUANTUM = 240.0


@dataclass
class Planned:
    index: int
    kind: str  # elastic, rigid, high
    nodes: int
    steps: int  # trainer steps (high: seconds of sleep)
    sleep: float  # seconds per step of a rigid trainer
    sync: float  # an elastic trainer's sync per step on >1 node
    offset: float
    job_id: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)


def workload(jobs: int, seed: int, span: float, scale: float = 1.0) -> list[Planned]:
    rng = random.Random(seed)
    out = []
    times = sorted(rng.uniform(0, span) for _ in range(jobs))
    times = [t - times[0] for t in times]
    for i, offset in enumerate(times):
        draw = rng.random()
        if draw < 0.4:
            out.append(
                Planned(i, "elastic", rng.choice([2, 4]), round(scale * rng.randint(150, 500)),
                        0.0, rng.choice([0.0, 0.05, 0.15]), offset)
            )  # fmt: skip
        elif draw < 0.8:
            sleep = 0.25
            steps = round(scale * rng.uniform(20, 90) / sleep)
            out.append(Planned(i, "rigid", rng.choice([1, 2]), steps, sleep, 0.0, offset))
        else:
            out.append(Planned(i, "high", 1, rng.randint(10, 30), 0.0, 0.0, offset))
    return out


def spec_for(p: Planned) -> dict[str, Any]:
    common = {"name": f"bench-las-{p.kind}{p.index}", "project": "research"}
    res = {"nodes": p.nodes, "gpus_per_node": 4, "time": "00:20:00", "mem": "200M"}
    if p.kind == "high":
        return {**common, "tier": "high", "command": ["sleep", str(p.steps)], "resources": res}
    argv = ["python", TRAINER, "--steps", str(p.steps), "--every", "50"]
    spec: dict[str, Any] = {
        **common,
        "tier": "low",
        "launcher": "srun",
        "processes_per_node": 1,
        "venv": VENV,
        "resources": res,
        "checkpoint": {"max_requeues": 50},
    }
    if p.kind == "elastic":
        argv += ["--sleep", str(MICRO), "--elastic", "--sync", str(p.sync)]
        spec["elastic"] = {
            "nodes": [1, 2, 4],
            "global_batch": 16,
            "max_batch_per_gpu": 4,  # per rank per micro-step: 1 at 4 nodes, 4 at 1
            "min_interval": 20,
        }
    else:
        argv += ["--sleep", str(p.sleep)]
    return {**spec, "command": argv}


def run_policy(
    policy: str, plan: list[Planned], tmp: Path, min_run: float, quantum: float
) -> dict[str, Any]:
    site = site_file(tmp, "arbiter")
    cli = Cli(tmp / f"state-{policy}", site=site)
    apply(site, cli)
    specs = tmp / f"specs-{policy}"
    specs.mkdir()
    log = tmp / f"arbiter-{policy}.jsonl"
    daemon = subprocess.Popen(
        [HPCLAUNCH, "--site", site, "arbiter", "--interval", "1", "--log", str(log),
         "--min-run", str(min_run), "--policy", policy, "--service-quantum", str(quantum)],
        cwd=REPO, env=cli.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ids: list[str] = []
    t0 = time.time()
    try:
        for p in sorted(plan, key=lambda q: q.offset):
            path = specs / f"{p.index}.yaml"
            path.write_text(yaml.safe_dump(spec_for(p)))
            delay = t0 + p.offset - time.time()
            if delay > 0:
                time.sleep(delay)
            out = cli("submit", str(path))
            if out.returncode != 0:
                raise SystemExit(f"submit failed: {out.stderr}")
            p.job_id = out.stdout.strip().splitlines()[-1]
            ids.append(p.job_id)
        drain(ids, policy)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
    elapsed = time.time() - t0
    time.sleep(3)  # slurmdbd catches up
    found = attempts(ids)
    records = cli.submitted()
    jct: dict[str, float] = {}
    trained_once: dict[str, bool] = {}
    for p in plan:
        p.attempts = found.get(p.job_id, [])
        submit = min(a["submit"] for a in p.attempts)
        end = max(a["end"] for a in p.attempts if a["end"])
        jct[p.job_id] = end - submit
        if p.kind != "high":
            job_dir = Path(records[p.job_id]["job_dir"])
            steps = [
                int(line)
                for path in sorted(job_dir.glob("steps-attempt-*.log"))
                for line in path.read_text().split()
            ]
            trained_once[p.job_id] = sorted(steps) == list(range(1, p.steps + 1))
    decisions = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    counts: dict[str, int] = {}
    for d in decisions:
        counts[d["event"]] = counts.get(d["event"], 0) + 1
    return {
        "policy": policy,
        "elapsed": elapsed,
        "jct": jct,
        "trained_once": trained_once,
        "decisions": counts,
        "jobs": [asdict(p) for p in plan],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--span", type=float, default=90.0, help="seconds of arrivals")
    parser.add_argument("--policies", nargs="+", default=["slurm-order", "las"])
    parser.add_argument("--scale", type=float, default=1.0, help="jobs' lengths times this")
    parser.add_argument("--min-run", type=float, default=20.0, help="the arbiter's --min-run")
    parser.add_argument(
        "--quantum", type=float, default=QUANTUM, help="the arbiter's --service-quantum"
    )
    parser.add_argument("--json", type=Path, help="keep every figure here")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="arbiter-policy-", dir=Path.home()) as tmp:
        for policy in args.policies:
            plan = workload(args.jobs, args.seed, args.span, args.scale)
            print(f"{policy}: {len(plan)} jobs ...", flush=True)
            results[policy] = run_policy(policy, plan, Path(tmp), args.min_run, args.quantum)
    bad = False
    for policy, r in results.items():
        kinds: dict[str, list[float]] = {}
        for job in r["jobs"]:
            kinds.setdefault(job["kind"], []).append(r["jct"][job["job_id"]])
        by_kind = ", ".join(f"{k} {fmean(v):.1f} s ({len(v)})" for k, v in sorted(kinds.items()))
        once = sum(r["trained_once"].values())
        print(
            f"{policy:12} average JCT {fmean(r['jct'].values()):6.1f} s ({by_kind}); "
            f"makespan {r['elapsed']:.0f} s; every step once: {once}/{len(r['trained_once'])}; "
            f"decisions {r['decisions']}"
        )
        bad |= once != len(r["trained_once"])
    if {"las", "slurm-order"} <= results.keys():
        ours = fmean(results["las"]["jct"].values())
        base = fmean(results["slurm-order"]["jct"].values())
        print(f"las / slurm-order average JCT: {ours / base:.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
