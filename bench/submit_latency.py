"""Submit-to-start and submit-to-end latency of a trivial job on the local cluster:
`hpclaunch submit` against a plain `sbatch --wrap` baseline, measured in the same run.

    .venv/bin/python bench/submit_latency.py [--jobs 10]

Needs a running cluster (docker/slurm-cluster/cluster.sh up). Prints medians (and p90) for
both and the ratio hpclaunch / sbatch; record them in bench/RESULTS.md with the date.
The clock runs from just before the submit command starts to the first squeue poll (every
20 ms) that sees RUNNING, then COMPLETED (sacct, since squeue may already have forgotten).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
POLL = 0.02


def state_of(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if out:
        return out
    acct = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return acct.split()[0] if acct else "UNKNOWN"


def timed(submit: Callable[[], str]) -> tuple[float, float, float]:
    """(submit command seconds, seconds to RUNNING, seconds to COMPLETED)."""
    t0 = time.perf_counter()
    job_id = submit()
    t_submit = time.perf_counter() - t0
    t_running = None
    while True:
        state = state_of(job_id)
        now = time.perf_counter() - t0
        if state == "RUNNING" and t_running is None:
            t_running = now
        if state in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}:
            assert state == "COMPLETED", f"job {job_id} ended {state}"
            return t_submit, t_running if t_running is not None else now, now
        time.sleep(POLL)


def sbatch_baseline(outdir: str) -> str:
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-t",
            "5",
            "--mem=100M",
            f"--output={outdir}/%j.out",
            "--wrap",
            "sleep 1",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split(";")[0]


def hpclaunch_submit(spec: Path) -> str:
    out = subprocess.run(
        [HPCLAUNCH, "--site", "local", "submit", str(spec)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    return out.strip()


def summary(name: str, rows: list[tuple[float, float, float]]) -> dict[str, float]:
    cols = list(zip(*rows, strict=True))
    med = {
        k: statistics.median(c) for k, c in zip(("submit", "running", "done"), cols, strict=True)
    }
    p90 = statistics.quantiles(cols[1], n=10)[-1] if len(rows) >= 2 else cols[1][0]
    print(
        f"{name:10s} submit cmd {med['submit'] * 1000:7.1f} ms   to RUNNING {med['running']:6.2f} s"
        f" (p90 {p90:.2f})   to COMPLETED {med['done']:6.2f} s"
    )
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10)
    args = parser.parse_args()
    # Slurm writes the baseline's output on the node: use a directory the nodes share.
    shared = Path.home() / ".hpclaunch" / "bench"
    shared.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=shared) as tmp:
        spec = Path(tmp) / "bench.yaml"
        spec.write_text(
            "name: bench\ncommand: [sleep, '1']\n"
            "resources: {time: '00:05:00', mem: 100M}\nproject: research\n"
        )
        base, ours = [], []
        for _ in range(args.jobs):  # interleaved, so drift hits both alike
            base.append(timed(lambda: sbatch_baseline(tmp)))
            ours.append(timed(lambda: hpclaunch_submit(spec)))
    print(f"{args.jobs} trivial jobs each (sleep 1), medians:")
    b = summary("sbatch", base)
    o = summary("hpclaunch", ours)
    print(
        f"ratio hpclaunch/sbatch: submit cmd {o['submit'] / b['submit']:.1f}x, "
        f"to RUNNING {o['running'] / b['running']:.2f}x, to COMPLETED {o['done'] / b['done']:.2f}x"
    )


if __name__ == "__main__":
    main()
