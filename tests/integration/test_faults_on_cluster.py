"""Faults on the real cluster, and what survives them (issue 19; bench/faults.py counts them).

* **Disk full during checkpoints**: a 2-node torchrun job (examples/ddp_train.py, a
  checkpoint every 10 steps) whose checkpoint directory is on the cluster's 16 MiB tmpfs
  (docker/slurm-cluster/lib/small_fs.sh). Once its first checkpoint is complete the test
  fills the filesystem: the next periodic checkpoint fails with ENOSPC (the trainer trains
  on), then a preemption warning asks for one, which fails too; the job is requeued, the
  test frees the space, and attempt 1 resumes from the last complete checkpoint. Final
  weights equal an uninterrupted twin's; every ``step-*`` directory is complete; the ledger
  has each failure with its errno; the steps retrained are those after that checkpoint.
* **Node lost mid-run**: a 2-node torchrun job (tier low, so ``--requeue``) whose second
  node is set DOWN after 3 checkpoints: Slurm ends the attempt NODE_FAIL and requeues it,
  the sidecar records ``node_failure`` (counted against ``max_requeues``), attempt 1
  resumes from the last complete checkpoint and ends with the twin's weights.
* **slurmdbd down**: ``submit`` works (slurmctld queues the accounting), ``status`` shows
  the job from squeue, ``cost`` says accounting is unavailable (exit 1, with a hint); once
  slurmdbd is back, sacct and ``cost`` have the job exactly once.
* **Concurrent clients**: 8 CLI processes at once (submit, status, history, a capability
  refresh) on one history database and one capability cache: every submission is in the
  history exactly once, no call fails or says "database is locked", no read of the cache
  finds it torn.

* **Preempted anywhere**: 2-node, 4-rank trainers preempted by critical jobs at random
  moments (start-up, mid-step, inside a checkpoint write, the asked-for write killed by
  the grace time, a second notice during the requeue): each attempt resumes after the
  newest complete checkpoint, one attempt per preemption, the twin's final weights.

* **Preempted at every start**: a shell command under the sidecar (launcher srun; no
  runtime API: it reports no progress) preempted as each of its first two attempts starts
  is requeued each time and completes in the third: a preemption is no crash loop
  (clean-clone CI run of stop 38: a victim preempted twice during torchrun's start-up
  ended PREEMPTED, never requeued).

* **slurmctld killed mid-sweep**: SIGKILL between a 200-point sweep's two arrays; the
  retry with ``--sweep-id`` submits only the missing array; every point runs once.

The fault drivers are in faults.py and preempt_anywhere.py, shared with bench/faults.py
(the full counts).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpclaunch.runtime import verify_checkpoint
from hpclaunch.supervise.ledger import read_ledger
from tests.webhook import webhook_server

from .cluster import SlurmCluster
from .conftest import Cli
from .faults import (
    EVERY,
    FullJobs,
    LostJobs,
    accounting_outage,
    concurrent_clients,
    ctld_killed_while_tasks_run,
    disk_full_trial,
    expedited_site,
    node_killed_trial,
    node_loss_trial,
    sweep_outage,
)
from .preempt_anywhere import PreemptRun
from .test_sidecar_on_cluster import STEPS, VENV, Jobs, _by, _preempt, _steps
from .test_sidecar_on_cluster import _submit as submit

pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]


@pytest.fixture(scope="module")
def full(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FullJobs]:
    tmp = tmp_path_factory.mktemp("faults")
    cli = Cli(tmp / "state")
    cli.env["XDG_CONFIG_HOME"] = str(tmp / "config")
    with webhook_server() as hook:
        added = cli("notify", "add", "lab", input_text=hook.url + "\n")
        assert added.returncode == 0, added.stderr
        notify = {"webhook": "lab", "events": ["checkpoint_failed"]}
        with disk_full_trial(cli, tmp, slurm_cluster.release, notify) as jobs:
            jobs.hooks["lab"] = hook
            yield jobs


def test_disk_full_checkpoints_fail_cleanly_and_the_job_resumes_exactly(full: FullJobs) -> None:
    assert full.wait_final("full", 150) == "COMPLETED"
    ledger = full.events("full")["ledger"]
    failures = [e for e in ledger if e["event"] == "checkpoint_failed"]
    # the periodic one after the disk filled, then the one the warning asked for
    assert len(failures) >= 2, failures
    assert {e["errno_name"] for e in failures} == {"ENOSPC"}
    assert {e["resume_step"] for e in failures} == {EVERY}
    assert failures[-1]["reason"] == "preemption"
    # Issue 32: each failed checkpoint told once (a notice per attempt and step).
    told = [b["hpclaunch"] for b in full.hooks["lab"].of_job(full.ids["full"])]
    assert {t["event"] for t in told} == {"checkpoint_failed"}
    keys = [t["key"] for t in told]
    assert sorted(keys) == sorted(
        {f"checkpoint_failed-{e['attempt']}-{e['step']}" for e in failures}
    )
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert "checkpoint_committed" not in first
    assert first["attempt_end"]["reason"] == "preempted"
    assert first["attempt_end"]["requeued"] is True
    # attempt 1 started after the last complete checkpoint: nothing half-written was used
    before, after = _steps(full.shared, "full", 0), _steps(full.shared, "full", 1)
    assert after[0] == EVERY + 1
    assert after[-1] == STEPS
    retrained = before[-1] - EVERY
    assert retrained > 0
    # the sidecar knew how far attempt 0 got: the failed checkpoints reported their steps
    assert first["attempt_end"]["steps_lost"] == retrained
    assert second["attempt_end"]["reason"] == "success"
    assert full.wait_final("twin", 60) == "COMPLETED"
    twin = (full.shared / "twin" / "final.sha256").read_text()
    assert (full.shared / "full" / "final.sha256").read_text() == twin


def test_every_checkpoint_left_is_complete(full: FullJobs) -> None:
    assert full.wait_final("full", 150) == "COMPLETED"
    dirs = sorted(full.ckpt.glob("step-*"))
    assert dirs
    for path in dirs:
        assert verify_checkpoint(path) is not None, path
    assert not list(full.ckpt.glob(".tmp-*"))


def test_eight_concurrent_clients_lose_nothing(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """8 CLI clients submitting, polling, listing the history and refreshing the capability
    cache at once, on one history database and one cache, for 20 s."""
    run = concurrent_clients(tmp_path / "state", tmp_path, clients=8, seconds=20)
    try:
        assert not run.failures, run.failures[:3]
        assert run.calls["submit"] >= 8
        assert run.calls["site"] >= 8
        assert len(run.submitted) == len(set(run.submitted)) == run.calls["submit"]
        assert not run.lost
        assert run.duplicates == 0
        assert run.cache_reads > 0
        assert run.torn_reads == 0
    finally:
        subprocess.run(["scancel", *run.submitted], check=False, capture_output=True)


@pytest.fixture(scope="module")
def lost(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LostJobs]:
    tmp = tmp_path_factory.mktemp("lost")
    with node_loss_trial(Cli(tmp / "state"), tmp, slurm_cluster.release) as jobs:
        yield jobs


def test_a_lost_node_is_a_node_failure_and_the_job_resumes_exactly(lost: LostJobs) -> None:
    assert lost.wait_final("lost", 150) == "COMPLETED"
    data = lost.events("lost")
    first, second = _by(data["ledger"], 0), _by(data["ledger"], 1)
    end = first["attempt_end"]
    assert end["reason"] == "node_failure"
    assert end["failed_node"] == lost.victim
    assert end["requeued"] is True
    assert "requeue 1 of" in end["why"]
    # Slurm's record of attempt 0
    assert data["attempts"][0]["state"] == "NODE_FAIL"
    # attempt 1 started right after the newest complete checkpoint
    before, after = _steps(lost.shared, "lost", 0), _steps(lost.shared, "lost", 1)
    resumed = after[0] - 1
    assert resumed % EVERY == 0
    assert resumed >= 3 * EVERY
    assert before[-1] >= resumed
    assert after[-1] == STEPS
    assert second["attempt_end"]["reason"] == "success"
    assert lost.wait_final("twin", 60) == "COMPLETED"
    twin = (lost.shared / "twin" / "final.sha256").read_text()
    assert (lost.shared / "lost" / "final.sha256").read_text() == twin


@pytest.mark.parametrize("expedite", [True, False], ids=["expedited", "plain"])
def test_a_killed_node_with_expedited_requeue_is_back_at_once(
    slurm_cluster: SlurmCluster, tmp_path: Path, expedite: bool
) -> None:
    """Issue 48: a node dies (its slurmd and the job's processes SIGKILLed, the node marked
    DOWN). A job that asked --requeue=expedite (site expedited_requeue, 25.11+) runs again
    on another node before a plain requeued job may even start: slurmctld makes that one
    wait cred_expire + 1 s (11 s on the test cluster, 121 s by default)."""
    if slurm_cluster.release < (25, 11):
        pytest.skip(f"Slurm {slurm_cluster.release} has no expedited requeue (25.11 added it)")
    site = str(expedited_site(tmp_path)) if expedite else "local"
    seen = node_killed_trial(Cli(tmp_path / "state", site=site), tmp_path)
    assert seen.final == "COMPLETED", seen
    assert seen.states == ["NODE_FAIL", "COMPLETED"], seen
    assert seen.restarted_on not in ("", seen.victim), seen
    assert seen.restart_seconds is not None
    if expedite:
        assert seen.expedited == "Yes", seen
        assert seen.restart_seconds < seen.requeue_delay, seen
    else:
        assert seen.expedited in ("", "No"), seen
        # BeginTime = now + the delay, in slurmctld's whole seconds (time(NULL))
        assert seen.restart_seconds >= seen.requeue_delay - 1, seen


def test_slurmdbd_down_submit_works_status_and_cost_say_so_then_reconcile(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    seen = accounting_outage(Cli(tmp_path / "state"), tmp_path)
    assert seen.submit is not None
    assert seen.submit.returncode == 0, seen.submit.stderr
    assert seen.status is not None
    assert seen.status.returncode == 0, seen.status.stderr
    assert "COMPLETED" in seen.status.stdout
    assert seen.cost is not None
    assert seen.cost.returncode == 1
    assert "Connection refused" in seen.cost.stderr
    assert "Hint: is accounting (slurmdbd) enabled and reachable?" in seen.cost.stderr
    assert "Traceback" not in seen.cost.stderr + seen.status.stderr
    assert seen.reconciled_after is not None
    attempts = [a for a in seen.cost_after["attempts"] if a["job_id"] == seen.job_id]  # type: ignore[index, union-attr]
    assert len(attempts) == 1, seen.cost_after


def test_preempted_anywhere_a_four_rank_run_resumes_exactly(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Two 2-node, 4-rank victims, preempted at random moments (seed 8: one has its
    asked-for write killed by the grace time, one gets a second notice during its
    requeue, both are preempted again in attempt 1); bench/faults.py runs 10 victims."""
    run = PreemptRun(Cli(tmp_path / "state"), tmp_path, seed=8)
    try:
        victims = run.run(2)
    finally:
        run.close()
    kinds = {p.kind for v in victims for p in v.injected}
    assert kinds == {"random moment", "asked-for write killed", "requeue"}, victims
    for victim in victims:
        assert victim.state == "COMPLETED", victim
        assert victim.same_weights, victim  # the uninterrupted twin's, bit for bit
        # each attempt resumed after the newest complete checkpoint, no step skipped,
        # one attempt per preemption (the second notice made none)
        assert victim.problems == [], victim
        assert victim.preemptions >= 1, victim


def test_preempted_as_each_attempt_starts_a_job_without_progress_is_still_requeued(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "state")
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)
    ids: dict[str, str] = {}
    jobs = Jobs(cli, shared, ids)
    preemptors: list[str] = []
    script = f"sleep 15; echo $SLURM_RESTART_COUNT $SLURM_PROCID >> {shared / 'done'}"
    ids["plain"] = submit(
        cli,
        tmp_path,
        "plain",
        command=["bash", "-c", script],
        launcher="srun",
        venv=VENV,
        tier="low",
        resources={"nodes": 1, "gpus_per_node": 4, "time": "00:05:00", "mem": "100M"},
    )
    try:
        for attempt in (0, 1):
            _wait_attempt_start(jobs, "plain", attempt)
            preemptors.append(_preempt(ids["plain"], nodes=1))
        assert jobs.wait_final("plain", 180) == "COMPLETED"
    finally:
        subprocess.run(["scancel", *preemptors, *ids.values()], check=False)
    ledger = jobs.events("plain")["ledger"]
    ends = [e for e in ledger if e["event"] == "attempt_end"]
    assert [e["reason"] for e in ends] == ["preempted", "preempted", "success"], ends
    assert all(e["requeued"] and e["no_progress"] for e in ends[:2]), ends
    assert not [e for e in ledger if e["event"] in ("requeue_skipped", "requeue_forbidden")]
    # The third attempt ran the command to its end, once per task (an earlier one may have
    # ended its sleep inside the grace time).
    last = [line for line in (shared / "done").read_text().splitlines() if line.startswith("2 ")]
    assert last, (shared / "done").read_text()
    assert len(last) == len(set(last)), last
    shutil.rmtree(shared, ignore_errors=True)


def _wait_attempt_start(jobs: Jobs, name: str, attempt: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not any(
        e["event"] == "attempt_start" and e["attempt"] == attempt
        for e in read_ledger(jobs.job_dir(name))
    ):
        assert time.monotonic() < deadline, f"{name}: attempt {attempt} never started"
        time.sleep(0.2)


@pytest.mark.parametrize("wait", [6.0, 0.0], ids=["state-saved", "state-lost"])
def test_slurmctld_killed_mid_sweep_a_retry_with_the_sweep_id_finishes_it_once(
    slurm_cluster: SlurmCluster, tmp_path: Path, wait: float
) -> None:
    """slurmctld SIGKILLed between a 200-point sweep's two arrays, ``wait`` s after the
    first (6: it has saved that array; 0: it loses it, and gives its job id to the next
    one: 3 runs of 3 here): the sweep exits 3 and says how to finish it; sweep status
    answers from accounting during the outage and says so; the retry with --sweep-id
    submits only what slurmctld does not have (the lost array again, saying so), a second
    retry nothing; every point runs exactly once (bench/faults.py: 1,000 points)."""
    seen = sweep_outage(Cli(tmp_path / "state"), tmp_path, 200, wait=wait)
    assert seen.first is not None
    assert seen.first.returncode == 3, seen.first.stderr
    assert "slurmctld did not answer sbatch: nothing was done" in seen.first.stderr
    assert f"--sweep-id {seen.sweep_id}" in seen.first.stderr
    assert "the 1 of 2 arrays in Slurm are taken" in seen.first.stderr
    # sweep status during the outage: accounting's states, said to be so, within 30 s
    assert seen.status_down is not None
    assert seen.status_down.returncode == 0, seen.status_down.stderr
    assert "Warning: slurmctld did not answer squeue" in seen.status_down.stderr
    assert "PENDING 101" in seen.status_down.stdout
    assert seen.status_down_seconds < 30
    for call in (seen.first, seen.status_down, seen.retry, seen.again):
        assert call is not None
        assert "Traceback" not in call.stderr, call.stderr
    assert seen.retry is not None
    assert seen.retry.returncode == 0, seen.retry.stderr
    if wait > 5:  # past SAVE_MAX_WAIT: slurmctld kept array 0, the retry took it
        assert "not known to slurmctld" not in seen.retry.stderr
    assert seen.again is not None
    assert seen.again.returncode == 0, seen.again.stderr
    assert seen.retry.stdout.strip() == seen.again.stdout.strip() == seen.sweep_id
    assert seen.tagged == [f"hpclaunch:{seen.sweep_id}-a0", f"hpclaunch:{seen.sweep_id}-a1"]
    assert seen.status["counts"] == {"COMPLETED": 200}, seen.status["counts"]
    assert len(seen.status["arrays"]) == 2
    assert len(seen.runs) == 200
    assert set(seen.runs.values()) == {1}  # no point ran twice


def test_slurmctld_killed_while_tasks_start_no_point_runs_twice(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """slurmctld SIGKILLed while a 200-point sweep's tasks (srun launcher, 1 s each) start
    and end, back 3 s later: it forgets its last seconds, starts some tasks again and keeps
    some ended ones RUNNING; a node that still has such a job id refuses the new launch
    ("Duplicate jobid": drained, the task FAILED before its script ran). Each point still
    finishes exactly once (a task whose point completed says so and exits, a copy of a
    running point waits for it), and `sweep status` counts all 200 COMPLETED, by the
    tasks' ledgers where Slurm lost the end. The driver does what `sweep status` says: the
    `scontrol release` of tasks Slurm held, and `hpclaunch sweep rerun` for points that
    never ran."""
    seen = ctld_killed_while_tasks_run(Cli(tmp_path / "state"), tmp_path, 200)
    print(seen)  # what slurmctld's recovery did this time (pytest -s, or on a failure)
    assert 0 < seen.killed_at_markers < 200
    assert seen.status["counts"] == {"COMPLETED": 200}, (seen.status["counts"], seen.drained)
    assert len(seen.runs) == 200
    assert set(seen.runs.values()) == {1}, seen  # no point finished twice
    assert not any(t["never_ran"] for t in seen.status["tasks"]), seen
    for said in seen.reran:  # each rerun names what it submitted, or that none was needed
        assert "submitted again" in said or "nothing to rerun" in said, said
    lost = [t for t in seen.status["tasks"] if t["slurm_state"]]
    if lost:  # how many ends slurmctld loses depends on where the kill lands
        assert any("ended successfully by their own ledgers" in p for p in seen.status["problems"])
