"""The simulator against published numbers: the Pollux artifact's 8 workloads (160 jobs,
64 GPUs = 16 nodes x 4) at relative loads 0.5-2.0, our policies beside the artifact's own
results (issues 29 and 49).

    .venv/bin/python bench/elastic_sim.py [--loads 0.5 1.0 1.5 2.0] [--runs tiresias ...]

Per load and run (:data:`hpclaunch.scheduling.simulate.measured.published.RUNS`): the
average job completion time (JCT) of each workload, their mean with its 95 % interval,
and the run over our Tiresias, paired workload by workload (the one ratio used
everywhere). The baseline, measured in the same run: our own Tiresias, held to the
**fidelity gate** against the artifact's Tiresias (+-10 % mean, +-20 % each workload):
the bench exits 1 when the gate is not met at a load, or the elastic path's check (our
Optimus + Oracle against the artifact's, the run ``optimus-oracle``). The goals of issue
49 are printed MET / NOT MET. Record the figures in bench/RESULTS.md and
docs/simulator.md with the date.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from statistics import fmean

from hpclaunch.scheduling.simulate.measured import policies
from hpclaunch.scheduling.simulate.measured.published import LOADS, RUNS, LoadResult, run_load

#: The adaptive-batch goal: the artifact's Pollux at load 1.0.
POLLUX_1_0 = 2751.0


def goals(results: dict[float, LoadResult]) -> list[tuple[str, bool]]:
    """Issue 49's goals that these results can say (a run not made is left out)."""
    out = []
    one = results.get(1.0)
    if one and (r := one.ratio("elastic-fixed")):
        out.append(
            (
                f"elastic, fixed batch, <= 0.80 x our Tiresias at load 1.0: x{r.mean:.3f}",
                r.mean <= 0.80,
            )
        )
    if one and "elastic-adaptive" in one.runs:
        mean = fmean(one.runs["elastic-adaptive"])
        out.append(
            (
                "elastic, adaptive batch, <= the artifact's Pollux (2,751 s) at load 1.0: "
                f"{mean:,.0f} s",
                mean <= POLLUX_1_0,
            )
        )
    for run in ("elastic-fixed", "elastic-adaptive"):
        ratios = {load: r.ratio(run) for load, r in results.items() if run in r.runs}
        if ratios:
            below = all(r is not None and r.mean < 1 for r in ratios.values())
            cells = ", ".join(f"{load:.1f}: x{r.mean:.3f}" for load, r in ratios.items() if r)
            out.append((f"{run} below our Tiresias at every load ({cells})", below))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=float, nargs="+", default=list(LOADS))
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--json", action="store_true", help="every figure, as JSON")
    parser.add_argument(
        "--explore",
        nargs="+",
        default=[],
        metavar="BATCH=N",
        help="an elastic job's bound on growth, N x the GPUs it measured at, by batch "
        f"(default: {' '.join(f'{k}={v}' for k, v in policies.EXPLORE.items())})",
    )
    args = parser.parse_args()
    for item in args.explore:
        batch, _, factor = item.partition("=")
        policies.EXPLORE[batch] = int(factor)
    started = time.perf_counter()
    results: dict[float, LoadResult] = {}
    for load in args.loads:
        results[load] = run_load(args.runs, load)
        print("\n" + results[load].table(), flush=True)
    print()
    for text, met in goals(results):
        print(f"goal: {text}: {'MET' if met else 'NOT MET'}")
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    if args.json:
        print(json.dumps({f"{k:.1f}": v.as_json() for k, v in results.items()}, indent=1))
    failed = [(load, c) for load, r in results.items() for c in r.checks() if not c.met]
    for load, check in failed:  # the gate, and the elastic path's check against Optimus
        print(f"load {load:.1f}: {check.line()}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
