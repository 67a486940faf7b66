"""The simulator against published numbers: the Pollux artifact's 8 workloads (160 jobs,
64 GPUs = 16 nodes x 4) at relative loads 0.5-2.0, our policies beside the artifact's own
results (issue 29).

    .venv/bin/python bench/elastic_sim.py [--loads 0.5 1.0 1.5 2.0] [--policies tiresias ...]

Per load and run (a policy, and whether the jobs are rigid or elastic: ``fixed`` keeps
each job's batch, ``adaptive`` picks the batch with the most progress per second): the
average job completion time (JCT) of each workload, their mean with its 95 % confidence
half-width over the 8 workloads, and, where the artifact ran the same policy (Tiresias +
tuned jobs), our mean against its mean and the **fidelity gate**: our Tiresias within
+-10 % of the artifact's mean and each workload within +-20 %. The baseline, measured in
the same run: our own Tiresias (every other run's change is paired against it, workload
by workload; the goal: the best elastic run <= 0.70 x at load 1.0). Record the
figures in bench/RESULTS.md and docs/simulator.md with the date.
"""

from __future__ import annotations

import argparse
import json
import time
from statistics import fmean

from hpclaunch.scheduling.simulate.measured.apps import data_dir
from hpclaunch.scheduling.simulate.measured.engine import simulate_rounds
from hpclaunch.scheduling.simulate.measured.jobs import Elastic, read_workload, workload_path
from hpclaunch.scheduling.simulate.measured.policies import POLICIES
from hpclaunch.scheduling.simulate.metrics import change, summarize

WORKLOADS = range(1, 9)
#: The runs: name -> (policy, how the workload's jobs may change size; None: rigid).
RUNS: dict[str, tuple[str, Elastic | None]] = {
    "fifo": ("fifo", None),
    "fifo-backfill": ("fifo-backfill", None),
    "tiresias": ("tiresias", None),
    "elastic-fixed": ("elastic", Elastic(batch="fixed")),
    "elastic-adaptive": ("elastic", Elastic(batch="adaptive")),
    # Today's `ours` on a one-tier workload is FIFO + backfill (the arbiter preempts only
    # across tiers): the fifo-backfill run. Ours with shrink before wait, grow into idle:
    "ours-elastic-fixed": ("fifo-elastic", Elastic(batch="fixed")),
    "ours-elastic-adaptive": ("fifo-elastic", Elastic(batch="adaptive")),
    "ones": ("ones", Elastic(batch="adaptive")),
}
#: Our policy -> the artifact's results it is to be compared with.
PUBLISHED = {"tiresias": "tiresias"}


def average_jct(run: str, workload: int, load: float) -> float:
    policy, elastic = RUNS[run]
    jobs = read_workload(workload_path(workload, load), elastic)
    return fmean(j.jct() for j in simulate_rounds(jobs, POLICIES[policy]()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=float, nargs="+", default=[0.5, 1.0, 1.5, 2.0])
    parser.add_argument("--policies", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--json", action="store_true", help="every figure, as JSON")
    args = parser.parse_args()
    reference = json.loads((data_dir() / "reference.json").read_text())
    policies = ["tiresias", *[p for p in args.policies if p != "tiresias"]]
    out: dict[str, dict[str, object]] = {}
    started = time.perf_counter()
    for load in args.loads:
        key = f"{load:.1f}"
        ours = {p: [average_jct(p, w, load) for w in WORKLOADS] for p in policies}
        row: dict[str, object] = {}
        print(f"\nload {key}: average JCT (s) per workload 1-8; mean +- 95 % CI over workloads")
        for name, published in reference.items():
            values = [published[key]["workloads"][f"workload-{w}"] for w in WORKLOADS]
            print(f"  {'artifact ' + name:22} {_row(values)}")
        base = ours["tiresias"]
        for policy, values in ours.items():
            s = summarize(values)
            label = policy if policy.startswith("ours") else f"ours {policy}"
            line = f"  {label:22} {_row(values)}"
            if policy != "tiresias":
                c = change(values, base)
                line += f"  vs our tiresias {c.mean:+.1f} % +- {c.ci95:.1f}"
            print(line)
            row[policy] = {"workloads": values, "mean": s.mean, "ci95": s.ci95}
            if policy in PUBLISHED:
                theirs = reference[PUBLISHED[policy]][key]
                per = [
                    v / theirs["workloads"][f"workload-{w}"] - 1
                    for w, v in zip(WORKLOADS, values, strict=True)
                ]
                whole = s.mean / theirs["mean"] - 1
                gate = abs(whole) <= 0.10 and all(abs(p) <= 0.20 for p in per)
                worst = max(per, key=abs)
                print(
                    f"  fidelity ({policy}): mean {100 * whole:+.1f} % against the artifact's "
                    f"{theirs['mean']:,.0f} s; worst workload {100 * worst:+.1f} %: "
                    f"{'MET' if gate else 'NOT MET'} (+-10 % mean, +-20 % each)"
                )
                row[f"{policy}_fidelity"] = {"mean": whole, "per_workload": per, "met": gate}
        out[key] = row
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.json:
        print(json.dumps(out, indent=1))


def _row(values: list[float]) -> str:
    s = summarize(values)
    cells = " ".join(f"{v:6.0f}" for v in values)
    return f"{cells}  {s.mean:6.0f} +- {s.ci95:4.0f}"


if __name__ == "__main__":
    main()
