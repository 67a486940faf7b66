"""The cli and pyslurm backends side by side, in this process, on the local cluster:

* status of 1, 100 and 1,000 jobs (tasks of held arrays): wall time per call and the
  slurmctld RPCs it cost (sdiag before and after; sacct/pyslurm.db talk to slurmdbd and are
  not counted there). Baseline of the same run: the cli backend (one squeue + one sacct).
* submit of one job (held, cancelled at once): wall time of ``backend.submit`` and of
  submitit's ``executor.submit`` (``pip install submitit``) against a plain ``sbatch --hold
  --wrap`` process.
* a 1,000-point sweep (held arrays of at most MaxArraySize - 1 tasks each):
  ``hpclaunch sweep`` as a whole process per backend, and submitit's ``map_array`` from a
  fresh ``python`` (arrays of 100), against plain ``sbatch --array --hold --wrap`` processes
  for the same arrays, and ``python -c pass`` (start-up).

    .venv/bin/python bench/backends.py [--repeats 7]

Needs the 25.11 cluster with an empty queue (about 7,000 jobs are made and cancelled; start
5 minutes after the last run: cancelled jobs count against MaxJobCount until MinJobAge) and
pyslurm in the venv (scripts/test installs it). Medians; record them in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from status_rpcs import measure, submit_held_array

from hpclaunch.backends import create_backend
from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.config.site import load_site
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.plan import build_plan
from hpclaunch.planning.render import render
from hpclaunch.transport.local import LocalRunner

HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
BACKENDS = ("cli", "pyslurm")


def timed(
    action: Callable[[], object], repeats: int, after: Callable[[], object] | None = None
) -> float:
    """Median wall seconds of ``action`` (``after`` runs between repeats, untimed)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        action()
        times.append(time.perf_counter() - t0)
        if after is not None:
            after()
    return statistics.median(times)


def plain_sbatch(*options: str) -> str:
    """``sbatch --parsable --hold OPTIONS --wrap true`` from the home directory: its job id."""
    argv = ["sbatch", "--parsable", "--hold", *options, "--wrap", "true"]
    home = os.path.expanduser("~")
    out = subprocess.run(argv, cwd=home, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _status_call(backend: Backend, refs: list[JobRef]) -> Callable[[], None]:
    def run() -> None:
        backend.status(refs)

    return run


def status_rows(backends: dict[str, Backend], arrays: list[str], repeats: int) -> None:
    print(f"status of N jobs (median of {repeats}; RPCs: slurmctld, from sdiag)")
    print(f"{'jobs':>5} " + " ".join(f"{n + ' ms':>12} {n + ' RPCs':>12}" for n in backends))
    for size in (1, 100, 1000):
        every = [JobRef(f"{array}_{i}") for array in arrays for i in range(100)]
        refs = every[:size]
        cells = []
        for backend in backends.values():
            call = _status_call(backend, refs)
            wall = timed(call, repeats)
            rpcs = statistics.median(sum(measure(call).values()) for _ in range(3))
            cells.append(f"{wall * 1000:12.1f} {rpcs:12g}")
        print(f"{size:5d} " + " ".join(cells))


def submit_rows(backends: dict[str, Backend], repeats: int) -> None:
    site = load_site("local")
    home = os.path.expanduser("~")
    spec = JobSpec.model_validate(
        {
            "name": "bench-submit",
            "command": ["true"],
            "project": "research",
            "resources": {"time": "1", "mem": "50M"},
            "sbatch_extra": {"--hold": None},
        }
    )
    submitted: list[str] = []

    def via(backend: Backend) -> Callable[[], None]:
        def run() -> None:
            plan = build_plan(spec, site, submission_id=uuid.uuid4().hex, home=home, cwd=home)
            submitted.append(backend.submit(render(plan)).job_id)

        return run

    def sbatch() -> None:
        submitted.append(plain_sbatch("-t", "1", "--mem=50M"))

    try:
        base = timed(sbatch, repeats)
        print(f"submit one job (median of {repeats}): plain sbatch process {base * 1000:.1f} ms")
        for name, backend in backends.items():
            wall = timed(via(backend), repeats)
            print(f"  {name:8} backend.submit {wall * 1000:7.1f} ms ({wall / base:.2f}x sbatch)")
        with tempfile.TemporaryDirectory(dir=home) as folder:
            wall = timed(submitit_one(Path(folder), submitted), repeats)
            print(f"  submitit executor.submit {wall * 1000:7.1f} ms ({wall / base:.2f}x sbatch)")
    finally:
        subprocess.run(["scancel", *submitted], check=False)


def submitit_one(folder: Path, submitted: list[str]) -> Callable[[], None]:
    """submitit's ``executor.submit`` of one held job (it pickles the call, writes its
    script and runs sbatch): ``pip install submitit`` (bench only)."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(
        timeout_min=1,
        mem_gb=0.05,
        slurm_account="research",
        slurm_additional_parameters={"hold": True},
    )

    def run() -> None:
        submitted.append(executor.submit(str, 1).job_id)

    return run


def sweep_rows(repeats: int) -> None:
    home = os.path.expanduser("~")
    with tempfile.TemporaryDirectory(dir=home) as tmp:
        spec = Path(tmp) / "sweep.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "bench-sweep",
                    "command": ["echo", "{x}"],
                    "project": "research",
                    "tier": "low",
                    "resources": {"time": "1", "mem": "10M"},
                    "sbatch_extra": {"--hold": None},
                    "sweep": {"method": "grid", "parameters": {"x": list(range(1000))}},
                }
            )
        )
        env = dict(os.environ, XDG_STATE_HOME=tmp, XDG_DATA_HOME=tmp)
        ids: list[str] = []

        def plain() -> None:
            for _ in range(10):  # MaxArraySize 101: what hpclaunch sweep submits too
                ids.append(plain_sbatch("--array=0-99", "-t", "1"))

        def sweep(name: str) -> Callable[[], None]:
            def run() -> None:
                out = subprocess.run(
                    [HPCLAUNCH, "--site", "local", "--backend", name, "sweep", str(spec)],
                    cwd=home,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    raise SystemExit(f"hpclaunch sweep failed:\n{out.stderr}")
                ids.extend(out.stdout.split())

            return run

        def nothing() -> None:
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        def cancel() -> None:  # an empty queue for each repeat
            # hpclaunch sweep prints the sweep's id; its arrays carry the spec's name.
            jobs = [i for i in ids if i.isdigit()]
            subprocess.run(["scancel", "--name=bench-sweep", *jobs], check=False)
            ids.clear()

        try:
            start = timed(nothing, repeats)
            base = timed(plain, repeats, cancel)
            print(
                f"1,000-point sweep (median of {repeats}): 10 plain sbatch --array=0-99 "
                f"{base * 1000:.0f} ms; python -c pass {start * 1000:.0f} ms"
            )
            for name in BACKENDS:
                wall = timed(sweep(name), repeats, cancel)
                print(f"  hpclaunch --backend {name:8} sweep {wall * 1000:6.0f} ms")
            wall = timed(submitit_sweep(Path(tmp), ids), repeats, cancel)
            print(f"  submitit map_array, fresh python  {wall * 1000:6.0f} ms")
        finally:
            cancel()


def submitit_sweep(folder: Path, ids: list[str]) -> Callable[[], None]:
    """submitit's ``map_array`` of the 1,000 points in arrays of 100, from a fresh
    ``python`` as a user runs a script (bench/sweep_submit.py's ``submitit_script``)."""
    from sweep_submit import submitit_script

    def run() -> None:
        ids.extend(submitit_script(1000, folder, 100))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    site = load_site("local")
    backends = {name: create_backend(name, LocalRunner(), site) for name in BACKENDS}
    print(f"{time.strftime('%Y-%m-%d')}: {backends['pyslurm'].describe()}")
    # The test cluster's MaxArraySize is 101: 1,000 jobs are ten held arrays of 100 tasks.
    arrays = [submit_held_array(100) for _ in range(10)]
    try:
        status_rows(backends, arrays, args.repeats)
    finally:
        subprocess.run(["scancel", *arrays], check=False)
    submit_rows(backends, args.repeats)
    # Cancelled jobs count against MaxJobCount (10,000 here) until MinJobAge (300 s) passes:
    # two repeats of three 1,000-task sweeps stay below it; more made sbatch retry for 60 s.
    sweep_rows(2)


if __name__ == "__main__":
    main()
