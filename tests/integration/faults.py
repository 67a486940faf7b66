"""Fault drivers shared by tests/integration/test_faults_on_cluster.py (a small count, in
the suite) and bench/faults.py (the full counts, with figures).

Each driver makes the fault happen on the real local cluster and returns what it saw; the
callers assert on it (tests) or count it (bench).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpclaunch.config.site import load_site
from hpclaunch.slurm.jobs import parse_state
from hpclaunch.slurm.text import key_values
from hpclaunch.store.capabilities import cache_path
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.requeue import slurm_requeue_delay
from hpclaunch.transport.local import LocalRunner

from .conftest import FINAL_STATES, TORCHRUN_MEM, Cli
from .test_sidecar_on_cluster import TRAIN, VENV, Jobs, _steps
from .test_sidecar_on_cluster import _submit as submit

#: The cluster's 16 MiB tmpfs (docker/slurm-cluster/lib/small_fs.sh).
SMALL_FS = Path("/var/cache/hpclaunch-cluster/small-fs")
#: The disk-full job's periodic checkpoint interval.
EVERY = 10

# What no concurrent client may ever print.
_BAD_OUTPUT = re.compile(r"database is locked|Traceback|disk I/O error", re.IGNORECASE)


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class FullJobs(Jobs):
    ckpt: Path = Path()  # the disk-full job's checkpoint directory, on SMALL_FS
    filled_at: float = 0.0  # when the test filled the filesystem


#: The fault jobs and their twins: examples/ddp_train.py on 2 nodes x 1 process.
_TWO_NODE_TORCHRUN: dict[str, object] = {
    "launcher": "torchrun",
    "venv": VENV,
    "resources": {"nodes": 2, "time": "00:05:00", "mem": TORCHRUN_MEM},
}


def _train(shared: Path, key: str) -> list[str]:
    """The trainer's argv for job ``key``: logs and final weights' hash under ``shared``,
    a checkpoint every :data:`EVERY` steps."""
    out = shared / key
    argv = [*TRAIN, "--log-dir", str(out), "--hash-out", str(out / "final.sha256")]
    argv[argv.index("--every") + 1] = str(EVERY)
    return argv


def same_weights_as_twin(jobs: Jobs, key: str) -> bool:
    """Whether job ``key`` ended with the uninterrupted twin's final weights (their hashes)."""
    hashes = [(jobs.shared / k / "final.sha256").read_text() for k in (key, "twin")]
    return hashes[0] == hashes[1]


@contextmanager
def disk_full_trial(
    cli: Cli,
    spec_dir: Path,
    release: tuple[int, int],
    notify: dict[str, Any] | None = None,
) -> Iterator[FullJobs]:
    """A 2-node torchrun job ("full", tier low, a checkpoint every :data:`EVERY` steps) with
    its checkpoints on :data:`SMALL_FS`, and an uninterrupted twin. Once "full" has its first
    checkpoint the filesystem is filled; after a periodic checkpoint failed, a preemption
    warning (USR1) asks for one, which fails too; when attempt 0 has ended the space is
    freed (Slurm restarts the job ~11 s later). Yields once that is done; the caller waits
    for the jobs to end. Cancels both jobs and removes their files on the way out.
    ``notify``: the "full" job's ``notify:`` (its failed checkpoints told)."""
    if not SMALL_FS.is_mount():
        raise AssertionError(f"{SMALL_FS} is not mounted: docker/slurm-cluster/cluster.sh up")
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)
    ckpt = SMALL_FS / uuid.uuid4().hex[:8]
    ids = {
        "full": submit(
            cli,
            spec_dir,
            "full",
            command=_train(shared, "full"),
            tier="low",
            checkpoint={"dir": str(ckpt)},
            **_TWO_NODE_TORCHRUN,
            **({"notify": notify} if notify else {}),
        ),
        "twin": submit(cli, spec_dir, "twin", command=_train(shared, "twin"), **_TWO_NODE_TORCHRUN),
    }
    jobs = FullJobs(cli, shared, ids, release=release, ckpt=ckpt)
    filler: Path | None = None
    try:
        wait_for("the first checkpoint", lambda: (ckpt / f"step-{EVERY:09d}").is_dir(), 90)
        filler = fill(SMALL_FS)
        jobs.filled_at = time.time()
        job_dir = jobs.job_dir("full")

        def seen(event: str) -> bool:
            return any(e["event"] == event for e in read_ledger(job_dir))

        wait_for("a periodic checkpoint to fail", lambda: seen("checkpoint_failed"), 60)
        subprocess.run(["scancel", "--batch", "--signal=USR1", ids["full"]], check=True)
        wait_for("attempt 0 to end", lambda: seen("attempt_end"), 60)
        filler.unlink()  # before attempt 1 starts
        filler = None
        yield jobs
    finally:
        if filler is not None:
            filler.unlink(missing_ok=True)
        subprocess.run(["scancel", *ids.values()], check=False, capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(ckpt, ignore_errors=True)


@dataclass
class LostJobs(Jobs):
    victim: str = ""  # the node set DOWN
    downed_at: float = 0.0
    step_at_loss: int = 0


@contextmanager
def node_loss_trial(cli: Cli, spec_dir: Path, release: tuple[int, int]) -> Iterator[LostJobs]:
    """A 2-node torchrun job ("lost", tier low: --requeue; a checkpoint every
    :data:`EVERY` steps) and an uninterrupted twin; once "lost" trained 3 checkpoints' worth
    of steps, its second node is set DOWN (``scontrol update State=DOWN``): Slurm ends the
    attempt NODE_FAIL and requeues the job. Yields then; the node is resumed on the way out
    (its slurmd, still alive, may also bring it back by itself)."""
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)
    # Apart: the twin must not run on the node that is taken away.
    ids = {
        "lost": submit(
            cli,
            spec_dir,
            "lost",
            command=_train(shared, "lost"),
            tier="low",
            sbatch_extra={"--nodelist": "n[1-2]"},
            **_TWO_NODE_TORCHRUN,
        ),
        "twin": submit(
            cli,
            spec_dir,
            "twin",
            command=_train(shared, "twin"),
            sbatch_extra={"--exclude": "n[1-2]"},
            **_TWO_NODE_TORCHRUN,
        ),
    }
    jobs = LostJobs(cli, shared, ids, release=release)

    def step() -> int:
        done = _steps(shared, "lost", 0)
        return done[-1] if done else 0

    try:
        wait_for("3 checkpoints' worth of steps", lambda: step() >= 3 * EVERY + 3, 90)
        jobs.victim = "n2"  # the second node: the batch shell and its sidecar run on n1
        jobs.step_at_loss = step()
        jobs.downed_at = time.time()
        subprocess.run(
            [
                "scontrol",
                "update",
                f"NodeName={jobs.victim}",
                "State=DOWN",
                "Reason=hpclaunch-fault",
            ],
            check=True,
        )
        yield jobs
    finally:
        if jobs.victim:
            subprocess.run(
                ["scontrol", "update", f"NodeName={jobs.victim}", "State=RESUME"],
                capture_output=True,
            )
        subprocess.run(["scancel", *ids.values()], check=False, capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)


REPO = Path(__file__).resolve().parents[2]
# cluster.sh's state: its default, or a side host's (docker/slurm-cluster/side-host.sh).
_STATE = Path(os.environ.get("HPCLAUNCH_CLUSTER_STATE", "/var/lib/hpclaunch-cluster"))


def cluster_mode() -> str:
    """The running cluster's mode, as cluster.sh recorded it."""
    return "docker" if (_STATE / ".mode-docker").exists() else "native"


def cluster_sh(*args: str) -> None:
    """docker/slurm-cluster/cluster.sh ARGS in the running cluster's mode."""
    script = REPO / "docker" / "slurm-cluster" / "cluster.sh"
    subprocess.run([str(script), "--mode", cluster_mode(), *args], check=True, capture_output=True)


def expedited_site(directory: Path) -> Path:
    """site-configs/local.yaml with ``expedited_requeue: true``, written in ``directory``."""
    text = (REPO / "site-configs" / "local.yaml").read_text()
    text = text.replace("expedited_requeue: false", "expedited_requeue: true")
    assert "expedited_requeue: true" in text
    path = directory / "expedited.yaml"
    path.write_text(text)
    return path


#: Sleeps in its first attempt (until its node dies), ends at once in the next.
_UNTIL_LOST = (
    "import os, time\n"
    "print('attempt', os.environ['HPCLAUNCH_ATTEMPT'], flush=True)\n"
    "if os.environ['HPCLAUNCH_ATTEMPT'] == '0':\n"
    "    time.sleep(240)\n"
)


@dataclass
class NodeKilled:
    """What :func:`node_killed_trial` saw."""

    job_id: str = ""
    victim: str = ""  # the node killed
    restarted_on: str = ""
    restart_seconds: float | None = None  # from the node's loss to RUNNING again (squeue)
    requeue_delay: int = 0  # what slurmctld makes a plain requeued job wait
    final: str = ""
    states: list[str] = field(default_factory=list)  # sacct's, attempt by attempt
    expedited: str = ""  # scontrol show job's ExpeditedRequeue ("" when not shown)


def node_killed_trial(cli: Cli, spec_dir: Path) -> NodeKilled:
    """A 1-node job under the sidecar (tier low: --requeue; --requeue=expedite where
    ``cli``'s site asks for it) whose node dies as it runs: the node's slurmd and every
    process on it SIGKILLed (``cluster.sh stop nN``), and the node marked DOWN at once, as
    an admin or a health check does, instead of waiting ``SlurmdTimeout`` (300 s). Slurm
    ends the attempt NODE_FAIL and requeues it; a plain requeued job then waits
    ``cred_expire`` + 1 s (job_mgr.c), an expedited one is eligible at once. The node is
    started again on the way out."""
    seen = NodeKilled(requeue_delay=slurm_requeue_delay(LocalRunner()))
    shared = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    shared.mkdir(parents=True)
    script = shared / "until_lost.py"  # where the nodes see it
    script.write_text(_UNTIL_LOST)
    seen.job_id = submit(
        cli,
        spec_dir,
        "killed",
        command=[sys.executable, str(script)],
        launcher="srun",
        tier="low",
        resources={"time": "00:05:00", "mem": "200M"},
    )

    def where() -> tuple[str, str]:
        out = subprocess.run(
            ["squeue", "-h", "-j", seen.job_id, "-o", "%T %N"], capture_output=True, text=True
        )
        state, _, node = out.stdout.strip().partition(" ")
        return state, node

    try:
        wait_for("the job to run", lambda: where()[0] == "RUNNING", 120)
        seen.victim = where()[1]
        time.sleep(2)  # its sidecar is up
        cluster_sh("stop", seen.victim)
        lost_at = time.monotonic()
        subprocess.run(
            [
                "scontrol",
                "update",
                f"NodeName={seen.victim}",
                "State=DOWN",
                "Reason=hpclaunch-fault",
            ],
            check=True,
            capture_output=True,
        )

        def again() -> bool:
            state, node = where()
            return state == "RUNNING" and node != seen.victim

        wait_for("the job to run again", again, 180)
        seen.restart_seconds = time.monotonic() - lost_at
        seen.restarted_on = where()[1]
        seen.final = Jobs(cli, shared, {"killed": seen.job_id}).wait_final("killed", 120)
        shown = subprocess.run(
            ["scontrol", "show", "job", "--oneliner", seen.job_id], capture_output=True, text=True
        )
        seen.expedited = key_values(shown.stdout).get("ExpeditedRequeue", "")
        attempts = cli("events", seen.job_id, "--json")
        seen.states = [a["state"] for a in json.loads(attempts.stdout)["attempts"]]
    finally:
        subprocess.run(["scancel", seen.job_id], check=False, capture_output=True)
        if seen.victim:
            cluster_sh("start", seen.victim)
            _wait_node_back(seen.victim)
        shutil.rmtree(shared, ignore_errors=True)
    return seen


def _wait_node_back(node: str, timeout: float = 60) -> None:
    """Until the restarted node answers again (ReturnToService=2 brings it back when its
    slurmd registers); RESUME it if it does not."""

    def state() -> str:
        out = subprocess.run(
            ["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True
        )
        return out.stdout.strip().split("\n")[0]

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(word in state() for word in ("down", "not_responding", "*")):
            return
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True)


@dataclass
class AccountingOutage:
    """What :func:`accounting_outage` saw (each ``CompletedProcess`` of the CLI)."""

    job_id: str = ""
    submit: subprocess.CompletedProcess[str] | None = None
    status: subprocess.CompletedProcess[str] | None = None  # the job, during the outage
    cost: subprocess.CompletedProcess[str] | None = None  # during the outage
    reconciled_after: float | None = None  # s from slurmdbd's start to sacct knowing the job
    cost_after: dict[str, object] = field(default_factory=dict)  # cost --json, once back


def accounting_outage(cli: Cli, spec_dir: Path) -> AccountingOutage:
    """slurmdbd (and its MariaDB) stopped: a 1-GPU job is submitted and runs to its end,
    ``status`` and ``cost`` are asked meanwhile; then slurmdbd starts again, and the job is
    waited for in sacct (slurmctld sends what it queued) and in ``cost``."""
    seen = AccountingOutage()
    spec = spec_dir / "outage.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": f"it-outage-{uuid.uuid4().hex[:6]}",
                "command": ["sleep", "1"],
                "project": "research",
                "resources": {"gpus_per_node": 1, "time": "1", "mem": "20M"},
            }
        )
    )
    cluster_sh("stop", "slurmdbd")
    try:
        seen.submit = cli("submit", str(spec))
        if seen.submit.returncode != 0:
            return seen
        seen.job_id = seen.submit.stdout.strip().splitlines()[-1]

        def ended() -> bool:
            out = cli("status", seen.job_id, "--json")
            return out.returncode == 0 and json.loads(out.stdout)[0]["state"] == "COMPLETED"

        wait_for("the job to end (seen in squeue)", ended, 60)
        seen.status = cli("status", seen.job_id)
        seen.cost = cli("cost", "--since", "today")
    finally:
        cluster_sh("start", "slurmdbd")
    started = time.monotonic()

    def accounted() -> bool:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-j", seen.job_id, "-o", "JobID"],
            capture_output=True,
            text=True,
        )
        return seen.job_id in out.stdout.split()

    wait_for("sacct to know the job", accounted, 120)
    seen.reconciled_after = time.monotonic() - started
    out = cli("cost", "--since", "today", "--json")
    seen.cost_after = json.loads(out.stdout) if out.returncode == 0 else {}
    return seen


@dataclass
class SweepOutage:
    """What :func:`sweep_outage` saw (each ``CompletedProcess`` of the CLI)."""

    sweep_id: str
    points: int
    first: subprocess.CompletedProcess[str] | None = None  # the sweep slurmctld cut off
    status_down: subprocess.CompletedProcess[str] | None = None  # sweep status, ctld down
    status_down_seconds: float = 0.0
    retry: subprocess.CompletedProcess[str] | None = None  # --sweep-id, ctld back
    again: subprocess.CompletedProcess[str] | None = None  # the same retry once more
    tagged: list[str] = field(default_factory=list)  # squeue: each array's tag, once a job
    status: dict[str, Any] = field(default_factory=dict)  # sweep status --json at the end
    runs: Counter[str] = field(default_factory=Counter)  # markers per point


def sweep_outage(cli: Cli, spec_dir: Path, points: int, *, wait: float = 6.0) -> SweepOutage:
    """A sweep of ``points`` points (arrays of 101: the cluster's MaxArraySize) whose
    second sbatch finds slurmctld killed (SIGKILL, ``wait`` s after the first array: 6 is
    past its 5 s state-save delay, 0 often loses the first array) and fails; ``sweep
    status`` is asked during the outage; then slurmctld starts again, the sweep is retried
    with its ``--sweep-id``, and retried once more. Each task leaves a marker named after
    its point; the tasks begin 25 s after submission (``--begin``), so none runs while the
    controller is down (a controller killed while tasks start forgets the last 5 s of
    them: README, Faults)."""
    seen = SweepOutage(f"outage-{uuid.uuid4().hex[:8]}", points)
    marks = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    marks.mkdir(parents=True)
    spec = spec_dir / "outage-sweep.yaml"
    name = f"it-outage-{seen.sweep_id[-8:]}"
    command = 'touch "$1/$2.${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
    spec.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "project": "research",
                "command": ["bash", "-c", command, "marker", str(marks), "{i}"],
                "resources": {"time": "1", "mem": "20M"},
                "sbatch_extra": {"--begin": "now+25"},
                "sweep": {"method": "list", "points": [{"i": i} for i in range(points)]},
            }
        )
    )
    # sbatch that kills slurmctld before the sweep's second array reaches it
    wrapper = spec_dir / "bin"
    wrapper.mkdir()
    calls = spec_dir / "sbatch-calls"
    script = REPO / "docker" / "slurm-cluster" / "cluster.sh"
    mode = cluster_mode()
    (wrapper / "sbatch").write_text(
        f"#!/bin/sh\necho >> {calls}\n"
        f'if [ "$(wc -l < {calls})" -eq 2 ]; then sleep {wait}; '
        f"{script} --mode {mode} stop slurmctld >/dev/null 2>&1; fi\n"
        f'exec {shutil.which("sbatch")} "$@"\n'
    )
    (wrapper / "sbatch").chmod(0o755)
    argv = ("sweep", "submit", str(spec), "--sweep-id", seen.sweep_id)
    path = cli.env["PATH"]
    try:
        cli.env["PATH"] = f"{wrapper}:{path}"
        seen.first = cli(*argv)
        cli.env["PATH"] = path
        started = time.monotonic()
        seen.status_down = cli("sweep", "status", seen.sweep_id)
        seen.status_down_seconds = time.monotonic() - started
    finally:
        cli.env["PATH"] = path
        cluster_sh("start", "slurmctld")
    try:
        seen.retry = cli(*argv)
        seen.again = cli(*argv)
        out = subprocess.run(
            ["squeue", "--noheader", "--states=all", "--array", "--format=%k"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        seen.tagged = sorted({t for t in out if seen.sweep_id in t})

        def ended() -> bool:
            out = cli("sweep", "status", seen.sweep_id, "--json")
            if out.returncode != 0:
                return False
            seen.status = json.loads(out.stdout)
            # Every task in a final state: COMPLETING is not one (clean-clone run 51 read
            # COMPLETED 199, COMPLETING 1 here, when only PENDING and RUNNING were waited out).
            return set(seen.status["counts"]) <= FINAL_STATES

        wait_for("the sweep to end", ended, 240)
        seen.runs = Counter(p.name.split(".")[0] for p in marks.iterdir())
    finally:
        subprocess.run(["scancel", "--name", name], capture_output=True)
        shutil.rmtree(marks, ignore_errors=True)
    return seen


@dataclass
class TasksKilled:
    """What :func:`ctld_killed_while_tasks_run` saw."""

    sweep_id: str
    points: int
    killed_at_markers: int = 0  # points finished when slurmctld was killed
    status: dict[str, Any] = field(default_factory=dict)  # sweep status --json at the end
    runs: Counter[str] = field(default_factory=Counter)  # finished runs per point
    skipped: int = 0  # task logs saying "already completed"
    waited: int = 0  # task logs saying "running in another job"
    drained: set[str] = field(default_factory=set)  # "node reason" Slurm drained meanwhile
    released: set[str] = field(default_factory=set)  # tasks held after a failed launch
    lost_ends: int = 0  # tasks COMPLETED by their ledgers while Slurm said otherwise
    job_lost: int = 0  # task ledgers with an attempt srun found unknown to slurmctld
    reran: list[str] = field(default_factory=list)  # what each 'sweep rerun' said


def ctld_killed_while_tasks_run(cli: Cli, spec_dir: Path, points: int) -> TasksKilled:
    """A sweep of ``points`` points (srun launcher: each task has its sidecar and ledger)
    whose tasks each sleep 1 s then leave a marker; once a tenth of them are done,
    slurmctld is SIGKILLed while others start, and started again 3 s later. slurmctld
    forgets what it did in its last seconds (it saves at most every 5 s), so it starts
    some tasks again. Waits for the sweep to end meanwhile doing what a user does (the
    ``scontrol release`` and the ``hpclaunch sweep rerun`` that ``sweep status`` names)
    and what an admin does (resume the nodes Slurm drained), then counts the markers per
    point and what the tasks' logs say."""
    seen = TasksKilled(f"tasks-{uuid.uuid4().hex[:8]}", points)
    marks = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    marks.mkdir(parents=True)
    spec = spec_dir / "tasks-sweep.yaml"
    command = 'sleep 1; touch "$1/$2.${SLURM_JOB_ID}"'
    spec.write_text(
        yaml.safe_dump(
            {
                "name": f"it-{seen.sweep_id}",
                "project": "research",
                "launcher": "srun",
                "venv": str(REPO / ".venv"),
                "command": ["bash", "-c", command, "marker", str(marks), "{i}"],
                "resources": {"time": "2", "mem": "100M"},
                "sweep": {"method": "list", "points": [{"i": i} for i in range(points)]},
            }
        )
    )
    try:
        out = cli("sweep", "submit", str(spec), "--sweep-id", seen.sweep_id)
        if out.returncode != 0:
            raise AssertionError(out.stderr)
        wait_for("a tenth of the points", lambda: len(list(marks.iterdir())) >= points // 10, 180)
        seen.killed_at_markers = len(list(marks.iterdir()))
        cluster_sh("stop", "slurmctld")
        time.sleep(3)
        cluster_sh("start", "slurmctld")

        def ended() -> bool:
            seen.drained |= _resume_drained()  # the admin
            out = cli("sweep", "status", seen.sweep_id, "--json", "--no-metrics")
            if out.returncode != 0:
                return False
            seen.status = json.loads(out.stdout)
            acted = False
            for problem in seen.status["problems"]:  # the user, doing what it says
                said = re.search(r"'(scontrol release [^']+)'", problem)
                if said:
                    seen.released |= set(said.group(1).split()[2:])
                    subprocess.run(said.group(1).split(), capture_output=True, check=False)
                said = re.search(r"'hpclaunch (sweep rerun [^']+)'", problem)
                if said:
                    rerun = cli(*said.group(1).split())
                    seen.reran.append(rerun.stdout.strip() or rerun.stderr.strip())
                    acted = True
            counts = seen.status["counts"]
            return not acted and all(parse_state(state).is_finished for state in counts)

        wait_for("the sweep to end", ended, 600)
        seen.runs = Counter(p.name.split(".")[0] for p in marks.iterdir())
        seen.lost_ends = sum(1 for t in seen.status["tasks"] if t["slurm_state"])
        logs = Path(cli.submitted_rows()[0]["job_dir"]) / "tasks"
        for log in logs.glob("*/attempt-*.log"):
            text = log.read_text(errors="replace")
            seen.skipped += "already completed" in text
            seen.waited += "running in another job" in text
        for ledger in logs.glob("*/events.jsonl"):
            seen.job_lost += '"reason": "job_lost"' in ledger.read_text(errors="replace")
    finally:
        subprocess.run(["scancel", "--name", f"it-{seen.sweep_id}"], capture_output=True)
        seen.drained |= _resume_drained()
        shutil.rmtree(marks, ignore_errors=True)
    return seen


def _resume_drained() -> set[str]:
    """Resume the nodes Slurm drained (what an admin does); return ``"node reason"``."""
    lines = subprocess.run(
        ["sinfo", "-N", "-h", "-t", "drain,drained,draining", "-o", "%N %E"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    drained = {line.strip() for line in lines if line.strip()}
    for node in sorted({line.split()[0] for line in drained}):
        subprocess.run(
            ["scontrol", "update", f"NodeName={node}", "State=RESUME"],
            capture_output=True,
            check=False,
        )
    return drained


def fill(directory: Path) -> Path:
    """Write one file into ``directory`` until its filesystem says ENOSPC; return it."""
    filler = directory / f"filler-{uuid.uuid4().hex[:6]}"
    with filler.open("wb", buffering=0) as f:  # unbuffered: close() has nothing to flush
        code = None
        chunk = b"\0" * (1 << 16)
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            code = exc.errno
    if code != errno.ENOSPC:
        raise AssertionError(f"filling {directory} ended with errno {code}, not ENOSPC")
    return filler


@dataclass
class ClientsRun:
    """What :func:`concurrent_clients` saw.

    Attributes:
        submitted: The job ids the clients' ``submit`` printed, one per submission.
        calls: Commands run, by command (``submit``, ``status``, ...).
        failures: ``(command, exit code, output)`` of every call that failed or printed
            something no client may print (``database is locked``, a traceback).
        cache_reads: Reads of the capability cache while the clients ran.
        torn_reads: Those that found a file that was not one whole JSON document.
        history: The history's rows per job id, read after the run.
    """

    submitted: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, int, str]] = field(default_factory=list)
    cache_reads: int = 0
    torn_reads: int = 0
    history: Counter[str] = field(default_factory=Counter)

    @property
    def lost(self) -> list[str]:
        """Submitted jobs the history does not have."""
        return [job for job in self.submitted if job not in self.history]

    @property
    def duplicates(self) -> int:
        """History rows beyond one per job."""
        return sum(n - 1 for n in self.history.values() if n > 1)


def concurrent_clients(state: Path, spec_dir: Path, *, clients: int, seconds: float) -> ClientsRun:
    """``clients`` threads, each running the hpclaunch CLI in a loop against ONE state
    directory (history database, capability cache): submit a trivial job, then ``status``,
    ``history --json``, ``site show --refresh --json`` (rewrites the cache), in turn, for
    ``seconds`` and until each command ran ``clients`` times (at most 6 x ``seconds``: on
    a loaded machine 20 s gave only 6 ``site`` calls, clean-clone run 20); meanwhile one
    more thread reads the capability cache as fast as it can."""
    spec = spec_dir / "clients.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": f"it-clients-{uuid.uuid4().hex[:6]}",
                "command": ["true"],
                "project": "research",
                "resources": {"time": "1", "mem": "20M"},
            }
        )
    )
    run = ClientsRun()
    lock = threading.Lock()
    cli = Cli(state)
    cache = cache_path(load_site(cli.site).name, cli.env)  # the site's own name
    deadline = time.monotonic() + seconds
    last = time.monotonic() + 6 * seconds
    commands: list[tuple[str, ...]] = [
        ("submit", str(spec)),
        ("status",),
        ("history", "--json", "--limit", "20"),
        ("site", "show", "--refresh", "--json"),
    ]

    def more() -> bool:
        now = time.monotonic()
        if now < deadline:
            return True
        with lock:
            short = any(run.calls[c[0]] < clients for c in commands)
        return short and now < last

    clients_done = threading.Event()

    def client(index: int) -> None:
        turn = index  # the clients start at different commands
        while more():
            args = commands[turn % len(commands)]
            turn += 1
            out = cli(*args, timeout=120)
            text = out.stdout + out.stderr
            with lock:
                run.calls[args[0]] += 1
                if out.returncode != 0 or _BAD_OUTPUT.search(text):
                    run.failures.append((" ".join(args), out.returncode, text[-2000:]))
                elif args[0] == "submit":
                    run.submitted.append(out.stdout.strip().splitlines()[-1])

    def reader() -> None:
        while not clients_done.is_set():
            try:
                text = cache.read_text()
            except FileNotFoundError:
                time.sleep(0.01)
                continue
            with lock:
                run.cache_reads += 1
                try:
                    json.loads(text)
                except ValueError:
                    run.torn_reads += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    watcher = threading.Thread(target=reader)
    for thread in [*threads, watcher]:
        thread.start()
    for thread in threads:
        thread.join()
    clients_done.set()
    watcher.join()
    for record in cli.submitted_rows():
        run.history[record["job_id"]] += 1
    return run
