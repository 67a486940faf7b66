"""The cli and pyslurm backends see the same cluster the same way, and act on it the same way.

One mix of jobs, made with sbatch itself: an array throttled to two running tasks (its
other tasks pending, folded as ``123_[2-5%2]``), a 2-node job the project's quota holds
(``AssocGrpGRES``), a held job in another partition, and two jobs that trap USR1. Every
read the library makes of the queue (``queue``, ``tier``'s look at one job, the quota usage,
the arbiter's jobs, nodes and restart counts, ``status``) is asked of both backends and must
give equal answers; then hold, release, requeue and the batch-step signal are done with one
backend and seen by the other.

Runs where pyslurm is built for the cluster's Slurm (the 25.11 cluster of scripts/test);
the 22.05 leg has no pyslurm for its release, so the module is not in the compat subset.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import load_site
from hpclaunch.ops.plan_job import read_usage
from hpclaunch.planning.quota import USAGE_STATES
from hpclaunch.slurm.jobs import JobInfo
from hpclaunch.slurm.queue import QueueQuery
from hpclaunch.transport.local import LocalRunner

from .cluster import SlurmCluster
from .conftest import TEST_BACKENDS, squeue

pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]

T = TypeVar("T")
SITE = load_site("local")
TRAP = "trap 'exit 42' USR1; sleep 300 & wait"


def sbatch(name: str, *args: str, script: str = "sleep 300") -> str:
    out = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--job-name={name}",
            "--time=5",
            "--mem=50M",
            *args,
            f"--wrap={script}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().split(";")[0]


def until(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def backends(slurm_cluster: SlurmCluster) -> tuple[Backend, Backend]:
    if "pyslurm" not in TEST_BACKENDS:
        pytest.skip("pyslurm not among $HPCLAUNCH_TEST_BACKENDS")
    from hpclaunch.backends.pyslurm import PyslurmBackend

    runner = LocalRunner()
    return CliBackend(runner, SITE), PyslurmBackend(runner, SITE)


@pytest.fixture(scope="module")
def mix(backends: tuple[Backend, Backend]) -> Iterator[dict[str, str]]:
    name = f"agree-{uuid.uuid4().hex[:6]}"
    gpu = ["--partition=gpu", "--account=research"]
    jobs = {
        "array": sbatch(name, *gpu, "--qos=normal", "--gres=gpu:1", "--array=0-5%2"),
        "plain": sbatch(name, *gpu, "--qos=normal", "--gres=gpu:1"),
        "trap_cli": sbatch(name, *gpu, "--qos=normal", "--gres=gpu:1", script=TRAP),
        "trap_pyslurm": sbatch(name, *gpu, "--qos=normal", "--gres=gpu:1", script=TRAP),
    }
    running = [f"{jobs['array']}_0", f"{jobs['array']}_1"]
    running += [jobs[key] for key in ("plain", "trap_cli", "trap_pyslurm")]
    until(
        "the array's first tasks, the plain and the trap jobs to run",
        lambda: all(squeue(j, "%T") == "RUNNING" for j in running),
    )
    # Then what must wait: the 8 GPUs the project's quota (8, 5 in use) cannot give yet,
    # and a held job.
    jobs["quota"] = sbatch(name, *gpu, "--qos=critical", "--nodes=2", "--gres=gpu:4", "--nice=10")
    jobs["held"] = sbatch(name, "--partition=debug", "--account=vision", "--qos=high", "--hold")
    until("the quota job's reason", lambda: squeue(jobs["quota"], "%r") == "AssocGrpGRES")
    yield jobs
    subprocess.run(["scancel", "--name", name], check=False)


def _node_states() -> str:
    """Every node's state as scontrol says it (``State=MIXED+COMPLETING`` and the like)."""
    shown = subprocess.run(
        ["scontrol", "show", "nodes", "--oneliner"], capture_output=True, text=True, check=False
    )
    return " ".join(w for w in shown.stdout.split() if w.startswith("State="))


def agree(ask: Callable[[Backend], T], backends: tuple[Backend, Backend]) -> T:
    """pyslurm's answer, which must equal the cli backend's, asked just before or after
    (a running job's priority may be recalculated between two calls)."""
    cli, pyslurm = backends
    before = ask(cli)
    got = ask(pyslurm)
    after = ask(cli)
    assert got in (before, after), f"pyslurm: {got}\ncli:     {before}"
    return got


def rows(found: list[Any]) -> list[Any]:
    """Sorted by id; a running job's run time ticks between two calls, so it is left out."""
    out = [replace(r, elapsed=None) if hasattr(r, "elapsed") else r for r in found]
    return sorted(out, key=lambda r: (r.job_id, r.state))


def test_both_backends_read_the_queue_alike(
    backends: tuple[Backend, Backend], mix: dict[str, str]
) -> None:
    array = mix["array"]
    queue = agree(lambda b: rows(b.queue()), backends)
    ids = {r.job_id for r in queue}
    assert {f"{array}_0", f"{array}_1", f"{array}_[2-5%2]", mix["quota"], mix["held"]} <= ids
    held = next(r for r in queue if r.job_id == mix["held"])
    assert (held.reason, held.partition, held.qos) == ("JobHeldUser", "debug", "high")
    quota = next(r for r in queue if r.job_id == mix["quota"])
    assert (quota.nodes, quota.gpus_per_node, quota.nice) == (2, 4, 10)

    assert agree(lambda b: rows(b.queue(QueueQuery(partition="debug"))), backends) == [held]
    agree(lambda b: rows(b.queue(QueueQuery(me=True))), backends)
    usage = agree(
        lambda b: rows(b.queue(QueueQuery(account="research", states=USAGE_STATES))), backends
    )
    assert mix["held"] not in {r.job_id for r in usage}
    # critical's 8 asked + 1 GPU each of the 2 running tasks, the plain and the 2 trap jobs
    # (normal is in-quota); the array's 4 pending tasks ask for theirs too.
    assert agree(lambda b: read_usage(b, SITE, "research"), backends) == 8 + 5 + 4

    for job_id in (array, f"{array}_4", f"{array}_0", mix["quota"], "999999"):
        agree(lambda b: rows(b.queue_job(job_id)), backends)  # noqa: B023 (called at once)
    (pending_task,) = backends[1].queue_job(f"{array}_4")
    assert (pending_task.job_id, pending_task.state) == (f"{array}_4", "PENDING")


def test_both_backends_read_the_arbiter_snapshot_alike(
    backends: tuple[Backend, Backend], mix: dict[str, str]
) -> None:
    jobs = agree(lambda b: rows(b.cluster_jobs()), backends)
    running = [j for j in jobs if j.running and j.job_id.startswith(mix["array"])]
    assert len(running) == 2
    assert all(j.hosts and j.start for j in running)
    nodes = agree(lambda b: sorted(b.node_gpus(), key=lambda n: n.name), backends)
    assert [n.total for n in nodes] == [4, 4, 4, 4]
    assert sum(n.used for n in nodes) >= 4  # two array tasks and two trap jobs, 1 GPU each
    agree(lambda b: b.restart_counts(), backends)


def test_both_backends_report_status_alike(
    backends: tuple[Backend, Backend], mix: dict[str, str]
) -> None:
    refs = [JobRef(f"{mix['array']}_{task}") for task in range(6)]
    refs += [JobRef(mix[key]) for key in ("quota", "held", "trap_cli")]

    def status(backend: Backend) -> dict[JobRef, Any]:
        return {ref: replace(info, elapsed=None) for ref, info in backend.status(refs).items()}

    found = agree(status, backends)
    assert found[JobRef(f"{mix['array']}_5")].state.name == "PENDING"

    # sweep status: every task of the array, pending ones unfolded.
    tasks = [ref.job_id for ref in refs[:6]]
    problems: list[str] = []
    states = agree(lambda b: b.task_states([mix["array"]], tasks, problems), backends)
    assert set(states) == set(tasks)
    assert states[tasks[5]] == "PENDING"
    assert problems == []


def test_hold_release_requeue_and_signal_through_either_backend(
    backends: tuple[Backend, Backend], mix: dict[str, str]
) -> None:
    cli, pyslurm = backends
    quota = mix["quota"]
    pyslurm.hold(quota)
    until("pyslurm's hold", lambda: squeue(quota, "%r") == "JobHeldUser")
    cli.release(quota)
    until("the cli's release", lambda: squeue(quota, "%r") != "JobHeldUser")
    cli.hold(quota)
    until("the cli's hold", lambda: squeue(quota, "%r") == "JobHeldUser")
    pyslurm.release(quota)
    until("pyslurm's release", lambda: squeue(quota, "%r") != "JobHeldUser")

    # A plain job (one requeue RPC) and an array task (scontrol: PyslurmBackend._act).
    for job in (JobRef(mix["plain"]), JobRef(f"{mix['array']}_0")):
        pyslurm.requeue(job.job_id)
        until(f"{job} to restart", restarted(cli, job, 1))
        # The restart count and what does not move; not the state: a requeued task goes
        # COMPLETING -> PENDING -> RUNNING, which can take both steps within agree()'s three
        # calls (clean-clone run 13: cli COMPLETING, pyslurm PENDING, cli again neither).
        said = agree(lambda b, j=job: _fixed(status_of(j)(b)), backends)
        assert said[0] == 1, said
    until("the plain job to run again", lambda: squeue(mix["plain"], "%T") == "RUNNING", 120)
    cli.requeue(mix["plain"])
    until("the cli's requeue", restarted(pyslurm, JobRef(mix["plain"]), 2))

    for name, backend in (("trap_cli", cli), ("trap_pyslurm", pyslurm)):
        job = JobRef(mix[name])
        backend.signal(job.job_id, "USR1")
        until(f"{name} to end", lambda: status_of(job)(cli).state.is_finished)  # noqa: B023
        info = agree(status_of(job), backends)
        assert (info.state.name, info.exit_code) == ("FAILED", 42)


def _fixed(info: JobInfo) -> tuple[int | None, str | None, str | None, int | None]:
    """What stays while a requeued job restarts: its restart count, name, QOS, GPUs."""
    return (info.restarts, info.name, info.qos, info.gpus)


def status_of(ref: JobRef) -> Callable[[Backend], JobInfo]:
    return lambda backend: replace(backend.status([ref])[ref], elapsed=None)


def restarted(backend: Backend, ref: JobRef, times: int) -> Callable[[], bool]:
    return lambda: (status_of(ref)(backend).restarts or 0) >= times


def test_both_backends_discover_the_same_capabilities(
    backends: tuple[Backend, Backend], mix: dict[str, str]
) -> None:
    # A node's state is compared too: none may be between states. The exclusive module
    # before this one may have just cancelled its jobs; a node of theirs stays COMPLETING
    # (KillWait, the epilog) and may leave that state between the two backends' calls
    # (clean-clone run 31: pyslurm saw n1 "mixed+completing", the cli before and after not).
    until("no node completing", lambda: "COMPLETING" not in _node_states())
    caps = agree(lambda b: b.capabilities(now=lambda: 0.0), backends)
    assert caps.cluster == "hpclaunch"
    assert caps.qos is not None
    assert {q.name for q in caps.qos} >= {"critical", "high", "normal", "low"}
    assert caps.associations is not None
    assert caps.default_account is not None
    assert {n.state for n in caps.nodes} <= {"idle", "mixed", "allocated"}
