"""Time to first job and time to green: the README's two commands, step by step.

    python3 bench/setup_times.py demo [--fresh --yes]     (stdlib only: --fresh removes .venv)
    python3 bench/setup_times.py suite [--ci]

``demo`` runs ``scripts/demo`` and prints each set-up step's time (the ``<== step: N s``
lines of scripts/lib.sh and the ``[cluster] step: N s`` lines of cluster.sh), the time to
the submission and to the job's end. ``--fresh`` first returns this machine to the state of
a fresh clone for everything the demo makes: the cluster down, no ``.venv``, no Slurm
build in /opt, no node or base image, no job images (it keeps Debian's packages, pip's
cache and the Docker engine's binaries, which a fresh machine downloads: say so when
quoting). The baseline, from the same run: the Slurm build alone (the step nothing else
can shorten on a fresh machine), or on a warm machine the job itself (submission to end).

``suite`` runs ``scripts/test`` (``CI=true`` with ``--ci``, as ``.ci/run`` does) and prints
its legs: lint and types, unit tests, each Slurm version's passes, and in each pass the
modules (per backend) that took longest, summed over their tests from pytest's JUnit XML
(``HPCLAUNCH_TEST_JUNIT``; a module's shared fixtures count in its first test; side by side
the sums exceed the pass's wall time). Baseline: the unit tests.

Record the figures in bench/RESULTS.md with the date.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "docker" / "slurm-cluster" / "cluster.sh"
SLURM = os.environ.get("HPCLAUNCH_SLURM_VERSION", "25.11")

STEP = re.compile(r"^(?:<== |\[cluster\] )(?P<name>[^:\[]+): (?P<s>\d+) s$")
BUILD = re.compile(r"Slurm \S+ built in \S+ in (?P<s>\d+) s")
BUILT = re.compile(r"^\[cluster\] built (?P<name>\S+.*) in (?P<s>\d+) s$")
LEG = re.compile(r"^slurm (?P<version>\S+.*?) \[(?P<backends>[^]]+)\]: (?P<rest>.*)$")
PART = re.compile(r"(?P<part>side-by-side|alone): (?P<summary>[^;]*?) in (?P<s>[\d.]+)s")


def run_timed(
    argv: list[str], env: dict[str, str], *, must_pass: bool = True
) -> tuple[float, list[tuple[float, str]]]:
    """Run argv; return its wall time and its output lines, each with its arrival time.
    A failure ends the script, unless ``must_pass`` is false (then it is said at the end)."""
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append((time.monotonic() - start, line.rstrip("\n")))
        rc = proc.wait()
    if rc != 0:
        message = f"{' '.join(argv)} failed (exit {rc})"
        if must_pass:
            raise SystemExit(message)
        lines.append((time.monotonic() - start, f"FAILED: {message}"))
    return time.monotonic() - start, lines


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def make_fresh() -> None:
    """Remove what the demo makes (see the module's docstring)."""
    # The images first, while the engine that holds them runs (`down` stops an engine that
    # cluster.sh started); the cluster's containers go with them.
    if subprocess.run([str(CLUSTER), "--mode", "docker", "status"], check=False).returncode == 0:
        ids = docker("ps", "-aq", "--filter", "label=com.docker.compose.project=hpclaunch-cluster")
        if ids.stdout.split():
            docker("rm", "-f", *ids.stdout.split())
        for image in (
            f"hpclaunch/slurm-cluster:{SLURM}",
            f"hpclaunch/slurm-cluster:{SLURM}-runtime",
            "local/bookworm:base",
        ):
            docker("rmi", "-f", image)
        docker("image", "prune", "-f")
        left = docker("image", "inspect", "local/bookworm:base")
        if left.returncode == 0:
            raise SystemExit("the base image local/bookworm:base could not be removed")
    else:
        raise SystemExit("--fresh needs the docker cluster up (its engine holds the images)")
    for mode in ("docker", "native"):
        subprocess.run([str(CLUSTER), "--mode", mode, "down"], check=False)
    shutil.rmtree(REPO / ".venv", ignore_errors=True)
    shutil.rmtree(f"/opt/slurm-{SLURM}", ignore_errors=True)
    shutil.rmtree("/var/cache/hpclaunch-cluster/images", ignore_errors=True)


def demo(fresh: bool) -> None:
    if fresh:
        make_fresh()
    total, lines = run_timed([str(REPO / "scripts" / "demo")], dict(os.environ))
    steps = [(m["name"].strip(), int(m["s"])) for _, line in lines if (m := STEP.match(line))]
    steps += [(m["name"], int(m["s"])) for _, line in lines if (m := BUILT.match(line))]
    ready = next((t for t, line in lines if "==> ready in" in line), None)
    print(f"\n{time.strftime('%Y-%m-%d')}: scripts/demo{' from a fresh state' if fresh else ''}")
    for name, seconds in steps:
        print(f"  {name:55} {seconds:5d} s")
    if ready is not None:
        print(f"  {'to the submission':55} {ready:5.0f} s")
    print(f"  {'to the job end (COMPLETED)':55} {total:5.0f} s")
    built = next((m for _, line in lines if (m := BUILD.search(line))), None)
    build = int(built["s"]) if built else 0
    if build:
        print(f"  {'Slurm build (its own time, beside the steps above)':55} {build:5d} s")
    if fresh and build:
        print(f"  baseline: the Slurm build alone {build} s; demo / build = {total / build:.2f}x")
    elif ready is not None:
        job = total - ready
        print(f"  baseline: the job itself {job:.0f} s; demo / job = {total / job:.2f}x")


def module_times(xml: Path) -> list[tuple[float, str, int]]:
    """(seconds, module[backend], tests) per module and backend of one pass, longest first."""
    import xml.etree.ElementTree as ET

    sums: dict[str, tuple[float, int]] = {}
    for case in ET.parse(xml).iter("testcase"):
        module = case.get("classname", "?").rsplit(".", 1)[-1]
        backend = re.search(r"\[(cli|pyslurm)\b", case.get("name", ""))
        key = f"{module}[{backend[1] if backend else 'cli'}]"
        seconds, count = sums.get(key, (0.0, 0))
        sums[key] = (seconds + float(case.get("time", 0)), count + 1)
    return sorted(((s, k, n) for k, (s, n) in sums.items()), reverse=True)


def test_times(xml: Path) -> list[tuple[float, str]]:
    """(seconds, module::test[params]) per test of one pass (setup, call and teardown),
    longest first."""
    import xml.etree.ElementTree as ET

    rows = [
        (
            float(case.get("time", 0)),
            f"{case.get('classname', '?').rsplit('.', 1)[-1]}::{case.get('name')}",
        )
        for case in ET.parse(xml).iter("testcase")
    ]
    return sorted(rows, reverse=True)


def suite(ci: bool, top: int = 12) -> None:
    import tempfile

    env = dict(os.environ)
    if ci:
        env["CI"] = "true"
    junit = Path(tempfile.mkdtemp(prefix="hpclaunch-junit-"))
    env["HPCLAUNCH_TEST_JUNIT"] = str(junit)
    total, lines = run_timed([str(REPO / "scripts" / "test")], env, must_pass=False)
    marks = {
        "ruff": "==> ruff",
        "mypy": "==> mypy",
        "unit": "==> unit and supervisor tests",
    }
    at = {k: next((t for t, line in lines if v in line), None) for k, v in marks.items()}
    first_cluster = next((t for t, line in lines if "==> " in line and "cluster" in line), None)
    print(f"\n{time.strftime('%Y-%m-%d')}: scripts/test{' (CI=true)' if ci else ''}")
    if at["ruff"] is not None and at["unit"] is not None:
        print(f"  {'lint and types':40} {at['unit'] - at['ruff']:7.0f} s")
    unit = None
    if at["unit"] is not None and first_cluster is not None:
        unit = first_cluster - at["unit"]
        print(f"  {'unit and supervisor tests':40} {unit:7.0f} s")
    for _, line in lines:
        leg = LEG.match(line)
        if not leg:
            continue
        for part in PART.finditer(leg["rest"]):
            name = f"slurm {leg['version']} {part['part']}"
            print(f"  {name:40} {float(part['s']):7.0f} s  ({part['summary'].strip()})")
    print(f"  {'whole run':40} {total:7.0f} s")
    for xml in sorted(junit.glob("*.xml")):
        print(f"  {xml.stem}: the {top} longest modules (test-seconds, tests)")
        for seconds, key, count in module_times(xml)[:top]:
            print(f"    {key:52} {seconds:7.0f} s  {count:3d}")
        print(f"  {xml.stem}: the {3 * top} longest tests (seconds)")
        for seconds, name in test_times(xml)[: 3 * top]:
            print(f"    {seconds:7.0f} s  {name}")
    shutil.rmtree(junit, ignore_errors=True)
    for _, line in lines:
        if line.startswith("FAILED: "):
            print(f"  {line} (the times above still hold)")
    if unit:
        print(f"  baseline: unit tests {unit:.0f} s; whole run / unit = {total / unit:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("demo")
    d.add_argument("--fresh", action="store_true")
    d.add_argument("--yes", action="store_true", help="confirm --fresh")
    s = sub.add_parser("suite")
    s.add_argument("--ci", action="store_true")
    args = parser.parse_args()
    if args.what == "demo":
        if args.fresh and not args.yes:
            raise SystemExit("--fresh removes .venv, /opt/slurm-*, the cluster's images: add --yes")
        demo(args.fresh)
    else:
        suite(args.ci)


if __name__ == "__main__":
    main()
