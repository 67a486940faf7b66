"""The cli and pyslurm backends where the work is long or the jobs are over, same run:

* the arbiter for 1,000 passes (``--passes``) per backend, in this process, dry run (it
  decides and acts on nothing): median and p95 wall time per pass, and this process's
  resident memory (``/proc/self/statm``) after pass 1 and after the last (no growth wanted).
  The queue holds a held 100-task array and a few pending jobs, so every pass reads jobs
  and nodes.
* status of 1,000 finished jobs: 10 arrays of 100 ``true`` tasks run to the end, then
  ``backend.status`` of all of them (slurmctld still holds them, MinJobAge, and reports them
  ended, so both backends also ask accounting for their exit codes: squeue + sacct against
  one job-list RPC + one slurmdbd query). slurmctld RPCs from sdiag.

    .venv/bin/python bench/backends_long.py [--passes 1000] [--repeats 7]

Needs the 25.11 cluster with an empty queue and pyslurm in the venv. Record the medians in
bench/RESULTS.md.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from status_rpcs import measure

from hpclaunch.backends import create_backend
from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.config.site import load_site
from hpclaunch.scheduling.arbiter.daemon import Arbiter, ArbiterOptions
from hpclaunch.transport.local import LocalRunner

BACKENDS = ("cli", "pyslurm")
NAME = "bench-long"


def rss_mib() -> float:
    """This process's resident memory now (not its peak)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def sbatch(*options: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", f"--job-name={NAME}", "--output=/dev/null", *options],
        cwd=os.path.expanduser("~"),  # a directory every node sees
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().split(";")[0]


def arbiter_rows(backends: dict[str, Backend], passes: int) -> None:
    site = backends["cli"].site
    sbatch("--hold", "--array=0-99", "--account=research-oq", "--qos=low", "--wrap=true")
    for qos in ("critical", "high"):
        sbatch("--hold", "--account=research", f"--qos={qos}", "--gres=gpu:4", "--wrap=true")
    print(f"arbiter, {passes} passes (dry run): ms per pass, RSS after pass 1 and {passes}")
    print(f"{'backend':>8} {'median':>8} {'p95':>8} {'RSS 1':>10} {'RSS last':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, backend in backends.items():
            arbiter = Arbiter(
                backend, site, Path(tmp) / f"{name}.jsonl", ArbiterOptions(dry_run=True)
            )
            times = []
            first = 0.0
            for n in range(passes):
                t0 = time.perf_counter()
                arbiter.step()
                times.append(time.perf_counter() - t0)
                if n == 0:
                    first = rss_mib()
            last = rss_mib()
            p95 = statistics.quantiles(times, n=20)[-1]
            print(
                f"{name:>8} {statistics.median(times) * 1000:8.2f} {p95 * 1000:8.2f} "
                f"{first:8.1f}MB {last:8.1f}MB"
            )
    subprocess.run(["scancel", f"--name={NAME}"], check=False)


def finished_rows(backends: dict[str, Backend], repeats: int) -> None:
    arrays = [sbatch("--array=0-99", "--mem=10M", "--wrap=true") for _ in range(10)]
    refs = [JobRef(f"{array}_{task}") for array in arrays for task in range(100)]
    deadline = time.monotonic() + 600
    while True:
        found = backends["pyslurm"].status(refs)
        if all(info.state.is_finished and info.exit_code is not None for info in found.values()):
            break
        if time.monotonic() > deadline:
            raise SystemExit("the 1,000 tasks did not all finish in 10 minutes")
        time.sleep(2)
    print(f"status of 1,000 finished jobs (median of {repeats}; RPCs: slurmctld, from sdiag)")
    answers = {}
    for name, backend in backends.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            answers[name] = backend.status(refs)
            times.append(time.perf_counter() - t0)
        rpcs = statistics.median(
            sum(measure(lambda: backend.status(refs)).values())  # noqa: B023 (called at once)
            for _ in range(3)
        )
        print(f"{name:>8} {statistics.median(times) * 1000:8.1f} ms {rpcs:4g} RPCs")
    same = {
        ref: (a.state, a.exit_code)
        == (answers["pyslurm"][ref].state, answers["pyslurm"][ref].exit_code)
        for ref, a in answers["cli"].items()
    }
    print(f"same state and exit code from both: {sum(same.values())} of {len(same)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runner, site = LocalRunner(), load_site("local")
    backends = {name: create_backend(name, runner, site) for name in BACKENDS}
    print(f"pyslurm backend: {backends['pyslurm'].describe()}")
    arbiter_rows(backends, args.passes)
    finished_rows(backends, args.repeats)


if __name__ == "__main__":
    main()
