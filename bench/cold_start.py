"""Cold start of the CLI: `hpclaunch --help`, `render`, `submit --dry-run` and `site check`
against `python -c pass` and `python -c "import click"`, measured in the same run.

    .venv/bin/python bench/cold_start.py [--runs 15]

Each command runs --runs times in a fresh process (interleaved, so a slow spell hits all of
them alike); prints the median and the best wall time, and the ratios of the medians to the
two baselines. `submit --dry-run` and `site check` read the capability cache (filled once
before timing, as a user's first command within the cache's lifetime would have); they need
the local cluster only for that first fill. Record the medians in bench/RESULTS.md.
Goal (issue 3): `hpclaunch --help` <= 0.25 s.
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

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
HPCLAUNCH = str(Path(PY).with_name("hpclaunch"))

COMMANDS: dict[str, list[str]] = {
    "python -c pass": [PY, "-c", "pass"],
    "python -c 'import click'": [PY, "-c", "import click"],
    "hpclaunch --help": [HPCLAUNCH, "--help"],
    "hpclaunch render hello": [HPCLAUNCH, "render", "examples/hello.yaml"],
    "hpclaunch submit --dry-run hello": [HPCLAUNCH, "submit", "--dry-run", "examples/hello.yaml"],
    "hpclaunch site check (cached)": [HPCLAUNCH, "site", "check"],
}


def run_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{proc.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(
            os.environ,
            XDG_CACHE_HOME=tmp,
            XDG_STATE_HOME=tmp,
            XDG_DATA_HOME=tmp,
            HPCLAUNCH_CAPS_MAX_AGE="3600",
        )
        run_once([HPCLAUNCH, "site", "show", "--refresh"], env)  # fill the cache once
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):
            for name, argv in COMMANDS.items():
                times[name].append(run_once(argv, env))
    base = statistics.median(times["python -c pass"])
    click_base = statistics.median(times["python -c 'import click'"])
    print(f"{args.runs} runs each, {time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}")
    print(f"{'command':36} {'median':>9} {'best':>9} {'x pass':>8} {'x click':>8}")
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"{name:36} {med * 1000:7.1f}ms {min(values) * 1000:7.1f}ms "
            f"{med / base:7.1f}x {med / click_base:7.2f}x"
        )
    help_med = statistics.median(times["hpclaunch --help"])
    verdict = "met" if help_med <= 0.25 else "NOT met"
    print(f"goal hpclaunch --help <= 250 ms: {verdict} ({help_med * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
