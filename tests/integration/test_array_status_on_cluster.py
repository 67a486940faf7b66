"""``hpclaunch status <array id>``: one line that sums up the array's tasks, on the cluster.

A 3-point sweep (one array, ``%1``) whose last point exits 3: while it runs, the array is
RUNNING or PENDING with the tasks counted in the reason; at the end it is FAILED with the
failing task's exit code, and ``array: 2 completed, 1 failed``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Run, job_status

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

_COUNT = re.compile(r"(\d+) ([a-z ]+?)(?:,|$)")


def test_status_of_an_array_id_sums_up_its_tasks(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(
        command=["sh", "-c", 'sleep 2; exit "$0"', "{code}"],
        sweep={
            "method": "list",
            "points": [{"code": 0}, {"code": 0}, {"code": 3}],
            "max_concurrent": 1,
        },
    )
    out = hpclaunch("sweep", str(spec))
    assert out.returncode == 0, out.stderr
    (array,) = hpclaunch.submitted()  # the array is in the history under its job id
    seen = []
    deadline = time.monotonic() + 120
    while True:
        info = job_status(hpclaunch, array)
        assert isinstance(info["reason"], str), info
        assert info["reason"].startswith("array: "), info
        counts = {name: int(n) for n, name in _COUNT.findall(info["reason"][7:])}
        assert sum(counts.values()) == 3, info
        seen.append((info["state"], info["reason"]))
        if info["finished"]:
            break
        assert info["state"] in {"PENDING", "RUNNING"}, info
        assert time.monotonic() < deadline, f"array {array} did not end: {seen}"
        time.sleep(0.5)
    assert any(state == "RUNNING" and "1 running" in reason for state, reason in seen), seen
    assert (info["state"], info["reason"], info["exit_code"]) == (
        "FAILED",
        "array: 2 completed, 1 failed",
        3,
    ), seen
    assert (info["elapsed"], info["node_count"], info["restarts"]) == (None, None, 0)
