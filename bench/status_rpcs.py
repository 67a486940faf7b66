"""slurmctld RPCs per `hpclaunch status` poll of 1, 100 and 1,000 jobs, against a naive
per-job `squeue -h -j ID` loop over the same jobs, read from `sdiag` before and after.

    .venv/bin/python bench/status_rpcs.py [--repeats 5]

The jobs are the tasks of ONE held array (`sbatch --hold --array=0-999 --wrap true`): 1,000
job ids (`ID_0` .. `ID_999`) in one submission that never runs, cancelled at the end. Needs
MaxArraySize > 999 (the local cluster has 1001).

Counting: sdiag's "Remote Procedure Call statistics by message type" counts every RPC
slurmctld served since its start (or the last `sdiag --reset`, which we never do: the cluster
is shared). sdiag is itself an RPC (REQUEST_STATS_INFO), so those are left out, and the
median delta of an empty measurement (sdiag, nothing, sdiag) is subtracted as the baseline.
Other users of the cluster add noise: each figure is the median of --repeats measurements.
sacct talks to slurmdbd, not slurmctld, so it does not appear here. Goal (issue 3): one RPC
per poll whatever N.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
_RPC_LINE = re.compile(r"^\s*([A-Z_]+)\s+\(\s*\d+\)\s+count:(\d+)")
SDIAG_OWN = "REQUEST_STATS_INFO"


def rpc_counts() -> Counter[str]:
    """RPC counts by message type, from sdiag."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    counts: Counter[str] = Counter()
    section = False
    for line in out.splitlines():
        if line.startswith("Remote Procedure Call statistics by message type"):
            section = True
            continue
        if section and line.startswith("Remote Procedure Call statistics by"):
            break
        match = _RPC_LINE.match(line)
        if section and match:
            counts[match.group(1)] = int(match.group(2))
    return counts


def measure(action: Callable[[], None]) -> Counter[str]:
    """RPCs by type while ``action`` ran (sdiag's own excluded)."""
    before = rpc_counts()
    action()
    after = rpc_counts()
    delta = after - before
    delta.pop(SDIAG_OWN, None)
    return delta


def median_rpcs(action: Callable[[], None], repeats: int) -> tuple[float, Counter[str]]:
    """(median total RPCs, the breakdown of the run closest to the median)."""
    runs = [measure(action) for _ in range(repeats)]
    totals = [sum(r.values()) for r in runs]
    med = statistics.median(totals)
    closest = min(runs, key=lambda r: abs(sum(r.values()) - med))
    return med, closest


def submit_held_array(size: int) -> str:
    out = subprocess.run(
        [
            *("sbatch", "--parsable", "--hold", f"--array=0-{size - 1}", "--output=/dev/null"),
            *("--job-name=bench-status-rpcs", "--wrap", "true"),
        ],
        cwd=os.path.expanduser("~"),  # a directory every node sees (not /tmp)
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().split(";")[0]


def hpclaunch_status(ids: list[str], env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        proc = subprocess.run(
            [HPCLAUNCH, "status", "--json", *ids], env=env, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise SystemExit(f"hpclaunch status failed:\n{proc.stderr}")

    return run


def naive_loop(ids: list[str]) -> Callable[[], None]:
    def run() -> None:
        for job_id in ids:
            subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, check=False)

    return run


def _fmt(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="1,100,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    array = submit_held_array(max(sizes))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, XDG_STATE_HOME=tmp, XDG_CACHE_HOME=tmp, XDG_DATA_HOME=tmp)
            baseline, _ = median_rpcs(lambda: None, max(args.repeats, 5))
            print(
                f"{time.strftime('%Y-%m-%d')}: held array {array}, {args.repeats} repeats; "
                f"baseline (sdiag..sdiag) {baseline:g} RPCs, subtracted"
            )
            print(f"{'jobs':>5} {'hpclaunch status':>17} {'naive squeue -j loop':>21} {'ratio':>7}")
            for n in sizes:
                ids = [f"{array}_{i}" for i in range(n)]
                ours, ours_kinds = median_rpcs(hpclaunch_status(ids, env), args.repeats)
                naive_repeats = args.repeats if n <= 100 else max(1, min(args.repeats, 3))
                theirs, theirs_kinds = median_rpcs(naive_loop(ids), naive_repeats)
                ours, theirs = max(ours - baseline, 0), max(theirs - baseline, 0)
                ratio = f"{theirs / ours:6.0f}x" if ours else "   n/a"
                print(f"{n:5d} {ours:17g} {theirs:21g} {ratio}")
                print(f"      hpclaunch: {_fmt(ours_kinds)}")
                print(f"      naive:     {_fmt(theirs_kinds)}")
    finally:
        subprocess.run(["scancel", array], check=False)


if __name__ == "__main__":
    main()
