"""Grid, random, TPE and TPE + ASHA at the same trial count, on the cluster: the best
validation loss each finds against the GPU-seconds it uses.

    .venv/bin/python bench/adaptive_sweep.py [--trials 18] [--concurrent 4] [--epoch-seconds 1]

Needs the running local cluster. The training is examples/train_sweep.py (a small MLP on
the CPU, 12 epochs; the learning rate and the width trade off: a large rate diverges, more
so for a wide net). The grid is 6 learning rates (0.3 .. 0.001, log-spaced) x 3 widths
(16, 64, 256) = 18 points; the others draw ``--trials`` trials from lr log-uniform in
[0.001, 0.3] and the same widths, seed 0; ASHA with min_steps 2 and reduction factor 3.
The methods run one after another (each ``%--concurrent``), so they do not share the CPUs.

An epoch of this MLP takes a fraction of a second, less than a task's start-up (Python,
torch, the sidecar: about 6 s here), which no early stopping saves; ``--epoch-seconds``
makes each epoch last that much longer (the trainer's ``--sleep``), standing for a real
model's epoch. Printed per method, from the study (best value, trial states, epochs trained:
each trial's last reported epoch) and sacct (GPU-seconds = each task's elapsed seconds x
its 1 GPU, start-up included), and the ratios against the grid's: the issue's goal is
TPE + ASHA within 1 % of the grid's best loss with <= 40 % of
its GPU-seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpclaunch.study import engine  # noqa: E402
from hpclaunch.study.config import read_study  # noqa: E402
from tests.integration.conftest import Cli  # noqa: E402

LRS = [0.3, 0.1, 0.03, 0.01, 0.003, 0.001]
WIDTHS = [16, 64, 256]
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=len(LRS) * len(WIDTHS))
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--epoch-seconds", type=float, default=1.0)
    args = parser.parse_args()
    cli = Cli(Path(f"/tmp/hpclaunch-bench-{uuid.uuid4().hex[:6]}"))
    python = str(REPO / ".venv" / "bin" / "python")
    space = {"lr": {"distribution": "log_uniform", "min": 0.001, "max": 0.3}, "width": WIDTHS}
    methods: dict[str, dict[str, Any]] = {
        "grid": {"method": "grid", "parameters": {"lr": LRS, "width": WIDTHS}},
        "random": {"method": "random", "parameters": space, "trials": args.trials, "seed": 0},
        "tpe": {"method": "tpe", "parameters": space, "trials": args.trials, "seed": 0},
        "tpe+asha": {
            "method": "tpe",
            "parameters": space,
            "trials": args.trials,
            "seed": 0,
            "early_terminate": {"type": "asha", "min_steps": 2, "reduction_factor": 3},
        },
    }
    results = {}
    submitted: list[str] = []
    try:
        for name, sweep in methods.items():
            spec = {
                "name": f"bench-{name}",
                "project": "research",
                "launcher": "srun",
                "resources": {"time": "00:10:00", "mem": "500M"},
                "command": [
                    python,
                    "examples/train_sweep.py",
                    "--lr",
                    "{lr}",
                    "--width",
                    "{width}",
                    "--sleep",
                    str(args.epoch_seconds),
                ],
                "sweep": {
                    **sweep,
                    "metric": {"name": "val_loss"},
                    "max_concurrent": args.concurrent,
                },
            }
            path = Path(f"/tmp/bench-{name}.json")
            path.write_text(json.dumps(spec))
            out = cli("sweep", str(path))
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            sweep_id = out.stdout.strip()
            status = _wait(cli, sweep_id)
            submitted += [a["job_id"] for a in status["arrays"]]
            results[name] = _measure(status)
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    finally:
        if submitted:
            subprocess.run(["scancel", *submitted], check=False, capture_output=True)
    _report(results)


def _wait(cli: Cli, sweep_id: str) -> dict[str, Any]:
    while True:
        out = cli("sweep", "status", sweep_id, "--json")
        data: dict[str, Any] = json.loads(out.stdout)
        if data["tasks"] and {t["state"] for t in data["tasks"]} <= FINAL:
            return data
        time.sleep(2)


def _measure(status: dict[str, Any]) -> dict[str, Any]:
    config = read_study(Path(status["job_dir"]) / "study.json")
    engine._OPEN.clear()
    trials = engine.load_study(config).trials
    values = [t.value for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    states: dict[str, int] = {}
    for trial in trials:
        states[trial.state.name] = states.get(trial.state.name, 0) + 1
    jobs = ",".join(a["job_id"] for a in status["arrays"])
    seconds = _gpu_seconds(jobs)
    epochs = sum(t.last_step or 0 for t in trials)
    best = min(values) if values else None
    return {"best": best, "gpu_s": seconds, "epochs": epochs, "states": states}


def _gpu_seconds(jobs: str) -> float:
    """Every task's elapsed seconds (1 GPU each), once slurmdbd has them all."""
    for _ in range(60):
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-D", "-j", jobs, "-o", "State,ElapsedRaw"],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("|") for line in out.stdout.splitlines() if line]
        if rows and all(r[0].split()[0] in FINAL | {"REQUEUED"} for r in rows):
            return float(sum(int(r[1]) for r in rows))
        time.sleep(1)
    raise SystemExit(f"sacct never settled for {jobs}")


def _report(results: dict[str, dict[str, Any]]) -> None:
    grid = results["grid"]
    print()
    print(
        f"{'method':10} {'best val_loss':>14} {'GPU-s':>7} {'epochs':>7} {'best/grid':>10} "
        f"{'GPU-s/grid':>11} {'epochs/grid':>12}  trials"
    )
    for name, r in results.items():
        best = r["best"]
        ratio = best / grid["best"] if best is not None and grid["best"] else float("nan")
        gpu = r["gpu_s"] / grid["gpu_s"] if grid["gpu_s"] else float("nan")
        states = ", ".join(f"{n} {s.lower()}" for s, n in sorted(r["states"].items()))
        shown = f"{best:.5f}" if best is not None else "-"
        epochs = r["epochs"] / grid["epochs"] if grid["epochs"] else float("nan")
        print(
            f"{name:10} {shown:>14} {r['gpu_s']:7.0f} {r['epochs']:7d} {ratio:10.3f} "
            f"{gpu:11.3f} {epochs:12.3f}  {states}"
        )


if __name__ == "__main__":
    main()
