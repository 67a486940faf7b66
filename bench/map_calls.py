"""1,000 calls of a small function: ``session.map`` vs submitit's ``map_array``, same run,
same cluster (issue 30: submit ≤ 0.8 x submitit's time; collecting all 1,000 results
≤ 0.5 s once they are there).

    .venv/bin/python bench/map_calls.py [--items 1000] [--reps 3]

Needs a running cluster and ``pip install submitit`` (bench only). Takes the cluster lock.
As in bench/sweep_submit.py, every job is submitted with ``--begin=now+1hour`` (nothing
runs) and cancelled after each repetition; both libraries are imported before any timing
and run in this process, as in a script or notebook. Measured:

* ``hpclaunch map``: ``hpclaunch.Session(site="local").map(square, range(N))`` from the
  call to the last array's id: the function and items pickled once into the job directory,
  the plan, the check against the cached capabilities, the sweep record, one sbatch per
  array (split at MaxArraySize);
* ``submitit map_array``: ``executor.map_array(square, items)`` per MaxArraySize items
  (submitit does not split: a larger array is refused): one pickle per item, one sbatch
  per array;
* ``hpclaunch results``: ``MapRun.results()`` once every task's ``result.pkl`` is there
  (written here, as the tasks would have; the arrays cancelled, so finished): one status
  call for the arrays and 1,000 result files read and unpickled, in order.

Prints medians and ratios; record them in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hpclaunch import jobdir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_submit import (
    BEGIN,
    CAP,
    LOCK,
    REPO,
    cancel,
    max_array_size,
    precompile,
    submitit_map,
    wait_for_room,
)


def square(x: int) -> int:
    return x * x


def hpclaunch_map(items: int) -> tuple[list[str], object]:
    import hpclaunch

    run = hpclaunch.Session(site="local").map(
        square,
        range(items),
        max_concurrent=CAP,
        project="research",
        resources={"time": "00:05:00", "mem": "50M"},
        sbatch_extra={"--begin": BEGIN},
    )
    return [ref.job_id for ref in run.arrays], run


def collect(run: object, items: int) -> float:
    """Seconds ``run.results()`` takes once every task wrote its result."""
    from hpclaunch.calls.payload import dump_value
    from hpclaunch.ops.job import MapRun
    from hpclaunch.supervise.sweep_task import task_dir

    assert isinstance(run, MapRun)
    assert run.job_dir is not None
    for index in range(items):
        path = Path(task_dir(run.job_dir, index)) / "call" / jobdir.RESULT
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(dump_value(index * index))
    t0 = time.perf_counter()
    values = run.results(timeout=120)
    seconds = time.perf_counter() - t0
    assert values == [i * i for i in range(items)]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    precompile()
    import submitit  # noqa: F401  (both imported before any timing)

    import hpclaunch.ops.session  # noqa: F401

    shared = Path.home() / ".hpclaunch" / "bench"
    shared.mkdir(parents=True, exist_ok=True)
    times: dict[str, list[float]] = {"hpclaunch map": [], "submitit map_array": []}
    collected: list[float] = []
    with LOCK.open("a") as lock, tempfile.TemporaryDirectory(dir=shared) as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder = Path(tmp)
        for kind in ("STATE", "DATA", "CACHE"):
            os.environ[f"XDG_{kind}_HOME"] = str(folder / kind.lower())
        os.chdir(REPO)
        size = max_array_size()
        for rep in range(args.reps):
            wait_for_room(3 * args.items)
            order = ["hpclaunch map", "submitit map_array"]
            for name in order if rep % 2 == 0 else order[::-1]:  # interleaved
                t0 = time.perf_counter()
                if name == "hpclaunch map":
                    ids, run = hpclaunch_map(args.items)
                else:
                    ids = submitit_map(args.items, folder / f"submitit-{rep}", size, square)
                times[name].append(time.perf_counter() - t0)
                cancel(ids)
                if name == "hpclaunch map":
                    collected.append(collect(run, args.items))
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.items} items, MaxArraySize {size}, {args.reps} repetitions, medians:")
    for name, value in med.items():
        print(f"  {name:20s} {value:7.3f} s   (all: {', '.join(f'{v:.3f}' for v in times[name])})")
    ratio = med["hpclaunch map"] / med["submitit map_array"]
    print(f"  hpclaunch map / submitit map_array: {ratio:.2f}x (goal <= 0.8x)")
    print(
        f"  hpclaunch results() of {args.items}: {statistics.median(collected):.3f} s "
        f"(all: {', '.join(f'{v:.3f}' for v in collected)}; goal <= 0.5 s)"
    )


if __name__ == "__main__":
    main()
