"""`hpclaunch status` as a whole process, for 0, 100 and 1,000 jobs, against `python -c pass`
and plain `squeue -j IDS` measured in the same run (issue 17's goal: <= 0.3 s).

    .venv/bin/python bench/status_speed.py [--runs 10]

Needs the local cluster (scripts/demo or scripts/test starts it). The jobs are held
(`sbatch --hold --wrap true`, so they stay PENDING and in squeue) and recorded in a private
history, as `hpclaunch submit` would; every one is cancelled at the end. Rows:

- `status` (0 live jobs): the default `hpclaunch status` over a history of 20 jobs that
  have all ended, whose final states the history already holds.
- `status IDS` (N = 100, 1,000): every id on the command line, all live.

Each command runs --runs times in a fresh process, interleaved with the baselines.
Record the medians in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
HPCLAUNCH = str(Path(PY).with_name("hpclaunch"))
SIZES = (100, 1000)


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr.decode()}")
    return elapsed


def held_jobs(count: int) -> list[str]:
    """``count`` held one-line jobs (sbatch --parsable ids)."""
    ids = []
    for _ in range(count):
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--hold",
                "--job-name=bench-status",
                "--mem=10M",
                "--time=1",
                "--output=/dev/null",
                "--wrap",
                "true",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        ids.append(out.stdout.strip().split(";")[0])
    return ids


def finished_jobs(count: int) -> list[str]:
    """``count`` jobs that ran and ended (one array, so they end together)."""
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--wait",
            f"--array=0-{count - 1}",
            "--job-name=bench-done",
            "--mem=10M",
            "--time=1",
            "--output=/dev/null",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    array = out.stdout.strip().split(";")[0]
    return [f"{array}_{i}" for i in range(count)]


def remember(ids: list[str], env: dict[str, str], *, state: str | None) -> None:
    """History rows for ``ids``, as ``hpclaunch submit`` writes them."""
    code = (
        "import sys\n"
        "from hpclaunch.store.history import SubmissionRecord, record_submission\n"
        "state = sys.argv[1] or None\n"
        "for job_id in sys.argv[2:]:\n"
        "    record_submission(SubmissionRecord(job_id=job_id, cluster=None, name='bench',\n"
        "        submission_id='bench-' + job_id, job_dir='/tmp', site='local',\n"
        "        submitted_at='2026-11-25T00:00:00+00:00', tier='medium', qos='normal',\n"
        "        state=state, attempts=1 if state else None, exit_code=0 if state else None))\n"
    )
    subprocess.run([PY, "-c", code, state or "", *ids], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    live: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(
            os.environ,
            XDG_DATA_HOME=tmp,
            XDG_STATE_HOME=tmp,
            XDG_CACHE_HOME=tmp,
            HPCLAUNCH_SITE="local",
        )
        try:
            remember(finished_jobs(20), env, state="COMPLETED")
            live = held_jobs(max(SIZES))
            remember(live, env, state=None)
            commands = {
                "python -c pass": [PY, "-c", "pass"],
                "status (0 live)": [HPCLAUNCH, "status"],
            }
            for size in SIZES:
                ids = live[:size]
                commands[f"squeue -j ({size})"] = ["squeue", "-h", "-j", ",".join(ids)]
                commands[f"status IDS ({size})"] = [HPCLAUNCH, "status", *ids]
            rows = {name: [] for name in commands}
            for _ in range(args.runs):
                for name, argv in commands.items():
                    rows[name].append(timed(argv, env))
        finally:
            if live:
                subprocess.run(["scancel", *live], check=False)
    base = statistics.median(rows["python -c pass"])
    print(f"{args.runs} runs each, {time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}")
    print(f"{'command':24} {'median':>9} {'best':>9} {'x pass':>8}")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:24} {med * 1000:7.1f}ms {min(values) * 1000:7.1f}ms {med / base:7.1f}x")
    worst = max(statistics.median(v) for k, v in rows.items() if k.startswith("status"))
    verdict = "met" if worst <= 0.3 else "NOT met"
    print(f"goal hpclaunch status <= 300 ms: {verdict} (slowest median {worst * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
