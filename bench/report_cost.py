"""What ``hpclaunch report`` costs for a job with 10,000 GPU samples (issue 31).

    .venv/bin/python bench/report_cost.py [--samples 10000] [--gpus 8] [--runs 10]

A job is made up in a private history and job directory: its ``metrics.jsonl`` holds
``--samples`` lines in the sampler's format (``--gpus`` GPUs, one line per GPU every 30 s,
two attempts with a requeue's gap), its ledger two attempts and a checkpoint. Slurm is asked
about it as the command always does (one sacct; the id is unknown to a local cluster, or
sacct is missing: the report then says accounting is unavailable, which costs the same).

Prints, medians of ``--runs`` fresh processes each, interleaved: ``python -c pass``,
``hpclaunch --help``, ``hpclaunch report ID``, ``... --json`` and ``... --html FILE``;
then the in-process parts (reading the samples, the GPU figures, the page) and the page's
size. Record the medians in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hpclaunch import jobdir

HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
JOB_ID = "987654321"


def make_job(root: Path, samples: int, gpus: int) -> dict[str, str]:
    """A history with one job whose directory holds the samples; the environment to use."""
    from hpclaunch.store.history import SubmissionRecord, history_path, record_submission
    from hpclaunch.supervise.ledger import Ledger

    env = dict(os.environ, XDG_DATA_HOME=str(root / "data"), XDG_STATE_HOME=str(root / "state"))
    job_dir = root / "job"
    (job_dir / "logs").mkdir(parents=True)
    start = time.time() - samples // gpus * 30 - 600
    lines = []
    for i in range(samples // gpus):
        ts = start + i * 30 + (600 if i >= samples // gpus // 2 else 0)  # a requeue's gap
        for g in range(gpus):
            lines.append(
                json.dumps(
                    {
                        "ts": ts,
                        "node": f"n{1 + g // 4}",
                        "attempt": int(i >= samples // gpus // 2),
                        "gpu": f"GPU-{g:04d}",
                        "pci": f"00000000:{0x18 + g:02X}:00.0",
                        "util": (i * 7 + g) % 100,
                        "mem_used": 20_000 + i % 1000,
                        "mem_total": 81_559,
                        "temp_c": 60,
                        "power_w": 250.0 + (i % 50),
                    }
                )
            )
    (job_dir / jobdir.GPU_METRICS).write_text("\n".join(lines) + "\n")
    Ledger(job_dir, 0).append("checkpoint_committed", step=100, seconds=1.0, path="c", reason="")
    Ledger(job_dir, 0).append("attempt_end", reason="preempted", exit_code=143, requeued=True)
    Ledger(job_dir, 1).append("attempt_end", reason="success", exit_code=0, requeued=False)
    record_submission(
        SubmissionRecord(
            job_id=JOB_ID, cluster=None, name="bench-report", submission_id="bench-report",
            job_dir=str(job_dir), site="local", submitted_at="2026-11-28T00:00:00+00:00",
            log_dir=str(job_dir / "logs"), tier="low", qos="low",
        ),
        path=history_path(env),
    )  # fmt: skip
    return env


def timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}):\n{done.stderr.decode()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = make_job(root, args.samples, args.gpus)
        page = root / "page.html"
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "hpclaunch --help": [HPCLAUNCH, "--help"],
            "report": [HPCLAUNCH, "report", JOB_ID],
            "report --json": [HPCLAUNCH, "report", JOB_ID, "--json"],
            "report --html": [HPCLAUNCH, "report", JOB_ID, "--html", str(page)],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():
            timed(argv, env)  # warm: bytecode, caches
        for _ in range(args.runs):
            for name, argv in commands.items():
                times[name].append(timed(argv, env))
        base = statistics.median(times["python -c pass"])
        print(f"{args.samples} samples ({args.gpus} GPUs), medians of {args.runs} runs")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:<18} {median * 1000:8.1f} ms  {median / base:6.1f}x python -c pass")
        print(f"  page: {page.stat().st_size / 1024:.0f} KiB")

        os.environ.update(env)
        from hpclaunch.report.gpus import gpu_stats
        from hpclaunch.supervise.gpumon import read_metrics

        text = (root / "job" / jobdir.GPU_METRICS).read_text()
        parts = {"read_metrics": lambda: read_metrics(text)}
        samples = read_metrics(text)
        parts["gpu_stats"] = lambda: gpu_stats(samples)
        import hpclaunch

        report = hpclaunch.Session().job(JOB_ID).report()
        parts["page (html)"] = report.html
        for name, call in parts.items():
            took = []
            for _ in range(args.runs):
                began = time.perf_counter()
                call()
                took.append(time.perf_counter() - began)
            print(f"  in-process {name:<14} {statistics.median(took) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
