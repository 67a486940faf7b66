"""Priority tiers, preemption and guaranteed quotas on the real cluster (issue 4's proofs).

The local cluster has 16 GPUs (4 nodes, 4 each). Jobs here take 4 GPUs on one node and, unless
said otherwise, wait for a *release file* in a directory every node sees, so the test decides
when each one ends and start orders are deterministic.

1. Tiers (the W&B Launch scenario): research's association limit of 8 GPUs is a queue that
   runs two such jobs at once; seen through a site config without quotas, every job runs in
   account research with its tier's QOS, and Slurm's priority (QOS priority times
   PriorityWeightQOS) decides who starts next as GPUs free up.
2. Preemption: low-tier jobs under the sidecar fill every GPU; a critical job preempts one at
   once; it checkpoints, is requeued and completes on its second attempt.
3. Quotas (research: 8, vision: 4 in site-configs/local.yaml): over-quota work runs on idle
   GPUs, in-quota work takes them back, and in-quota work is never preempted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .cluster import SlurmCluster
from .conftest import REPO, Cli, cancel_until_gone

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
# The cli backend only: what a backend decides for these jobs is the job it submits
# (test_backends_submit_alike_on_cluster) and its reads and acts on the queue
# (test_backends_agree_on_cluster); the rest happens in the job, backend or not.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.exclusive]

VENV = str(REPO / ".venv")
GRACE = 10  # the low and over-quota QOS's GraceTime in site-configs/local.yaml


class Queue:
    """Submits release-file jobs through the CLI and reads their states from Slurm."""

    def __init__(self, cli: Cli, specs: Path, shared: Path) -> None:
        self.cli, self.specs, self.shared = cli, specs, shared
        self.ids: dict[str, str] = {}
        self.stderr: dict[str, str] = {}

    def submit(self, key: str, tier: str, project: str = "research", **fields: Any) -> str:
        release = self.shared / f"release-{key}"
        spec = {
            "name": f"it-tier-{key}-{uuid.uuid4().hex[:6]}",
            "project": project,
            "tier": tier,
            "command": ["bash", "-c", 'while [ ! -e "$0" ]; do sleep 0.2; done', str(release)],
            "resources": {"gpus_per_node": 4, "time": "00:05:00", "mem": "100M"},
            **fields,
        }
        path = self.specs / f"{key}.yaml"
        path.write_text(yaml.safe_dump(spec))
        out = self.cli("submit", str(path))
        assert out.returncode == 0, out.stderr
        self.stderr[key] = out.stderr
        self.ids[key] = out.stdout.strip().splitlines()[-1]
        return self.ids[key]

    def release(self, *keys: str) -> None:
        for key in keys:
            (self.shared / f"release-{key}").touch()

    def states(self) -> dict[str, tuple[str, str]]:
        """key → (squeue state, reason) of the jobs squeue still lists."""
        by_id = {job_id: key for key, job_id in self.ids.items()}
        out = subprocess.run(
            ["squeue", "-h", "-j", ",".join(by_id), "-o", "%i|%T|%r"],
            capture_output=True,
            text=True,
            check=False,
        )
        found = {}
        for line in out.stdout.splitlines():
            job_id, state, reason = line.split("|")
            if job_id in by_id:
                found[by_id[job_id]] = (state, reason)
        return found

    def wait(
        self,
        running: set[str],
        pending: frozenset[str] | set[str] = frozenset(),
        timeout: float = 60,
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            now = self.states()
            if all(now.get(k, ("",))[0] == "RUNNING" for k in running) and all(
                now.get(k, ("",))[0] == "PENDING" for k in pending
            ):
                return
            assert time.monotonic() < deadline, (
                f"wanted running {running}, pending {pending}: {now}"
            )
            time.sleep(0.2)

    def next_start(self, candidates: set[str], timeout: float = 60) -> str:
        """The one job of ``candidates`` that starts next."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.states()
            started = {k for k in candidates if now.get(k, ("",))[0] == "RUNNING"}
            if started:
                assert len(started) == 1, f"several started at once: {started}"
                return started.pop()
            assert time.monotonic() < deadline, f"none of {candidates} started"
            time.sleep(0.2)

    def attempts(self, key: str) -> list[str]:
        """The job's attempts as sacct -D lists them (states, oldest first)."""
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-D", "-j", self.ids[key], "-o", "State"],
            capture_output=True,
            text=True,
            check=False,
        )
        return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]

    def queue_row(self, key: str) -> dict[str, Any]:
        """The job's row of ``hpclaunch queue --json``."""
        out = self.cli("queue", "--json")
        assert out.returncode == 0, out.stderr
        (row,) = [r for r in json.loads(out.stdout) if r["job_id"] == self.ids[key]]
        assert isinstance(row, dict)
        return row

    def status(self, key: str) -> dict[str, Any]:
        out = self.cli("status", self.ids[key], "--json")
        assert out.returncode == 0, out.stderr
        (info,) = json.loads(out.stdout)
        assert isinstance(info, dict)
        return info


@pytest.fixture
def queue(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Queue]:
    shared = Path.home() / ".hpclaunch-it" / f"tiers-{uuid.uuid4().hex[:8]}"
    shared.mkdir(parents=True)
    q = Queue(Cli(tmp_path / "state"), tmp_path, shared)
    yield q
    # Gone, not only cancelled: the next test counts the quota its jobs held (COMPLETING
    # under proctrack/cgroup for seconds: clean-clone run after stop 55, o1 planned in-quota).
    cancel_until_gone(list(q.ids.values()))
    shutil.rmtree(shared, ignore_errors=True)


def _site_without_quotas(tmp_path: Path) -> str:
    data = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    data["quotas"] = {}
    path = tmp_path / "local-no-quotas.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _start_times(ids: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ",".join(ids), "-o", "JobID,Start"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(line.split("|") for line in out.stdout.splitlines() if line)


def test_critical_jumps_the_queue_then_high_then_medium_then_low(
    queue: Queue, tmp_path: Path
) -> None:
    queue.cli.site = _site_without_quotas(tmp_path)
    for key in ("m1", "m2", "m3", "m4"):
        queue.submit(key, "medium")
    queue.wait(running={"m1", "m2"}, pending={"m3", "m4"})
    deadline = time.monotonic() + 10
    while queue.states()["m3"][1] == "None":  # not yet seen by a scheduling pass
        assert time.monotonic() < deadline, queue.states()
        time.sleep(0.2)
    assert queue.states()["m3"][1] == "AssocGrpGRES"  # research's 8 GPUs are in use
    queue.submit("high", "high")
    queue.submit("low", "low")
    queue.submit("critical", "critical")
    queue.wait(running={"m1", "m2"}, pending={"m3", "m4", "high", "low", "critical"})

    order, running = ["m1", "m2"], ["m1", "m2"]
    waiting = {"m3", "m4", "high", "low", "critical"}
    while waiting:
        queue.release(running.pop(0))  # frees 4 GPUs of research's 8: one job starts
        started = queue.next_start(waiting)
        order.append(started)
        running.append(started)
        waiting.discard(started)
        time.sleep(1.1)  # sacct's Start has 1 s resolution: keep the starts apart
    queue.release(*running)
    assert order == ["m1", "m2", "critical", "high", "m3", "m4", "low"]

    starts = _start_times([queue.ids[k] for k in order])
    by_start = sorted(order, key=lambda k: starts[queue.ids[k]])
    assert by_start == order, starts  # sacct agrees


def test_over_quota_work_starts_in_tier_order_critical_first(queue: Queue) -> None:
    # Every GPU held, both guarantees used up: research's 8 (r1, r2), vision's 4 (v1), and
    # research's over-quota o1 on the last 4 (over-quota QOS preempts nothing).
    for key, project in (("r1", "research"), ("r2", "research"), ("v1", "vision")):
        queue.submit(key, "critical", project=project)
        queue.wait(running={key})
    queue.submit("o1", "medium")
    queue.wait(running={"o1"})
    assert queue.status("o1")["quota"] == "over-quota"
    # Then research's work waits over-quota, submitted lowest tier first.
    waiting = ["low", "medium", "high", "critical"]
    for tier in waiting:
        queue.submit(tier, tier)
    queue.wait(running={"r1", "r2", "v1", "o1"}, pending=set(waiting))
    assert {k: queue.status(k)["quota"] for k in waiting} == dict.fromkeys(waiting, "over-quota")
    # The non-preemptible tiers were told, in one line, naming the spec file.
    for tier in ("medium", "high", "critical"):
        (line,) = [x for x in queue.stderr[tier].splitlines() if x.startswith("Warning:")]
        assert line.endswith(
            "project research holds 8 of its 8 guaranteed GPUs; this job asks 4: it runs "
            "over-quota on idle GPUs and may be preempted (--quota=strict waits in-quota instead)"
        ), line
    assert "Warning:" not in queue.stderr["low"]  # preemptible by its own tier

    order, running, pending = [], "o1", set(waiting)
    while pending:
        queue.release(running)  # frees one node's 4 GPUs: exactly one waiting job fits
        running = queue.next_start(pending)
        order.append(running)
        pending.discard(running)
        time.sleep(1.1)  # sacct's Start has 1 s resolution: keep the starts apart
    queue.release(running, "r1", "r2", "v1")
    assert order == ["critical", "high", "medium", "low"]
    starts = _start_times([queue.ids[k] for k in order])
    assert sorted(order, key=lambda k: starts[queue.ids[k]]) == order, starts  # sacct agrees


def test_critical_preempts_a_low_job_which_checkpoints_requeues_and_completes(
    queue: Queue,
) -> None:
    # 0.2 s each: ~20 s of training per job. With 10 s, on a loaded machine (a side host
    # beside it, clean-clone run 17) the preemption came as the victim took its last step:
    # its launch ended with no checkpoint, and Slurm requeued it all the same.
    steps = 100
    trainer = {
        "command": [
            "python",
            str(REPO / "tests/integration/tiny_trainer.py"),
            "--steps",
            str(steps),
        ],
        "launcher": "srun",
        "venv": VENV,
        "resources": {"gpus_per_node": 4, "time": "00:05:00", "mem": "400M"},
    }
    lows = [f"low{i}" for i in range(4)]
    for key in lows:
        queue.submit(key, "low", **trainer)
    queue.wait(running=set(lows))  # every GPU of the cluster is taken by low jobs
    assert {queue.status(k)["quota"] for k in lows} == {"over-quota"}
    time.sleep(3)

    submitted = time.time()
    queue.submit("critical", "critical", command=["sleep", "2"])
    queue.wait(running={"critical"}, timeout=GRACE + 20)
    waited = time.time() - submitted
    assert waited < GRACE + 5, f"critical started {waited:.1f} s after submission"
    assert queue.status("critical")["quota"] == "in-quota"

    for key in lows:
        deadline = time.monotonic() + 120
        while key in queue.states():
            assert time.monotonic() < deadline, f"{key} never finished: {queue.states()}"
            time.sleep(0.5)
    # squeue has them finished a moment before slurmdbd gives sacct their ends (seen on
    # 22.05 in docker: the victim's last attempt still RUNNING in sacct).
    deadline = time.monotonic() + 30
    attempts = {k: queue.attempts(k) for k in lows}
    while any(s[-1] in ("RUNNING", "PENDING") for s in attempts.values()):
        assert time.monotonic() < deadline, attempts
        time.sleep(0.5)
        attempts = {k: queue.attempts(k) for k in lows}
    victims = [k for k, states in attempts.items() if len(states) > 1]
    assert len(victims) == 1, attempts  # 4 GPUs needed: one low job on one node is enough
    (victim,) = victims
    assert attempts[victim][0] in {"PREEMPTED", "REQUEUED"}, attempts
    assert attempts[victim][-1] == "COMPLETED"
    assert all(states == ["COMPLETED"] for k, states in attempts.items() if k != victim)

    events = json.loads(queue.cli("events", queue.ids[victim], "--json").stdout)["ledger"]
    first = {e["event"]: e for e in events if e["attempt"] == 0}
    second = {e["event"]: e for e in events if e["attempt"] == 1}
    signalled = first["signal_received"]
    assert signalled["signal"] == "USR1"
    assert signalled["time"] - submitted < GRACE  # heard within the grace time
    assert first["attempt_end"]["reason"] == "preempted"
    committed = first["checkpoint_committed"]["step"]
    assert second["attempt_end"]["reason"] == "success"
    log = queue.cli.log(queue.ids[victim])
    assert f"rank 0 attempt 1 resumes at {committed}" in log  # SLURM_RESTART_COUNT=1
    job_dir = Path(queue.cli.submitted()[queue.ids[victim]]["job_dir"])
    trained = [
        int(n) for a in (0, 1) for n in (job_dir / f"steps-attempt-{a}.log").read_text().split()
    ]
    assert trained == list(range(1, steps + 1))  # no step lost, none trained twice


def test_quotas_over_quota_runs_on_idle_gpus_and_gives_them_back(queue: Queue) -> None:
    # research (A) holds its 8 guaranteed GPUs and runs 4 more over quota on idle GPUs.
    queue.submit("a1", "medium")
    queue.submit("a2", "medium")
    queue.wait(running={"a1", "a2"})
    queue.submit("a3", "medium")
    queue.wait(running={"a3"})
    assert [queue.status(k)["quota"] for k in ("a1", "a2", "a3")] == [
        "in-quota",
        "in-quota",
        "over-quota",
    ]
    # vision (B) takes its 4 guaranteed GPUs: the last idle ones.
    queue.submit("b1", "medium", project="vision")
    queue.wait(running={"b1"})
    assert queue.status("b1")["quota"] == "in-quota"
    # B's next jobs are over its quota: they wait, and cannot preempt anyone.
    queue.submit("b2", "high", project="vision")
    queue.submit("b3", "medium", project="vision")
    queue.wait(running={"a1", "a2", "a3", "b1"}, pending={"b2", "b3"})
    assert queue.status("b2")["quota"] == "over-quota"
    # A's over-quota job ends, then one of A's in-quota ones: B's over-quota work gets the
    # idle GPUs, high before medium.
    queue.release("a3")
    assert queue.next_start({"b2", "b3"}) == "b2"
    queue.release("a2")
    assert queue.next_start({"b3"}) == "b3"
    queue.wait(running={"a1", "b1", "b2", "b3"})

    # A needs its guarantee back (it holds 4 of 8): its in-quota job preempts B's over-quota
    # work (requeued after the grace time), never B's in-quota job.
    submitted = time.time()
    queue.submit("a4", "medium")
    assert queue.status("a4")["quota"] == "in-quota"
    # While the victim has its grace time, queue names it: b2, the older of two equal jobs
    # (Slurm keeps its job list's order among equals), and Slurm preempts just that one.
    a4 = queue.queue_row("a4")
    assert a4["state"] == "PENDING", a4
    assert a4["why"].endswith(f"will likely preempt job {queue.ids['b2']}, grace {GRACE} s"), a4
    queue.wait(running={"a4"}, timeout=GRACE + 30)
    print(f"a4 started {time.time() - submitted:.1f} s after submission (grace {GRACE} s)")
    requeued = {k for k in ("b2", "b3") if queue.attempts(k)[0] in {"PREEMPTED", "REQUEUED"}}
    assert requeued == {"b2"}, {k: queue.attempts(k) for k in ("b2", "b3")}
    for key in ("a1", "b1"):
        assert queue.attempts(key) == ["RUNNING"], key  # in-quota: never preempted

    # A within its quota is not preempted by B: B's critical job is over its quota and waits;
    # even a hand-written sbatch in B's account with a non-preemptible QOS is held by Slurm at
    # B's guarantee (GrpTRES), so it cannot preempt A either.
    queue.submit("b4", "critical", project="vision")
    assert queue.status("b4")["quota"] == "over-quota"
    hand = ["sbatch", "--parsable", "-A", "vision", "--qos=critical", "--gres=gpu:4", "-t", "1"]
    out = subprocess.run([*hand, "--wrap", "sleep 1"], capture_output=True, text=True, check=True)
    by_hand = out.stdout.split(";")[0].strip()
    queue.ids["by-hand"] = by_hand
    time.sleep(5)
    now = queue.states()
    assert now["by-hand"] == ("PENDING", "AssocGrpGRES"), now
    assert now["b4"][0] == "PENDING", now
    for key in ("a1", "a4", "b1"):
        assert now[key][0] == "RUNNING", now
        assert queue.attempts(key) == ["RUNNING"], key
    queue.release(*queue.ids)


def test_queue_names_the_job_slurm_preempts_among_mixed_victims(queue: Queue) -> None:
    """Issue 27: queue forecast the youngest victims, Slurm preempted older ones. Slurm's
    preempt/qos ranks candidates by QOS priority, then node count, then job order; here a
    1-node low job (l2) goes before another (l3), a 2-node low job submitted last (l1,
    the youngest, which the old forecast named) and over-quota work (o1)."""

    def hold(key: str, tier: str, nodes: str, gpus: int, **fields: Any) -> None:
        count = len(nodes.split(","))
        queue.submit(
            key,
            tier,
            # ignores the SIGTERM of its preemption: the victim keeps its grace time
            command=[
                "bash",
                "-c",
                f'trap "" TERM; {_WAIT_LOOP}',
                str(queue.shared / f"release-{key}"),
            ],
            resources={"nodes": count, "gpus_per_node": gpus, "time": "00:05:00", "mem": "50M"},
            sbatch_extra={"--nodelist": nodes},
            **fields,
        )

    hold("f1", "medium", "n1", 4)  # research: 4 of its 8 GPUs
    hold("f2", "medium", "n2", 4)  # research: 8 of 8
    hold("f4", "medium", "n4", 3, project="vision")  # vision: 3 of its 4
    hold("l2", "low", "n3", 1)
    hold("l3", "low", "n3", 1)
    hold("o1", "medium", "n3", 1)  # research is at 8: over-quota
    queue.wait(running={"f1", "f2", "f4", "l2", "l3", "o1"})
    hold("l1", "low", "n3,n4", 1)  # the youngest; now every GPU is held
    queue.wait(running={"l1"})
    assert queue.status("o1")["quota"] == "over-quota"

    queue.submit(
        "c", "critical", project="vision", resources={"gpus_per_node": 1, "time": "1", "mem": "50M"}
    )
    c = queue.queue_row("c")
    assert c["state"] == "PENDING", c
    assert c["why"].endswith(f"will likely preempt job {queue.ids['l2']}, grace {GRACE} s"), c
    queue.wait(running={"c"}, timeout=GRACE + 30)
    preempted = {
        k for k in ("l1", "l2", "l3", "o1") if queue.attempts(k)[0] in {"PREEMPTED", "REQUEUED"}
    }
    assert preempted == {"l2"}, {k: queue.attempts(k) for k in ("l1", "l2", "l3", "o1")}
    queue.release(*queue.ids)


_WAIT_LOOP = 'while [ ! -e "$0" ]; do sleep 0.2; done'
