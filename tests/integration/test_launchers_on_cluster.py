"""accelerate and DeepSpeed 2-node launches under the sidecar, a signal during a checkpoint
write, and an operator's ``scontrol requeue``, on the real cluster (CPU, gloo).

All jobs are submitted at once (module fixture) and run side by side; each trains
examples/ddp_train.py on 2 nodes x 1 process (world size 2) for 150 steps:

* ``twin``: torchrun, never interrupted: the reference weights.
* ``accelerate`` / ``deepspeed``: warned mid-run (``scancel --batch --signal=USR1``, what
  ``--signal=B:USR1`` delivers at preemption), checkpoint, requeue, resume; final weights
  equal the twin's bit for bit. DeepSpeed runs its per-node launcher (launch.py, not the
  ``deepspeed`` runner), one per node, node rank from ``SLURM_NODEID``; at the requeue it
  gets SIGTERM from slurmstepd, which under proctrack/cgroup signals only the step's tasks.
* ``midwrite``: torchrun whose on-request save stalls 60 s between its two files
  (``--save-sleep``): the sidecar's wait (grace 10 s - 2) runs out, it requeues and kills the
  launch inside the write. The half-written ``.tmp-`` checkpoint is never resumed from:
  attempt 1 starts after the newest periodic (complete) checkpoint; weights still equal.
  A periodic commit (every 20 steps) that ends just after the request is not the answer:
  the sidecar still waits for the on-request one.
* ``opreq``: srun launcher, requeued by ``scontrol requeue`` from outside: the ledger says
  ``requeued`` (not ``cancelled``); the job runs again and completes.

Each job is acted on as soon as *it* reaches step :data:`AT_STEP` (one polling loop for all,
never one job's wait behind another's): a whole run takes ~30 s on a loaded 2-core host, and
a requeue that came after DeepSpeed's slow start once found ``opreq`` already finished.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpclaunch.supervise.control import read_step
from hpclaunch.supervise.ledger import read_ledger

from .cluster import SlurmCluster
from .conftest import Cli
from .test_sidecar_on_cluster import STEPS, TRAIN, VENV, Jobs, _assert_exact_resume, _by, _steps
from .test_sidecar_on_cluster import _submit as submit

# Exclusive: five 2-node PyTorch jobs at once (ten trainers on the 2 cores) miss their
# deadlines beside other tests, and slow those down too.
pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]

EVERY = 20  # periodic checkpoints of the midwrite job
AT_STEP = 30  # each job is warned / requeued once it reports this step


@dataclass
class LaunchJobs(Jobs):
    half_written: set[str] = field(default_factory=set)  # midwrite's .tmp- dirs, seen live
    acted_at: dict[str, int] = field(default_factory=dict)  # the step each job was acted on


@pytest.fixture(scope="module")
def jobs(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LaunchJobs]:
    tmp = tmp_path_factory.mktemp("launchers")
    cli = Cli(tmp / "state")
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)

    def train(key: str, *extra: str) -> list[str]:
        out = shared / key
        return [*TRAIN, "--log-dir", str(out), "--hash-out", str(out / "final.sha256"), *extra]

    midwrite = train("midwrite", "--save-sleep", "60")
    assert midwrite[4:6] == ["--every", "1000"]
    midwrite[5] = str(EVERY)
    res = {"nodes": 2, "time": "00:05:00", "mem": "800M"}  # DeepSpeed's launcher imports more
    common = {"venv": VENV, "resources": res, "tier": "low"}
    ids = {
        "twin": submit(cli, tmp, "twin", command=train("twin"), launcher="torchrun", **common),
        "accelerate": submit(
            cli, tmp, "accelerate", command=train("accelerate"), launcher="accelerate", **common
        ),
        "deepspeed": submit(
            cli, tmp, "deepspeed", command=train("deepspeed"), launcher="deepspeed", **common
        ),
        "midwrite": submit(
            cli,
            tmp,
            "midwrite",
            command=midwrite,
            launcher="torchrun",
            **common,
        ),
        "opreq": submit(cli, tmp, "opreq", command=train("opreq"), launcher="srun", **common),
    }
    jobs = LaunchJobs(cli, shared, ids)
    _interrupt(jobs)
    yield jobs
    shutil.rmtree(shared, ignore_errors=True)
    subprocess.run(["scancel", *ids.values()], check=False, capture_output=True)


def _interrupt(jobs: LaunchJobs) -> None:
    """Warn accelerate, deepspeed and midwrite (USR1, what ``--signal=B:USR1`` delivers at
    preemption) and ``scontrol requeue`` opreq, each once its trainer reports step
    :data:`AT_STEP` (the trainer runs, so the sidecar's handlers are in place); meanwhile
    record every ``.tmp-`` checkpoint of midwrite that has its first file, until its attempt 0
    ends (the test then picks the one its last trained step wrote)."""
    dirs = {key: jobs.job_dir(key) for key in jobs.ids}
    todo = ["accelerate", "deepspeed", "midwrite", "opreq"]
    deadline = time.monotonic() + 120
    midwrite_over = False
    while todo or not midwrite_over:
        for key in list(todo):
            step = read_step(dirs[key] / "control" / "progress.json")
            if step is None or step < AT_STEP:
                continue
            if key == "opreq":
                subprocess.run(["scontrol", "requeue", jobs.ids[key]], check=True)
            else:
                subprocess.run(["scancel", "--batch", "--signal=USR1", jobs.ids[key]], check=True)
            jobs.acted_at[key] = step
            todo.remove(key)
        if "midwrite" in jobs.acted_at:
            ckpts = dirs["midwrite"] / "checkpoints"
            jobs.half_written |= {p.parent.name for p in ckpts.glob(".tmp-step-*/model.pt")}
            midwrite_over = any(
                e["event"] == "attempt_end" and e["attempt"] == 0
                for e in read_ledger(dirs["midwrite"])
            )
        assert time.monotonic() < deadline, f"not interrupted: {todo}, {jobs.acted_at}"
        time.sleep(0.05)
    # Acted on mid-run: each had at least 50 steps to go (progress.json lags <= 2 s).
    assert all(step < STEPS - 50 for step in jobs.acted_at.values()), jobs.acted_at


def _twin(jobs: LaunchJobs) -> str:
    assert jobs.wait_final("twin", 90) == "COMPLETED"
    return (jobs.shared / "twin" / "final.sha256").read_text()


@pytest.mark.parametrize("launcher", ["accelerate", "deepspeed"])
def test_launcher_two_nodes_preempted_resumes_bit_for_bit(jobs: LaunchJobs, launcher: str) -> None:
    assert jobs.wait_final(launcher, 150) == "COMPLETED"
    _assert_exact_resume(jobs, launcher)
    ledger = jobs.events(launcher)["ledger"]
    start = _by(ledger, 0)["attempt_start"]
    assert start["launcher"] == launcher
    assert len(start["nodes"]) == 2
    assert start["master_addr"] == start["nodes"][0]
    log = jobs.cli.log(jobs.ids[launcher])
    if launcher == "deepspeed":
        # DeepSpeed's per-node launcher (launch.py) on each node, no runner, no ssh: its own
        # lines name the world hpclaunch gave it, in Slurm's node order, and each node's rank
        nodes = start["nodes"]
        assert f"WORLD INFO DICT: {{'{nodes[0]}': [0], '{nodes[1]}': [0]}}" in log, log
        assert re.search(r"nnodes=2, num_local_procs=1, node_rank=0", log)
        assert re.search(r"nnodes=2, num_local_procs=1, node_rank=1", log)
        assert "dist_world_size=2" in log
        assert "[runner.py:" not in log  # the runner logs its launch.py command line
    assert (jobs.shared / launcher / "final.sha256").read_text() == _twin(jobs)
    # Attempt 0's log ends with the sidecar's one line, not the launcher's traceback.
    committed = _by(ledger, 0)["checkpoint_committed"]["step"]
    _assert_clean_end(
        jobs,
        launcher,
        rf"hpclaunch: stopped for requeue at step {committed} \(preemption\); checkpoint "
        rf"step-{committed} committed \(the launcher's shutdown output: attempt-0\.stop\.log\)",
    )


def _assert_clean_end(jobs: LaunchJobs, key: str, last_line: str) -> None:
    first = (jobs.job_dir(key) / "attempt-0.log").read_text()
    assert re.fullmatch(last_line, first.splitlines()[-1]), first[-3000:]
    assert "DUE TO JOB REQUEUE" not in first  # srun's and slurmstepd's lines: aside too
    assert "Traceback" not in first
    assert "death signal" not in first
    aside = (jobs.job_dir(key) / "attempt-0.stop.log").read_text()
    # The launcher's answer to SIGTERM: torchrun's agent (also under accelerate) catches its
    # SignalException, logs "Received 15 death signal, shutting down workers" and raises it
    # again (torch/distributed/elastic/agent/server/api.py); the traceback comes later and
    # may not come at all: in clean-clone run 50 the step was killed for the requeue first.
    # DeepSpeed's launch.py logs and exits.
    noise = "Main process received SIGTERM" if key == "deepspeed" else "death signal"
    assert noise in aside, aside
    assert "DUE TO JOB REQUEUE" in aside


def test_signal_inside_a_checkpoint_write_never_resumes_the_half_written_one(
    jobs: LaunchJobs,
) -> None:
    assert jobs.wait_final("midwrite", 150) == "COMPLETED"
    cut = _steps(jobs.shared, "midwrite", 0)[-1]  # its on-request save was being written
    # seen live with its first file only (periodic saves' .tmp- dirs may be seen too)
    assert any(re.match(rf"\.tmp-step-{cut:09d}-", half) for half in jobs.half_written), (
        cut,
        jobs.half_written,
    )
    ledger = jobs.events("midwrite")["ledger"]
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert "checkpoint_committed" not in first, first
    assert first["checkpoint_timeout"]["waited"] >= 5
    assert first["requeue_issued"]
    assert first["attempt_end"]["reason"] == "preempted"
    resumed = (cut - 1) // EVERY * EVERY  # the newest periodic checkpoint before the cut
    # None answered the request: the newest committed is the trainer's own periodic one.
    assert first["attempt_end"]["committed_step"] == resumed
    assert f"attempt 1: starting after step {resumed}" in jobs.cli.log(jobs.ids["midwrite"])
    assert _steps(jobs.shared, "midwrite", 0) == list(range(1, cut + 1))
    assert _steps(jobs.shared, "midwrite", 1) == list(range(resumed + 1, STEPS + 1))
    assert second["attempt_end"]["reason"] == "success"
    ckpts = jobs.job_dir("midwrite") / "checkpoints"
    assert not (ckpts / f"step-{cut:09d}").exists()
    assert not list(ckpts.glob(".tmp-*"))  # the abandoned write was cleaned up on resume
    assert (jobs.shared / "midwrite" / "final.sha256").read_text() == _twin(jobs)
    _assert_clean_end(  # the step progress.json last said (it lags the trained steps)
        jobs,
        "midwrite",
        # it names the resume point (it said "from the last one" even with none: issue 27)
        r"hpclaunch: stopped for requeue at step \d+ \(preemption\); no checkpoint committed "
        rf"in time; the next attempt resumes from step {resumed} \(the launcher's shutdown "
        r"output: attempt-0\.stop\.log\)",
    )


def test_scontrol_requeue_is_recorded_as_requeued(jobs: LaunchJobs) -> None:
    assert jobs.wait_final("opreq", 150) == "COMPLETED"
    ledger = jobs.events("opreq")["ledger"]
    first, second = _by(ledger, 0), _by(ledger, 1)
    assert "signal_received" in first, (jobs.acted_at, first)
    assert first["signal_received"]["signal"] == "TERM"
    end = first["attempt_end"]
    assert end["reason"] == "requeued", end
    assert end["requeued"] is True
    assert end["restarts"] == 1
    assert "requeue_issued" not in first  # Slurm requeued it, not the sidecar
    assert second["attempt_end"]["reason"] == "success"
    assert (jobs.shared / "opreq" / "final.sha256").read_text() == _twin(jobs)
