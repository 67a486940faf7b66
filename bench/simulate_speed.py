"""Simulator speed: 100,000 synthetic jobs on 256 GPUs (32 x 8), per policy.

Prints the wall time of the event loop and the simulated events per second (heap events
processed: arrivals, re-arrivals, releases, finishes), medians over 3 runs (workload seed
1, load 1.0). Run: ``python bench/simulate_speed.py [--jobs N] [--runs R]``.
"""

from __future__ import annotations

import argparse
import statistics

from hpclaunch.scheduling.simulate.engine import simulate
from hpclaunch.scheduling.simulate.policies import POLICIES, make_policy
from hpclaunch.scheduling.simulate.workload import WorkloadParams, copy_jobs, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    jobs = generate(WorkloadParams(jobs=args.jobs, load=1.0), 1)
    print(f"{args.jobs} jobs, 256 GPUs, load 1.0; medians of {args.runs} runs")
    print(f"{'policy':<15}{'wall s':>9}{'events':>10}{'events/s':>12}")
    for name in POLICIES:
        walls, events = [], 0
        for _ in range(args.runs):
            result = simulate(copy_jobs(jobs), make_policy(name, 1))
            walls.append(result.wall_seconds)
            events = result.events
        wall = statistics.median(walls)
        print(f"{name:<15}{wall:>9.2f}{events:>10}{events / wall:>12,.0f}")


if __name__ == "__main__":
    main()
