"""Submitting a 1,000-point sweep: hpclaunch vs a loop of sbatch calls vs submitit's map_array,
same run, same cluster.

    .venv/bin/python bench/sweep_submit.py [--points 1000] [--reps 3]

Needs a running cluster and ``pip install submitit`` (bench only, not a project dependency).
Takes the cluster lock (/tmp/hpclaunch-cluster.lock) for the whole run. Every job is
submitted with ``--begin=now+1hour`` so that nothing runs, and is cancelled after each
repetition. Measured, from the call to the last job id:

* ``hpclaunch CLI``: ``hpclaunch sweep spec.yaml`` as a user types it (a fresh process:
  imports, plan, render, params file, one sbatch per array);
* ``hpclaunch lib``: ``hpclaunch.Session(site="local").sweeps.submit(spec)`` in this process (like
  submitit, which runs in the caller's process): the same work as the CLI (quota read,
  check against the cached capabilities, sweep record, history rows; until 2026-11-25 this
  row was plan_sweep + submit_sweep alone). Both libraries are imported before any timing
  (a script or notebook imports once, then submits): their import times are printed apart;
* ``CLI dry run``: ``hpclaunch sweep --dry-run`` (no sbatch): the CLI's cost before it
  submits (interpreter, imports, spec, plan, render), to show where the CLI's time goes;
  ``CLI dry run, no cache``: the same as the first call after the capability cache
  (``hpclaunch/slurm/capabilities.py``: MaxArraySize, QOS, GRES; kept 300 s) expired, which reads
  them from Slurm again. Every other hpclaunch call runs with the cache filled (it is refilled
  after the wait between repetitions, which outlasts it);
* ``sbatch loop``: one ``sbatch --wrap`` per point, from this process;
* ``submitit``: ``executor.map_array`` (it writes one pickle per point, then one sbatch per
  array). submitit 1.5 does not split by MaxArraySize: on a cluster with MaxArraySize=101 a
  1,000-element map_array is refused, so it is called once per 101 points, as a user would;
* ``submitit script``: the same from a fresh ``python`` process (a script run from the
  shell): the like-for-like peer of the CLI, as ``submitit`` is of the library call.

hpclaunch's modules are byte-compiled first (``compileall``), as installing the wheel does:
with ``PYTHONDONTWRITEBYTECODE=1`` in the environment (CI sets it) an editable install has no
``.pyc`` files, and every ``hpclaunch`` process compiled ~35 modules from source (~90 ms).

Prints medians over the repetitions and the ratios; record them in bench/RESULTS.md. Each
repetition leaves 5,000 cancelled job records in slurmctld for MinJobAge (300 s) against
MaxJobCount (10,000): a third repetition waits for the first one's to be purged.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))
LOCK = Path(os.environ.get("HPCLAUNCH_CLUSTER_LOCK", "/tmp/hpclaunch-cluster.lock"))
BEGIN = "now+1hour"
CAP = 64


def max_array_size() -> int:
    out = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        if line.startswith("MaxArraySize"):
            return int(line.split("=")[1])
    return 1001


def wait_for_room(needed: int, timeout: float = 420) -> None:
    """Wait until slurmctld has room for ``needed`` more job records.

    Cancelled jobs stay in slurmctld's memory for MinJobAge (300 s here) and count against
    MaxJobCount (10,000); sbatch then retries with back-off instead of failing. One
    repetition leaves 5 x points records behind.
    """
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    limit = next(
        (int(line.split("=")[1]) for line in config.splitlines() if line.startswith("MaxJobCount")),
        10000,
    )
    deadline = time.monotonic() + timeout
    while True:
        held = held_records()
        if held + needed + 200 <= limit or time.monotonic() > deadline:
            return
        print(f"  waiting: {held} job records held, MaxJobCount {limit}", file=sys.stderr)
        time.sleep(15)


def held_records() -> int:
    out = subprocess.run(
        ["squeue", "-h", "-r", "--states=all", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.splitlines())


def cancel(ids: list[str]) -> None:
    for start in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[start : start + 500]], check=False, capture_output=True)


def write_spec(folder: Path, points: int) -> Path:
    spec = {
        "name": "bench-sweep",
        "project": "research",
        "command": ["echo", "{i}"],
        "resources": {"time": "00:05:00", "mem": "50M"},
        "sbatch_extra": {"--begin": BEGIN},
        "sweep": {"method": "list", "points": [{"i": i} for i in range(points)]},
    }
    spec["sweep"]["max_concurrent"] = CAP  # type: ignore[index]
    path = folder / "sweep.yaml"
    path.write_text(json.dumps(spec))
    return path


def hpclaunch_cli(spec: Path, env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [HPCLAUNCH, "--site", "local", "sweep", str(spec)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env=env,
    )
    sweep_id = out.stdout.strip()
    record = Path(env["XDG_STATE_HOME"]) / "hpclaunch" / "sweeps" / f"{sweep_id}.json"
    return [a["job_id"] for a in json.loads(record.read_text())["arrays"]]


def hpclaunch_lib(spec_path: Path) -> list[str]:
    """``hpclaunch.Session(site="local").sweeps.submit(spec)``: the same work as the CLI (the quota
    read, the check against the cached capabilities, the sweep record and history rows)."""
    import hpclaunch

    return [
        ref.job_id for ref in hpclaunch.Session(site="local").sweeps.submit(str(spec_path)).arrays
    ]


def cli_dry_run(spec: Path, env: dict[str, str], *, drop_cache: bool = False) -> list[str]:
    """``hpclaunch sweep --dry-run``; ``drop_cache``: as the first call after the
    capability cache expired (``hpclaunch/slurm/capabilities.py``, 300 s), which asks Slurm
    again."""
    if drop_cache:
        for path in (Path(env["XDG_CACHE_HOME"]) / "hpclaunch").glob("*.json"):
            path.unlink()
    subprocess.run(
        [HPCLAUNCH, "--site", "local", "sweep", "--dry-run", str(spec)],
        capture_output=True,
        check=True,
        cwd=REPO,
        env=env,
    )
    return []


def import_seconds() -> dict[str, float]:
    """Import both libraries before any timing; return how long each import took."""
    t0 = time.perf_counter()
    import hpclaunch.ops.session
    import hpclaunch.ops.sweep  # noqa: F401
    from hpclaunch.backends.cli import CliBackend  # noqa: F401
    from hpclaunch.config.site import load_site  # noqa: F401
    from hpclaunch.jobspec.job import load_spec  # noqa: F401

    t1 = time.perf_counter()
    import submitit  # noqa: F401

    return {"hpclaunch": t1 - t0, "submitit": time.perf_counter() - t1}


def sbatch_loop(points: int, outdir: Path) -> list[str]:
    ids = []
    for i in range(points):
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-t",
                "5",
                "--mem=50M",
                "--account=research-oq",
                "--qos=low",
                f"--begin={BEGIN}",
                f"--output={outdir}/%j.out",
                "--wrap",
                f"echo {i}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        ids.append(out.strip().split(";")[0])
    return ids


def submitit_map(
    points: int, folder: Path, size: int, fn: Callable[[int], object] = str
) -> list[str]:
    """``executor.map_array(fn, range(points))``, ``size`` items per call; the arrays' ids."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(
        timeout_min=5,
        mem_gb=0.05,
        slurm_array_parallelism=CAP,
        slurm_account="research-oq",
        slurm_qos="low",
        slurm_additional_parameters={"begin": BEGIN},
    )
    values = list(range(points))
    jobs = []
    for start in range(0, points, size):
        jobs += executor.map_array(fn, values[start : start + size])
    return sorted({job.job_id.split("_")[0] for job in jobs})


SUBMITIT_SCRIPT = """
import sys
sys.path.insert(0, {bench!r})
from sweep_submit import submitit_map
print(" ".join(submitit_map({points}, __import__("pathlib").Path({folder!r}), {size})))
"""


def submitit_script(points: int, folder: Path, size: int) -> list[str]:
    """submitit as a user runs it from a shell: a fresh ``python`` running a script that
    calls ``map_array`` (the like-for-like baseline of the CLI, which is a fresh process)."""
    code = SUBMITIT_SCRIPT.format(
        bench=str(REPO / "bench"), points=points, folder=str(folder), size=size
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    return out.stdout.split()


def timed(run: Callable[[], list[str]], calls: dict[str, int], name: str) -> float:
    """Time ``run``; record how many jobs (one sbatch call each) it submitted."""
    t0 = time.perf_counter()
    ids = run()
    seconds = time.perf_counter() - t0
    cancel(ids)
    calls[name] = len(ids)
    return seconds


def precompile() -> None:
    """Byte-compile hpclaunch as a wheel install would (see the module docstring)."""
    import compileall

    compileall.compile_dir(str(REPO / "hpclaunch"), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    precompile()
    imports = import_seconds()
    shared = Path.home() / ".hpclaunch" / "bench"
    shared.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as lock, tempfile.TemporaryDirectory(dir=shared) as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder = Path(tmp)
        size = max_array_size()
        spec = write_spec(folder, args.points)
        env = dict(
            os.environ,
            XDG_STATE_HOME=str(folder / "state"),
            XDG_DATA_HOME=str(folder / "state"),
            XDG_CACHE_HOME=str(folder / "cache"),
        )
        os.environ.update(
            {k: env[k] for k in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")}
        )
        os.chdir(REPO)  # the library's jobs start in the caller's directory, as the CLI's
        calls: dict[str, int] = {}
        times: dict[str, list[float]] = {
            "hpclaunch CLI": [],
            "hpclaunch lib": [],
            "sbatch loop": [],
            "submitit": [],
            "submitit script": [],
            "CLI dry run": [],
            "CLI dry run, no cache": [],
        }
        runs: dict[str, Callable[[int], list[str]]] = {
            "hpclaunch CLI": lambda rep: hpclaunch_cli(spec, env),
            "hpclaunch lib": lambda rep: hpclaunch_lib(spec),
            "sbatch loop": lambda rep: sbatch_loop(args.points, folder),
            "submitit": lambda rep: submitit_map(args.points, folder / f"submitit-{rep}", size),
            "submitit script": lambda rep: submitit_script(
                args.points, folder / f"submitit-script-{rep}", size
            ),
            "CLI dry run": lambda rep: cli_dry_run(spec, env),
            "CLI dry run, no cache": lambda rep: cli_dry_run(spec, env, drop_cache=True),
        }
        names = list(runs)
        for rep in range(args.reps):  # interleaved, so drift hits all alike
            wait_for_room(5 * args.points)
            cli_dry_run(spec, env)  # the wait outlasts the capability cache (300 s): refill
            # A different one goes first each time, so drift hits all alike.
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                times[name].append(timed(lambda n=name, r=rep: runs[n](r), calls, name))  # type: ignore[misc]
    med = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.points} points, MaxArraySize {size}, {args.reps} repetitions, medians:")
    for name, value in med.items():
        print(
            f"  {name:22s} {value:8.3f} s   {calls[name]:5d} sbatch calls   "
            f"(all: {', '.join(f'{v:.3f}' for v in times[name])})"
        )
    print(
        "  imports (before timing): "
        + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in imports.items())
    )
    loop = med["sbatch loop"]
    pairs = (("hpclaunch CLI", "submitit script"), ("hpclaunch lib", "submitit"))
    for name, peer in pairs:  # like for like: a fresh process each, or both in-process
        print(
            f"  {name}: {loop / med[name]:.1f}x faster than the sbatch loop, "
            f"{med[peer] / med[name]:.2f}x the speed of {peer}"
        )


if __name__ == "__main__":
    main()
