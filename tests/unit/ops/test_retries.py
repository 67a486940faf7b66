"""``hpclaunch status`` says which retry a pending job waits for and from when it may start
(its ledger, written by the sidecar's retry: tests/supervise/test_retry.py)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import hpclaunch
from hpclaunch.supervise.ledger import Ledger
from tests.unit.conftest import run
from tests.unit.fakes import FakeSlurm

Env = dict[str, str]


def test_status_names_the_retry_a_pending_job_waits_for(
    env: Env, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    spec = {
        "name": "r",
        "command": ["python", "fit.py"],
        "launcher": "srun",
        "retry": {"times": 3, "when": [{"exit_code": [3]}]},
    }
    slurm.new_job_states = ["PENDING"]
    job = hpclaunch.Session(warn=lambda _: None).submit(spec, check=False)
    slurm.jobs[job.id].restarts = 1
    assert job.job_dir is not None
    at = time.time() + 120
    Path(job.job_dir).mkdir(parents=True, exist_ok=True)
    ledger = Ledger(job.job_dir, 0)
    ledger.append("retry_scheduled", why="user_error (exit code 3): retry 1 of 3 in 120 s")
    ledger.append(
        "attempt_end", reason="user_error", exit_code=3, requeued=True, retry=1, retry_at=at
    )
    shown = run(env, "status", job.id)
    assert shown.exit_code == 0, shown.output
    assert f"job {job.id}: retried: user_error (exit code 3): retry 1 of 3 in 120 s" in shown.stdout
    assert re.search(r"may start at \d\d:\d\d:\d\d \(in 1[12]\d s\)", shown.stdout), shown.stdout
    data = json.loads(run(env, "status", job.id, "--json").stdout)
    assert data[0]["retry"]["number"] == 1
    # Not restarted (no Restarts): no ledger is read, nothing said.
    slurm.jobs[job.id].restarts = 0
    assert "retried" not in run(env, "status", job.id).stdout


def test_a_retrys_start_is_said_to_the_second_when_it_is_near() -> None:
    """Issue 45: a 20 s backoff read "may start from 00:14"."""
    from hpclaunch.ops.retries import RetryWait

    wait = RetryWait(1, "user_error (exit code 3): retry 1 of 3 in 20 s", at=100_000.0)
    clock = time.strftime("%H:%M:%S", time.localtime(100_000.0))
    assert wait.line(now=99_980.0).endswith(f"may start at {clock} (in 20 s)")
    assert wait.line(now=100_001.0).endswith("may start now")
    assert "may start from " in wait.line(now=90_000.0)
