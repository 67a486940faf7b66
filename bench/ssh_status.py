"""`status` of 20 jobs over SSH vs on the login node: time and SSH channels per poll.

    .venv/bin/python bench/ssh_status.py [--polls 20]

The jobs are the 20 tasks of one held array (root, `sbatch --hold --array=0-19 --wrap true`),
cancelled at the end. Both sides use the cli backend's status(); the SSH side goes through a
private sshd on 127.0.0.1 as hpcuser (tests/integration/sshd.py), one connection for all
polls. Goal (issue 6): one SSH channel (round trip) per poll.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from _sshbench import ssh_runner

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import load_site
from hpclaunch.transport.base import Runner
from hpclaunch.transport.local import LocalRunner


def polls(runner: Runner, refs: list[JobRef], n: int) -> list[float]:
    backend = CliBackend(runner, load_site("local"))
    times = []
    for _ in range(n):
        start = time.perf_counter()
        infos = backend.status(refs)
        times.append(time.perf_counter() - start)
        assert len(infos) == len(refs)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=20)
    args = parser.parse_args()
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            "--array=0-19",
            "--mem=10M",
            "-t",
            "1",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd="/root",
    ).stdout.strip()
    array = out.split(";")[0]
    refs = [JobRef(f"{array}_{i}") for i in range(20)]
    try:
        local = polls(LocalRunner(), refs, args.polls)
        with ssh_runner() as runner:
            start = time.perf_counter()
            runner.run(["true"])  # connect (handshake + auth) outside the polls
            connect = time.perf_counter() - start
            before = runner.channels_opened
            remote = polls(runner, refs, args.polls)
            per_poll = (runner.channels_opened - before) / args.polls
            connects = runner.connects
    finally:
        subprocess.run(["scancel", array], check=False)
    print(f"jobs: 20, polls: {args.polls}")
    print(f"login node: median {statistics.median(local) * 1000:.1f} ms per poll")
    print(
        f"over SSH:   median {statistics.median(remote) * 1000:.1f} ms per poll, "
        f"{per_poll:g} channel(s) per poll, {connects} connection(s); "
        f"connect once: {connect * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
