"""Fixtures for tests against a real Slurm cluster (docker/slurm-cluster/).

Mark such test modules with ``pytestmark = pytest.mark.slurm``, and ``exclusive`` too when
they preempt, fill the cluster, depend on a project's quota or fair-share, stop daemons or
change the site, or load the 2 cores heavily: scripts/test runs the others side by side
(pytest-xdist) and these alone afterwards. Without a reachable cluster
the ``slurm_cluster`` fixture skips them locally, and fails them under ``CI=true``: in CI a
missing cluster is a broken setup, not a reason to pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpclaunch.store.history import history_path, recent_submissions
from hpclaunch.transport.local import LocalRunner

from .cluster import SlurmCluster, require_cluster

REPO = Path(__file__).resolve().parents[2]
#: Memory per node for a job of examples/ddp_train.py or elastic_train.py under torchrun,
#: one rank a node: the nodes enforce ``mem:`` (docker/slurm-cluster/etc/cgroup.conf), and
#: torchrun's agent and its rank import torch (~225 MB each); with the sidecar the job cgroup's
#: peak was 402 MB (25.11 cluster, 2026-12-07; attempt_end's mem_peak).
TORCHRUN_MEM = "700M"
# The console script of the environment running the tests (the project's .venv).
HPCLAUNCH = str(Path(sys.executable).with_name("hpclaunch"))


# One test session at a time on the shared local cluster: tests that assert scheduling
# order or preemption need the GPUs to themselves. Ad-hoc jobs: `flock LOCK sbatch ...`.
# The workers of one session run side by side (pytest-xdist: scripts/test runs the tests
# not marked ``exclusive`` so): they share the lock. A session without workers still waits
# for them, but another session's workers would share it too: run one `scripts/test` at a time.
CLUSTER_LOCK = Path(os.environ.get("HPCLAUNCH_CLUSTER_LOCK", "/tmp/hpclaunch-cluster.lock"))
#: Set in each pytest-xdist worker ("gw0", "gw1", ...).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


#: The backends that tests marked ``backends`` run with, each in turn
#: ($HPCLAUNCH_TEST_BACKENDS; scripts/test's 22.05 leg runs cli only: pyslurm is built for
#: 25.11). Every other cluster test runs with cli.
TEST_BACKENDS = os.environ.get("HPCLAUNCH_TEST_BACKENDS", "cli pyslurm").split()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) a module's tests run in one worker, a
    backend at a time: its module-scoped fixtures (the jobs its tests share) are made once
    per backend, as without workers.

    ``tryfirst``: xdist reads the marks in its own ``pytest_collection_modifyitems`` (it
    appends ``@group`` to each node id), which otherwise runs before this one (this
    conftest is registered before xdist's worker plugin, and later plugins run first): the
    marks came too late and a module's tests were spread over the workers, its fixtures
    made again at each switch (seen: the elastic module's, six times in one pass). pytest
    9.2 ignores xdist's node id change (pytest-dev/pytest-xdist#1386): pyproject.toml pins
    pytest below it; tests/unit/project/test_xdist_groups.py fails if any of the three comes
    back.

    A module that sets ``BACKENDS_IN_TURN = True`` runs its backends one after the other in
    one worker: its jobs would otherwise meet (the elastic module's two jobs, each all of
    vision's 4 GPUs: the second ran over-quota and was preempted)."""
    for item in items:
        backend = getattr(item, "callspec", None) and item.callspec.params.get("backend")
        # "module-backend": xdist takes the text after the last "@" for the group only
        # where no "]" follows it (a parametrized id ends in "]"), so no brackets here.
        in_turn = getattr(item.module, "BACKENDS_IN_TURN", False)
        group = item.module.__name__ + ("" if in_turn else f"-{backend or 'cli'}")
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker("backends") is not None
        names = TEST_BACKENDS if marked else ["cli"]
        metafunc.parametrize("backend", names, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend every ``hpclaunch`` of the module's tests uses (``HPCLAUNCH_BACKEND``),
    module by module, so that module-scoped fixtures submit with it too (they list it as an
    argument to be made again for each backend). A backend asked for that cannot be used
    fails the tests with the reason."""
    name = str(request.param)
    if name != "cli":
        _require_backend(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HPCLAUNCH_BACKEND", name)
        yield name


_USABLE: dict[str, str | None] = {}


def _require_backend(name: str) -> None:
    if name not in _USABLE:
        from hpclaunch.backends import create_backend
        from hpclaunch.config.site import load_site
        from hpclaunch.errors import HpclaunchError

        try:
            create_backend(name, LocalRunner(), load_site("local"))
            _USABLE[name] = None
        except HpclaunchError as exc:
            _USABLE[name] = f"{exc.message} (hint: {exc.hint})"
    if _USABLE[name] is not None:
        pytest.fail(
            f"backend {name} asked for ($HPCLAUNCH_TEST_BACKENDS) but not usable: {_USABLE[name]}"
        )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The reachable cluster (``.nodes``); skips, or fails under CI=true, without one.
    Held under :data:`CLUSTER_LOCK` for the whole test session (shared by its workers)."""
    import fcntl

    with CLUSTER_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if XDIST_WORKER else fcntl.LOCK_EX)
        cluster = require_cluster(LocalRunner(), os.environ)
        # The cluster comes up with bare QOS: make tiers, quotas and over-quota accounts
        # match site-configs/local.yaml once per session (nothing to do when they do); one
        # worker at a time (two would both add what is missing).
        with Path(f"{CLUSTER_LOCK}.apply").open("a") as applying:
            fcntl.flock(applying, fcntl.LOCK_EX)
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

    def __call__(
        self, *args: str, timeout: float = 120, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [HPCLAUNCH, "--site", self.site, *args],
            cwd=REPO,
            env=self.env,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def submitted(self) -> dict[str, dict[str, Any]]:
        """The history's records by job id (read through :mod:`hpclaunch.store.history`)."""
        return {row["job_id"]: row for row in self.submitted_rows()}

    def submitted_rows(self) -> list[dict[str, Any]]:
        """Every row of the history, oldest first (a job twice would be two rows)."""
        records = recent_submissions(limit=sys.maxsize, path=self.history)
        return [asdict(record) for record in records]

    def log(self, job_id: str) -> str:
        """The text of every attempt log of a job, oldest attempt first."""
        from hpclaunch.ops.logtail import attempt_logs

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
def shared_dir() -> Iterator[Path]:
    """A fresh directory that every node sees (/root and /home are shared with the nodes;
    /tmp, where pytest's tmp_path is, is not); removed afterwards."""
    path = Path.home() / ".hpclaunch" / "it" / uuid.uuid4().hex[:12]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


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


def start_in_background(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``argv`` started as a shell without job control starts ``cmd &``: SIGINT ignored
    (POSIX; Python then installs no KeyboardInterrupt of its own). Its stderr is piped."""
    import signal

    return subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )


def stop_by_ctrl_c(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    """Send SIGINT (Ctrl-C) and return what ``proc`` said on stderr; fails (after killing
    it) if it does not end within ``timeout``."""
    import signal

    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        said = proc.communicate()[1]
        pytest.fail(f"{proc.args!r} did not stop on Ctrl-C within {timeout:g} s: {said}")


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


def squeue(job_id: str, fmt: str) -> str:
    """One squeue field of a job (``%T``, ``%r``, ...; each task of an array on its own line)."""
    out = subprocess.run(
        ["squeue", "--noheader", "--array", f"--jobs={job_id}", f"--format={fmt}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def wait_gone(job_ids: list[str], timeout: float, every: float = 0.2) -> None:
    """Until squeue no longer lists any of the jobs (finished, cancelled, and past
    COMPLETING); the test fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while squeue(",".join(job_ids), "%i %T"):
        if time.monotonic() >= deadline:
            pytest.fail(f"jobs {job_ids} still queued after {timeout:g} s")
        time.sleep(every)


def cancel_until_gone(job_ids: list[str], timeout: float = 30) -> None:
    """scancel the jobs and wait until squeue no longer lists them: a cancelled job stays
    COMPLETING, its GPUs still held, while slurmstepd tears down its cgroups (seconds under
    proctrack/cgroup), and the next test would count them (project quota held)."""
    if not job_ids:
        return
    subprocess.run(["scancel", *job_ids], check=False, capture_output=True)
    wait_gone(job_ids, timeout)


def wait_progress(job_dir: Path, step: int, timeout: float = 60, job_id: str = "") -> None:
    """Until the job's trainer reported ``step`` (``control/progress.json``); on a timeout
    the message says the job's state and reason in squeue when ``job_id`` is given."""
    path = job_dir / "control" / "progress.json"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if json.loads(path.read_text())["step"] >= step:
                return
        except (OSError, ValueError, KeyError):
            pass
        if time.monotonic() >= deadline:
            queued = squeue(job_id, "%T %r") if job_id else ""
            pytest.fail(f"{job_dir} never reached step {step} in {timeout:g} s ({queued=})")
        time.sleep(0.1)


def wait_running(job_id: str, timeout: float) -> None:
    """Until squeue says the job RUNNING; its state and reason in the message if not."""
    deadline = time.monotonic() + timeout
    while (state := squeue(job_id, "%T %r")).split(" ")[0] != "RUNNING":
        if time.monotonic() >= deadline:
            pytest.fail(f"job {job_id} not running after {timeout:g} s: {state!r}")
        time.sleep(0.5)


#: Slurm's final states of a sweep's task, as `sweep status` reports them.
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
)


@dataclass
class SubmittedSweeps:
    """Sweeps a module submitted through ``cli``, by name (``ids``: name -> sweep id)."""

    cli: Cli
    ids: dict[str, str]

    def status(self, name: str) -> dict[str, Any]:
        """``sweep status --json`` of sweep ``name``."""
        out = self.cli("sweep", "status", self.ids[name], "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert isinstance(data, dict)
        return data

    def wait_done(self, name: str, timeout: float) -> dict[str, Any]:
        """The status of sweep ``name`` once every task is final."""
        deadline = time.monotonic() + timeout
        while True:
            data = self.status(name)
            if {t["state"] for t in data["tasks"]} <= FINAL_STATES:
                return data
            assert time.monotonic() < deadline, f"sweep {name} not done: {data['counts']}"
            time.sleep(1)
