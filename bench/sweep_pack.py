"""Short sweep points packed into array tasks (``sweep.pack``) vs one task per point, same
run, same cluster (issue 48).

    .venv/bin/python bench/sweep_pack.py [--points 1000] [--seconds 5] [--pack 32]
        [--launcher srun] [--only packed,unpacked]

Needs the running local cluster; takes its lock (/tmp/hpclaunch-cluster.lock) for the run.
Each point runs ``sleep SECONDS`` under the launcher (1 CPU, no GPU; the cluster's 4 nodes
x 8 CPUs run 32 at once). For each way, from ``hpclaunch sweep`` to the last point's end:

* makespan: the sweep's submission to the end of its last task (sacct ``End``);
* job records: the array tasks Slurm holds for the sweep (``squeue -r`` right after the
  submission): one per point unpacked, one per pack packed;
* slurmctld RPCs: the sum of ``sdiag``'s per-message-type counts over the sweep (``sdiag
  --reset`` first: root);
* every point COMPLETED (``sweep status``), or the figures are not printed as a result.

Prints each way's figures and the ratios (unpacked / packed); record them in
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
LOCK = Path(os.environ.get("HPCLAUNCH_CLUSTER_LOCK", "/tmp/hpclaunch-cluster.lock"))


@dataclass
class Figures:
    way: str
    makespan: float = 0.0
    records: int = 0
    rpcs: int = 0
    completed: int = 0


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload,no-any-return]


def rpc_total() -> int:
    """The sum of sdiag's "Remote Procedure Call statistics by message type" counts."""
    out = run(["sdiag"]).stdout
    part = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    return sum(int(n) for n in re.findall(r"\(\s*\d+\) count:(\d+)", part))


def one_way(way: str, points: int, seconds: float, pack: int, launcher: str, tmp: Path) -> Figures:
    spec = {
        "name": f"bench-{way}",
        "project": "research",
        "command": ["bash", "-c", f"sleep {seconds}", "-", "{x}"],
        "launcher": launcher,
        "resources": {"time": "00:01:00", "mem": "500M", "cpus_per_task": 1},
        "sweep": {"method": "grid", "parameters": {"x": list(range(points))}},
    }
    if way == "packed":
        spec["sweep"]["pack"] = pack  # type: ignore[index]
    path = tmp / f"{way}.json"
    path.write_text(json.dumps(spec))
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), XDG_DATA_HOME=str(tmp / "state"))
    run(["sdiag", "--reset"])
    start = time.time()
    out = run([HPCLAUNCH, "--site", "local", "sweep", str(path)], env=env, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(f"{way}: hpclaunch sweep failed: {out.stderr}")
    sweep_id = out.stdout.split()[0]
    status = json.loads(run([HPCLAUNCH, "sweep", "status", sweep_id, "--json"], env=env).stdout)
    arrays = [a["job_id"] for a in status["arrays"]]
    figures = Figures(way)
    figures.records = len(
        run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i"]).stdout.split()
    )
    while run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i"]).stdout.strip():
        time.sleep(2)
    figures.rpcs = rpc_total()
    ends = run(["sacct", "-n", "-X", "-P", "-j", ",".join(arrays), "-o", "End"]).stdout.split()
    last = max(datetime.fromisoformat(e).timestamp() for e in ends if e[:1].isdigit())
    figures.makespan = last - start
    status = json.loads(run([HPCLAUNCH, "sweep", "status", sweep_id, "--json"], env=env).stdout)
    figures.completed = status["counts"].get("COMPLETED", 0)
    print(
        f"{way}: makespan {figures.makespan:.0f} s, {figures.records} job records, "
        f"{figures.rpcs} slurmctld RPCs, {figures.completed}/{points} points COMPLETED "
        f"({status['counts']})",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--pack", type=int, default=32)
    parser.add_argument("--launcher", default="srun")
    parser.add_argument("--only", default="packed,unpacked")
    args = parser.parse_args()
    started = time.monotonic()
    with LOCK.open("a") as lock, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        got = {
            way: one_way(way, args.points, args.seconds, args.pack, args.launcher, Path(tmp))
            for way in args.only.split(",")
        }
    print()
    print("| way | points | makespan | job records | slurmctld RPCs | completed |")
    print("|---|---|---|---|---|---|")
    for f in got.values():
        cells = [f.way, str(args.points), f"{f.makespan:.0f} s", str(f.records), str(f.rpcs)]
        print("| " + " | ".join([*cells, str(f.completed)]) + " |")
    if {"packed", "unpacked"} <= set(got):
        p, u = got["packed"], got["unpacked"]
        print(
            f"| unpacked / packed | | {u.makespan / p.makespan:.1f}x | "
            f"{u.records / max(p.records, 1):.1f}x | {u.rpcs / max(p.rpcs, 1):.1f}x | |"
        )
    print(
        f"\n(pack {args.pack}, {args.seconds:g} s points, launcher {args.launcher}; "
        f"{time.monotonic() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
