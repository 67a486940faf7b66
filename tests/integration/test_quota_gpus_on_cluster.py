"""GPUs asked for without ``--gres`` count against a project's guarantee (issue 26, part 1).

A user of project research (8 guaranteed GPUs in site-configs/local.yaml) submits with plain
sbatch, in-quota (QOS normal), one running job of 4 GPUs and one held job of 4 more, in one
of two ways: ``--gres=gpu:4`` (squeue's tres-per-node, ``%b``) or ``--gpus=4`` and
``-n2 --gpus-per-task=2`` (tres-per-job and tres-per-task, which ``%b`` shows as ``N/A``).
Either way the project holds or waits for all 8 of its GPUs, so hpclaunch places the next
medium job over-quota, and ``hpclaunch queue`` shows each job's 4 GPUs: the placement is
the same for both ways, with each backend.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import Cli, cancel_until_gone, squeue

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends, pytest.mark.exclusive]

#: The two jobs (running, held) of each way of asking for 4 GPUs each.
STYLES = {
    "gres": (("--gres=gpu:4",), ("--gres=gpu:4",)),
    "gpus": (("--gpus=4",), ("-n2", "--gpus-per-task=2")),
}


def _sbatch(*args: str) -> str:
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--account=research",
            "--qos=normal",
            "--output=/dev/null",
            "--time=5",
            "--mem=50M",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().split(";")[0]


@pytest.fixture
def project_full(backend: str) -> Iterator[Callable[[str], tuple[str, str]]]:
    """fill(style): research's 8 GPUs held or waited for by two plain-sbatch jobs."""
    ids: list[str] = []

    def fill(style: str) -> tuple[str, str]:
        running_args, held_args = STYLES[style]
        running = _sbatch(f"--job-name=it-quota-{style}", *running_args, "--wrap=sleep 300")
        held = _sbatch(f"--job-name=it-quota-{style}-held", "--hold", *held_args, "--wrap=true")
        ids.extend([running, held])
        deadline = time.monotonic() + 60
        while squeue(running, "%T") != "RUNNING":
            assert time.monotonic() < deadline, f"job {running} ({style}) did not start"
            time.sleep(0.2)
        return running, held

    yield fill
    cancel_until_gone(ids)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_gpus_without_gres_count_against_the_guarantee(
    style: str,
    project_full: Callable[[str], tuple[str, str]],
    hpclaunch: Cli,
    write_spec: Callable[..., Path],
) -> None:
    running, held = project_full(style)
    queue = json.loads(hpclaunch("queue", "--json").stdout)
    gpus = {row["job_id"]: row["gpus"] for row in queue}
    assert (gpus.get(running), gpus.get(held)) == (4, 4), queue

    spec = write_spec(
        tier="medium",
        command=["true"],
        resources={"gpus_per_node": 2, "time": "00:05:00", "mem": "100M"},
    )
    out = hpclaunch("submit", "--dry-run", str(spec))
    assert out.returncode == 0, out.stderr
    assert "over-quota: project research holds 8 of its 8 guaranteed GPUs" in out.stdout, out.stdout
    assert "--account=research-oq" in out.stdout
