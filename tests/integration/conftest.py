"""Fixtures for tests against a real Slurm cluster (docker/slurm-cluster/).

Mark such test modules with ``pytestmark = pytest.mark.slurm``. Without a reachable cluster
the ``slurm_cluster`` fixture skips them locally, and fails them under ``CI=true``: in CI a
missing cluster is a broken setup, not a reason to pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpclaunch.history import history_path, recent_submissions
from hpclaunch.transport.local import LocalRunner

from .cluster import SlurmCluster, require_cluster

REPO = Path(__file__).resolve().parents[2]
# The console script of the environment running the tests (the project's .venv).
HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))


# One test session at a time on the shared local cluster: tests that assert scheduling
# order or preemption need the GPUs to themselves. Ad-hoc jobs: `flock LOCK sbatch ...`.
CLUSTER_LOCK = Path(os.environ.get("HPCLAUNCH_CLUSTER_LOCK", "/tmp/hpclaunch-cluster.lock"))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The reachable cluster (``.nodes``); skips, or fails under CI=true, without one.
    Held under an exclusive lock (:data:`CLUSTER_LOCK`) for the whole test session."""
    import fcntl

    with CLUSTER_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster = require_cluster(LocalRunner(), os.environ)
        # The cluster comes up with bare QOS: make tiers, quotas and over-quota accounts
        # match site-configs/local.yaml once per session (nothing to do when they do).
        applied = subprocess.run(
            [HPCLAUNCH, "--site", "local", "site", "apply", "--yes"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if applied.returncode != 0:
            pytest.fail(
                f"hpclaunch --site local site apply --yes failed:\n{applied.stdout}{applied.stderr}"
            )
        yield cluster


class Cli:
    """The real ``hpclaunch`` CLI against the local site, run from the repository root
    (which every node sees at the same path), with a submission history of its own."""

    def __init__(self, state_dir: Path, site: str = "local") -> None:
        # The history database and the sweep records stay inside the test's directory.
        self.env = dict(os.environ, XDG_STATE_HOME=str(state_dir), XDG_DATA_HOME=str(state_dir))
        self.history = history_path(self.env)
        self.site = site

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HPCLAUNCH, "--site", self.site, *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def submitted(self) -> dict[str, dict[str, Any]]:
        """The history's records by job id (read through :mod:`hpclaunch.history`)."""
        records = recent_submissions(limit=sys.maxsize, path=self.history)
        return {record.job_id: asdict(record) for record in records}

    def log(self, job_id: str) -> str:
        """The text of every attempt log of a job, oldest attempt first."""
        from hpclaunch.logs import attempt_logs

        job_dir = self.submitted()[job_id]["job_dir"]
        logs = attempt_logs(job_dir)
        assert logs, f"job {job_id} wrote no attempt log in {job_dir}"
        return "".join(path.read_text() for path in logs)


Run = Cli


@pytest.fixture
def hpclaunch(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Cli]:
    """A :class:`Cli`; the jobs it submitted are cancelled afterwards."""
    cli = Cli(tmp_path / "state")
    yield cli
    ids = list(cli.submitted())
    if ids:
        subprocess.run(["scancel", *ids], check=False, capture_output=True)


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    """Write a spec YAML with a unique job name; returns its path."""

    def write(**fields: object) -> Path:
        spec = {"name": f"it-{uuid.uuid4().hex[:8]}", "project": "research", **fields}
        spec.setdefault("resources", {"time": "00:05:00", "mem": "100M"})
        path = tmp_path / f"{spec['name']}.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    return write


def job_status(run: Run, job_id: str) -> dict[str, object]:
    """``hpclaunch status ID --json`` for one job."""
    result = run("status", job_id, "--json")
    assert result.returncode == 0, result.stderr
    (info,) = json.loads(result.stdout)
    assert isinstance(info, dict)
    return info


def wait_state(run: Run, job_id: str, wanted: set[str], timeout: float = 60) -> dict[str, object]:
    """Poll ``status`` (every 0.2 s) until the job is in one of ``wanted``."""
    deadline = time.monotonic() + timeout
    while True:
        info = job_status(run, job_id)
        if info["state"] in wanted:
            return info
        assert time.monotonic() < deadline, f"job {job_id} never reached {wanted}: {info}"
        time.sleep(0.2)
