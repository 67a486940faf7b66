"""The arbiter on the real cluster (issue 8): checkpoint-aware preemption instead of Slurm's.

The local site is switched to ``preemption: arbiter`` for this module (``site apply``
clears the QOS Preempt lists) and back to ``local`` afterwards. Low-tier jobs fill all 16
GPUs: three plain commands (no sidecar: a preemption would throw away everything they did)
and one trainer under the sidecar that commits a checkpoint every 10 steps (2 s) and on
request. A high-tier job
that needs one node's 4 GPUs then:

1. stays PENDING (Resources): Slurm itself preempts nobody any more;
2. ``hpclaunch arbiter --dry-run --once`` logs the choice (the trainer) and touches nothing;
3. with ``hpclaunch arbiter`` running, the trainer is asked to checkpoint, requeues itself
   and the high job starts within the grace time; the plain jobs are never preempted; the
   trainer resumes from its committed step and trains every step exactly once;
4. during the trainer's resumed run, a second high job waits: the dry run leaves the
   trainer alone for ``--min-run`` (preempted once, its new run is seconds old) and picks a
   plain job; with ``--min-run 0`` it picks the trainer again.

And elastic jobs (issue 29): one asking for 4 nodes while 2 are busy starts on 2, grows to
4 when they come free, shrinks to 2 for a critical job and grows back, every step once.

And ``--policy las`` (issue 49): an elastic job that holds every node is shrunk for a
newcomer of its own tier, which starts at once (Slurm's order would keep it waiting), and
grows back by the speed-up it measured; every step once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from hpclaunch.slurm.cluster import parse_restarts, restarts_argv

from .cluster import SlurmCluster
from .conftest import HPCLAUNCH, REPO, TORCHRUN_MEM, Cli
from .test_tiers_on_cluster import GRACE, VENV, Queue

# The cli backend only: what a backend decides for these jobs is the job it submits
# (test_backends_submit_alike_on_cluster) and its reads and acts on the queue
# (test_backends_agree_on_cluster); the rest happens in the job, backend or not.
pytestmark = [pytest.mark.slurm, pytest.mark.exclusive]

TRAINER = str(REPO / "tests/integration/tiny_trainer.py")
STEPS = 150  # 0.2 s each: ~30 s, so the trainer is still running when it is preempted


def _apply(site: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        [HPCLAUNCH, "--site", site, "site", "apply", "--yes"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def arbiter_site(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[str]:
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    data["preemption"] = "arbiter"
    path = tmp_path / "local-arbiter.yaml"
    path.write_text(yaml.safe_dump(data))
    cli = Cli(tmp_path / "site-state", site=str(path))
    _apply(str(path), cli.env)
    try:
        yield str(path)
    finally:
        _apply("local", cli.env)  # Slurm preempts again for the other tests


@pytest.fixture
def queue(arbiter_site: str, tmp_path: Path) -> Iterator[Queue]:
    import shutil
    import uuid

    shared = Path.home() / ".hpclaunch-it" / f"arbiter-{uuid.uuid4().hex[:8]}"
    shared.mkdir(parents=True)
    q = Queue(Cli(tmp_path / "state", site=arbiter_site), tmp_path, shared)
    yield q
    if q.ids:
        subprocess.run(["scancel", *q.ids.values()], check=False, capture_output=True)
    shutil.rmtree(shared, ignore_errors=True)


def _qos_preempt(name: str) -> str:
    out = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "qos", name, "format=Preempt"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _events(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class _Daemon:
    """What ``hpclaunch arbiter`` printed and returned (once stopped)."""

    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None


@contextmanager
def _arbiter(queue: Queue, log: Path, *options: str) -> Iterator[_Daemon]:
    """``hpclaunch arbiter`` on the module's site, a pass every 0.5 s, decisions into
    ``log``; stopped by SIGTERM on the way out, as a user's Ctrl-C would."""
    argv = [HPCLAUNCH, "--site", queue.cli.site, "arbiter", "--log", str(log), *options]
    process = subprocess.Popen(
        [*argv, "--interval", "0.5"],
        cwd=REPO,
        env=queue.cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    done = _Daemon()
    try:
        yield done
    finally:
        process.send_signal(signal.SIGTERM)
        done.stdout, done.stderr = process.communicate(timeout=20)
        done.returncode = process.returncode


def _dry_run_once(queue: Queue, log: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``hpclaunch arbiter --dry-run --once`` on the module's site, decisions into ``log``."""
    argv = [HPCLAUNCH, "--site", queue.cli.site, "arbiter", "--log", str(log)]
    run = subprocess.run(
        [*argv, "--dry-run", "--once", *options],
        cwd=REPO,
        env=queue.cli.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run


def test_arbiter_preempts_the_job_that_loses_least_and_it_resumes_exactly(
    queue: Queue, tmp_path: Path
) -> None:
    assert _qos_preempt("high") == ""  # site apply cleared it: Slurm does not preempt
    trainer = {
        "command": [
            "python",
            TRAINER,
            "--steps",
            str(STEPS),
            "--every",
            "10",
        ],
        "launcher": "srun",
        "venv": VENV,
        "resources": {"gpus_per_node": 4, "time": "00:05:00", "mem": "400M"},
    }
    plain = ["plain0", "plain1", "plain2"]
    for key in plain:
        queue.submit(key, "low")
    queue.submit("trainer", "low", **trainer)
    queue.wait(running={*plain, "trainer"})
    time.sleep(3)  # the plain jobs would lose all they did; the trainer 2 s at most

    queue.submit("high", "high", command=["sleep", "2"])
    queue.wait(running=set(), pending={"high"})
    time.sleep(3)
    assert queue.states()["high"] == ("PENDING", "Resources")  # nobody was preempted

    log = tmp_path / "arbiter.jsonl"
    dry = _dry_run_once(queue, log)
    (decision,) = _events(log)
    assert decision["dry_run"] is True
    assert (decision["victim"], decision["for_job"]) == (queue.ids["trainer"], queue.ids["high"])
    assert decision["action"] == "checkpoint"
    assert f"checkpoint: {queue.ids['trainer']}" in dry.stdout
    time.sleep(1)
    assert queue.states()["trainer"][0] == "RUNNING"  # a dry run touches nothing
    log.unlink()

    started = time.time()
    with _arbiter(queue, log) as daemon:
        queue.wait(running={"high"}, timeout=GRACE + 20)
        waited = time.time() - started
        assert waited < GRACE + 2, f"high started {waited:.1f} s after the arbiter"
        deadline = time.monotonic() + 10
        while "released" not in {e["event"] for e in _events(log)}:
            assert time.monotonic() < deadline, _events(log)
            time.sleep(0.2)
    out, err = daemon.stdout, daemon.stderr
    assert daemon.returncode == 0, err
    events = _events(log)
    preempts = [e for e in events if e["event"] == "preempt"]
    assert [(e["victim"], e["action"]) for e in preempts] == [(queue.ids["trainer"], "checkpoint")]
    assert not [e for e in events if e["event"] in ("forced_requeue", "action_failed")], events
    assert f"checkpoint: {queue.ids['trainer']}" in out

    # The cap by run time: the trainer's new run (after its requeue delay) fills the node
    # again; a second high job waits. The trainer, preempted once and seconds into its new
    # run, is protected for --min-run (300 s by default): the dry run picks a plain job;
    # with --min-run 0 the trainer is the cheapest victim again.
    queue.wait(running={"trainer"}, timeout=60)
    # Its sidecar has started attempt 1 (the arbiter reads that from the ledger: a job
    # whose current run has no attempt_start yet is not known to answer a request).
    ledger = Path(queue.cli.submitted()[queue.ids["trainer"]]["job_dir"]) / "events.jsonl"
    deadline = time.monotonic() + 20
    while not [e for e in _events(ledger) if e["event"] == "attempt_start" and e["attempt"]]:
        assert time.monotonic() < deadline, _events(ledger)
        time.sleep(0.2)
    # Slurm's restart count, which the arbiter reads when a decision is due (squeue -O).
    out = subprocess.run(restarts_argv(), capture_output=True, text=True, check=True).stdout
    counts = parse_restarts(out)
    assert counts[queue.ids["trainer"]] == 1, out
    assert [counts[queue.ids[k]] for k in plain] == [0, 0, 0], out
    queue.submit("high2", "high", command=["sleep", "2"])
    deadline = time.monotonic() + 10
    while queue.states().get("high2") != ("PENDING", "Resources"):
        assert time.monotonic() < deadline, queue.states()
        time.sleep(0.2)
    victims, choices = {}, {}
    for min_run in ("300", "0"):
        path = tmp_path / f"min-run-{min_run}.jsonl"
        _dry_run_once(queue, path, "--min-run", min_run)
        decisions = _events(path)
        preempts = [e for e in decisions if e["event"] == "preempt"]
        assert len(preempts) == 1, decisions
        choice = preempts[0]
        assert choice["for_job"] == queue.ids["high2"]
        victims[min_run] = (choice["victim"], choice["action"])
        choices[min_run] = choice
    assert victims["300"][0] in {queue.ids[k] for k in plain}, choices
    assert victims["300"][1] == "requeue"  # no sidecar: requeued at once
    # The trainer costs its measured write (read from the ledger: its done file was cleared
    # when attempt 1 started), a plain job the ~30 s it ran: the trainer, asked to checkpoint.
    assert victims["0"] == (queue.ids["trainer"], "checkpoint"), choices
    subprocess.run(["scancel", queue.ids.pop("high2")], check=True)

    queue.release(*plain)
    for key in [*plain, "trainer"]:
        deadline = time.monotonic() + 120
        while key in queue.states():
            assert time.monotonic() < deadline, f"{key} never finished: {queue.states()}"
            time.sleep(0.5)
    assert {k: queue.attempts(k) for k in plain} == {k: ["COMPLETED"] for k in plain}
    assert queue.attempts("trainer")[-1] == "COMPLETED"
    assert len(queue.attempts("trainer")) == 2

    ledger = json.loads(queue.cli("events", queue.ids["trainer"], "--json").stdout)["ledger"]
    first = {e["event"]: e for e in ledger if e["attempt"] == 0}
    signalled = first["signal_received"]
    assert signalled["signal"] == "USR1"  # scancel --batch --signal=USR1 by the arbiter
    assert first["attempt_end"]["reason"] == "preempted"
    committed = first["checkpoint_committed"]["step"]
    assert f"rank 0 attempt 1 resumes at {committed}" in queue.cli.log(queue.ids["trainer"])
    job_dir = Path(queue.cli.submitted()[queue.ids["trainer"]]["job_dir"])
    trained = [
        int(n) for a in (0, 1) for n in (job_dir / f"steps-attempt-{a}.log").read_text().split()
    ]
    assert trained == list(range(1, STEPS + 1))  # no step lost, none trained twice


def _worlds(queue: Queue) -> list[int]:
    """The world size of each step the elastic trainer logged, in order."""
    try:
        text = (queue.shared / "elastic" / "samples.log").read_text()
    except FileNotFoundError:
        return []
    return [int(line.split()[1]) for line in text.splitlines() if line.strip()]


def _runs(worlds: list[int]) -> list[int]:
    return [w for i, w in enumerate(worlds) if i == 0 or worlds[i - 1] != w]


def test_an_elastic_job_starts_small_grows_shrinks_for_a_critical_job_and_grows_back(
    queue: Queue, tmp_path: Path
) -> None:
    """Issue 29: with the arbiter, an elastic low-tier job that asks for 4 nodes while 2 are
    busy starts on the 2 that are idle (not waiting), grows to 4 once they come free, goes
    back to 2 for a critical job that needs 2 (it keeps training: not evicted), and grows
    back to 4 once that job ended; every step trained once."""
    steps = 450  # 0.1 s each at 4 nodes, 0.2 s at 2 (the trainer's sleep, per micro-step:
    # a growth gains); 2 nodes until the busy job ends (~15 s), 4, 2 for the critical job
    # and 10 s at least, then 4 again
    log = tmp_path / "arbiter.jsonl"
    with _arbiter(queue, log):
        queue.submit(
            "busy",
            "low",
            command=["sleep", "15"],
            resources={"nodes": 2, "gpus_per_node": 4, "time": "00:05:00", "mem": "100M"},
        )
        queue.wait(running={"busy"})
        queue.submit(
            "elastic",
            "low",
            command=[
                "python",
                "examples/elastic_train.py",
                "--steps",
                str(steps),
                "--sleep",
                "0.1",
                "--log-dir",
                str(queue.shared / "elastic"),
            ],
            launcher="torchrun",
            processes_per_node=1,
            venv=VENV,
            resources={"nodes": 4, "gpus_per_node": 4, "time": "00:10:00", "mem": TORCHRUN_MEM},
            elastic={
                "nodes": [2, 4],
                "global_batch": 16,
                "max_batch_per_gpu": 4,
                "min_interval": 10,
            },
        )
        # Started small, then grown to 4 (torchrun's four ranks meeting again took over 60 s
        # beside the other leg's tests: clean-clone run 24).
        deadline = time.monotonic() + 300
        while _runs(_worlds(queue)) != [2, 4]:
            assert time.monotonic() < deadline, (_runs(_worlds(queue)), _events(log))
            time.sleep(0.5)
        queue.submit(
            "critical",
            "critical",
            command=["sleep", "5"],
            resources={"nodes": 2, "gpus_per_node": 4, "time": "00:05:00", "mem": "100M"},
        )
        started = time.time()
        queue.wait(running={"critical"}, timeout=60)
        waited = time.time() - started
        # Two restarts (shrink, grow back) and the steps left: each restart is torchrun's
        # ranks meeting again, 40-55 s on two loaded cores (clean-clone run 31, beside the
        # side host's exclusive tests: 180 s fell 25 s short, the job at step 375 of 450).
        deadline = time.monotonic() + 420
        while "elastic" in queue.states():
            assert time.monotonic() < deadline, (queue.states(), _events(log))
            time.sleep(0.5)
    events = _events(log)
    elastic_id = queue.ids["elastic"]
    decisions = ("start_small", "grow", "shrink", "preempt")  # not "released" and the like
    decided = [
        e["event"]
        for e in events
        if e["event"] in decisions and elastic_id in (e.get("victim"), e.get("job"))
    ]
    assert decided == ["start_small", "grow", "shrink", "grow"], events
    assert not [e for e in events if e["event"] in ("preempt", "forced_requeue")], events
    assert waited < 60, waited
    ledger = json.loads(queue.cli("events", elastic_id, "--json").stdout)["ledger"]
    ends = [e for e in ledger if e["event"] == "attempt_end"]
    assert [(e["reason"], e.get("from_nodes"), e.get("to_nodes")) for e in ends] == [
        ("resized", 2, 4),
        ("resized", 4, 2),
        ("resized", 2, 4),
        ("success", None, None),
    ], ends
    worlds = _worlds(queue)
    assert _runs(worlds) == [2, 4, 2, 4], _runs(worlds)
    assert len(worlds) == steps  # every step trained once: no work lost to the resizes


def test_las_shrinks_the_job_that_held_most_for_a_newcomer_of_its_tier_and_grows_it_back(
    queue: Queue, tmp_path: Path
) -> None:
    """Issue 49: least attained service on the cluster. An elastic low job trains on all 4
    nodes (0.1 s a step there, 0.2 s at 2: a fixed global batch); a rigid low job that
    needs 2 nodes arrives. With ``--policy las`` the newcomer, having held nothing, goes
    first: the elastic job is shrunk to 2 nodes (not evicted) and the newcomer starts;
    when it ends, the elastic job grows back to 4 by the speed-up its ledger measured."""
    steps = 500
    log = tmp_path / "arbiter.jsonl"
    with _arbiter(queue, log, "--policy", "las", "--min-run", "5", "--service-quantum", "60"):
        queue.submit(
            "elastic",
            "low",
            command=["python", TRAINER, "--steps", str(steps), "--sleep", "0.1", "--elastic",
                     "--every", "50"],
            launcher="srun",
            processes_per_node=1,
            venv=VENV,
            resources={"nodes": 4, "gpus_per_node": 4, "time": "00:10:00", "mem": "200M"},
            elastic={"nodes": [2, 4], "global_batch": 16, "max_batch_per_gpu": 4,
                     "min_interval": 10},
        )  # fmt: skip
        queue.wait(running={"elastic"}, timeout=60)
        time.sleep(8)  # past --min-run, its speed at 4 nodes reported
        queue.submit(
            "newcomer",
            "low",
            command=["python", TRAINER, "--steps", "50", "--sleep", "0.2", "--every", "10"],
            launcher="srun",
            venv=VENV,
            resources={"nodes": 2, "gpus_per_node": 4, "time": "00:05:00", "mem": "200M"},
        )
        submitted = time.time()
        queue.wait(running={"newcomer"}, timeout=90)
        waited = time.time() - submitted
        deadline = time.monotonic() + 300
        while "elastic" in queue.states():
            assert time.monotonic() < deadline, (queue.states(), _events(log))
            time.sleep(0.5)
    events = _events(log)
    elastic_id = queue.ids["elastic"]
    plans = [e for e in events if e["event"] == "las_plan"]
    assert any(e["shrink"] == {elastic_id: 2} for e in plans), events
    assert any(e["grow"] == {elastic_id: 4} for e in plans), events
    assert not [e for e in events if e["event"] in ("preempt", "forced_requeue")], events
    assert waited < 60, waited  # a shrink's requeue, not the elastic job's whole run
    ledger = json.loads(queue.cli("events", elastic_id, "--json").stdout)["ledger"]
    ends = [e for e in ledger if e["event"] == "attempt_end"]
    assert [(e["reason"], e.get("from_nodes"), e.get("to_nodes")) for e in ends] == [
        ("resized", 4, 2),
        ("resized", 2, 4),
        ("success", None, None),
    ], ends
    job_dir = Path(queue.cli.submitted()[elastic_id]["job_dir"])
    trained = [
        int(line)
        for path in sorted(job_dir.glob("steps-attempt-*.log"))
        for line in path.read_text().split()
    ]
    assert sorted(trained) == list(range(1, steps + 1))  # every step once
