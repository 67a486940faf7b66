"""The arbiter: parsing the live cluster, what a job has at stake, the decision, the loop.

Slurm's text is as 22.05 prints it on the local cluster (``scontrol show nodes
--oneliner`` recorded; squeue lines in the arbiter's format). The loop runs against a
FakeRunner whose cluster changes between passes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.scheduling.arbiter.daemon import Arbiter, ArbiterOptions, describe, read_log
from hpclaunch.scheduling.arbiter.decide import InFlight, Roles, Snapshot, decide, roles_of
from hpclaunch.scheduling.arbiter.progress import (
    DEFAULT_CKPT_WRITE,
    JobProgress,
    job_dir_of,
    read_progress,
)
from hpclaunch.slurm.cluster import (
    ClusterJob,
    NodeGpus,
    jobs_argv,
    parse_jobs,
    parse_nodes,
    parse_restarts,
)
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, result

# Recorded on the local cluster (docker/slurm-cluster, 22.05.8), n1 idle; n2 with 3 GPUs
# allocated, as AllocTRES shows them; n3 drained.
NODES = (
    "NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.68 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:4 NodeAddr=127.0.1.1 "
    "NodeHostName=n1 Port=6821 Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP "
    "PREEMPT_DYNAMIC @0  RealMemory=4000 AllocMem=0 FreeMem=21402 Sockets=8 Boards=1 "
    "State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=gpu,debug  BootTime=2026-11-23T18:07:56 SlurmdStartTime=2026-11-23T18:14:20 "
    "LastBusyTime=2026-11-23T18:14:23 CfgTRES=cpu=8,mem=4000M,billing=8,gres/gpu=4 "
    "AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s "
    "ExtSensorsWatts=0 ExtSensorsTemp=n/s\n"
    "NodeName=n2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=3 CPUEfctv=8 CPUTot=8 Gres=gpu:4 "
    "NodeAddr=127.0.1.2 State=MIXED Partitions=gpu,debug "
    "CfgTRES=cpu=8,mem=4000M,billing=8,gres/gpu=4 AllocTRES=cpu=3,mem=150M,gres/gpu=3\n"
    "NodeName=n3 Arch=x86_64 Gres=gpu:4 State=IDLE+DRAIN Partitions=gpu,debug "
    "Reason=disk full [root@2026-11-23T18:00:00] AllocTRES=\n"
)


def test_nodes_are_parsed_with_their_free_gpus() -> None:
    nodes = parse_nodes(NODES)
    assert [(n.name, n.total, n.used, n.free, n.usable) for n in nodes] == [
        ("n1", 4, 0, 4, True),
        ("n2", 4, 3, 1, True),
        ("n3", 4, 0, 0, False),  # drained: nothing new starts there
    ]
    assert nodes[0].partitions == {"gpu", "debug"}


def test_typed_gres_are_counted() -> None:
    line = (
        "NodeName=g1 Gres=gpu:a100:2(S:0),gpu:v100:2 State=MIXED "
        "AllocTRES=gres/gpu=1,gres/gpu:a100=1\n"
    )
    (node,) = parse_nodes(line)
    assert (node.total, node.used) == (4, 1)


def test_jobs_are_parsed_running_array_task_and_pending() -> None:
    out = (
        "17_2|20|alice|research-oq|low|RUNNING|None|1|2|1|N/A|N/A|gres:gpu:2|N/A|n[1-2]|"
        "2026-11-23T18:30:00|gpu|/home/alice/.hpclaunch/jobs/ab|c/job.sh\n"
        "21|21|bob|vision|high|PENDING|Resources|5000|1|1|N/A|N/A|gres:gpu:3|N/A|N/A|N/A|gpu|"
        "/home/bob/.hpclaunch/jobs/x/job.sh\n"
        "junk line\n"
    )
    running, pending = parse_jobs(out)
    assert running.job_id == "17_2"
    assert running.unique_id == "20"
    assert running.hosts == ("n1", "n2")
    assert running.gpus == 4
    assert running.running
    assert running.start is not None
    assert running.command == "/home/alice/.hpclaunch/jobs/ab|c/job.sh"  # | in the path
    assert pending.pending
    assert pending.hosts == ()
    assert pending.start is None
    assert (pending.reason, pending.priority, pending.gpus_per_node) == ("Resources", 5000, 3)
    assert jobs_argv()[-1].startswith("--Format=JobArrayID:0|,JobID:0|,")


# squeue in the arbiter's format on the local cluster (22.05.8, bench/arbiter_cluster.py
# running): pending lines have an empty node list and an expected start time.
SQUEUE = (
    "33|33|root|research-oq|low|PENDING|Resources|1|1|1|N/A|N/A|gres:gpu:4|N/A||2026-11-23T19:10:28|gpu|"
    "/root/.hpclaunch/jobs/90cea9f11ea14a6daaf87de44ddb7206/job.sbatch\n"
    "35|35|root|research|high|RUNNING|None|50000|1|1|N/A|N/A|gres:gpu:1|N/A|n1|2026-11-23T18:30:38|gpu|"
    "/root/.hpclaunch/jobs/ec873ac9a9ae45c2a618970e2cfc51e4/job.sbatch\n"
    "26|26|root|research-oq|low|RUNNING|None|1|2|1|N/A|N/A|gres:gpu:4|N/A|n[2-3]|2026-11-23T18:29:33|gpu|"
    "/root/.hpclaunch/jobs/f3801175b26d489c99a5da502ca24755/job.sbatch\n"
)


def test_recorded_squeue_lines() -> None:
    pending, high, multi = parse_jobs(SQUEUE)
    assert (pending.state, pending.reason, pending.hosts, pending.start) == (
        "PENDING",
        "Resources",
        (),
        None,  # the expected start is not a run's start
    )
    assert (high.qos, high.priority, high.hosts, high.gpus) == ("high", 50000, ("n1",), 1)
    assert high.start == datetime.fromisoformat("2026-11-23T18:30:38").timestamp()
    assert (multi.nodes, multi.hosts, multi.gpus) == (2, ("n2", "n3"), 8)
    assert job_dir_of(multi.command, multi.job_id) == Path(
        "/root/.hpclaunch/jobs/f3801175b26d489c99a5da502ca24755"
    )


# -- what a job has at stake ----------------------------------------------------------------


def _ledger(directory: Path, *events: dict[str, object]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "events.jsonl").open("a") as f:
        for event in events:
            f.write(json.dumps(event) + "\n")


def _done(directory: Path, committed_at: float, seconds: float) -> None:
    (directory / "control").mkdir(parents=True, exist_ok=True)
    (directory / "control" / "checkpoint-done.json").write_text(
        json.dumps({"step": 7, "seconds": seconds, "committed_at": committed_at})
    )


def test_progress_from_the_ledger_and_the_newest_commit(tmp_path: Path) -> None:
    _ledger(
        tmp_path,
        {"event": "attempt_start", "attempt": 0, "time": 100.0},
        {"event": "attempt_end", "attempt": 0, "reason": "preempted", "time": 150.0},
        {"event": "attempt_start", "attempt": 1, "time": 200.0},
    )
    with (tmp_path / "events.jsonl").open("a") as f:
        f.write('{"event": "attempt_end", "attem')  # torn by a node's death: skipped
    _done(tmp_path, committed_at=260.0, seconds=1.5)
    prog = read_progress(tmp_path, attempt_start=199.0)
    assert prog.supervised
    assert prog.preemptions == 1
    assert (prog.ckpt_write, prog.write_measured) == (1.5, True)
    assert prog.since_commit(now=300.0, run_start=199.0) == 40.0
    # A commit of an earlier attempt: what is lost is counted from this run's start.
    assert prog.since_commit(now=400.0, run_start=300.0) == 100.0


def test_a_resumed_job_keeps_its_measured_write_time_until_it_commits_again(
    tmp_path: Path,
) -> None:
    # The sidecar removed the done file when attempt 1 started and recorded what it held;
    # attempt 1 has not committed yet. Its write time is still the measured one, not the
    # default (which made it look dearer than a plain job: a flaky cluster check, 11-24).
    done = {"step": 40, "seconds": 0.25, "committed_at": 150.0, "reason": "preemption"}
    _ledger(
        tmp_path,
        {"event": "attempt_start", "attempt": 0, "time": 100.0},
        {"event": "checkpoint_committed", "attempt": 0, "time": 150.1, "seconds": 0.25},
        {"event": "attempt_end", "attempt": 0, "reason": "preempted", "time": 151.0},
        {
            "event": "stale_control_files",
            "attempt": 1,
            "time": 200.0,
            "files": {"x": {}, "checkpoint-done.json": done},
        },
        {"event": "attempt_start", "attempt": 1, "time": 200.0},
    )
    prog = read_progress(tmp_path, attempt_start=199.0)
    assert (prog.ckpt_write, prog.write_measured, prog.committed_at) == (0.25, True, 150.0)
    assert prog.since_commit(now=210.0, run_start=199.0) == 11.0  # this run's work only
    # Only a commit on request in the ledger (no stale record): its write time.
    other = tmp_path / "other"
    _ledger(
        other,
        {"event": "attempt_start", "attempt": 0, "time": 100.0},
        {"event": "checkpoint_committed", "attempt": 0, "time": 150.0, "seconds": 2.0},
        {"event": "attempt_start", "attempt": 1, "time": 200.0},
    )
    prog = read_progress(other, attempt_start=199.0)
    assert (prog.ckpt_write, prog.write_measured) == (2.0, True)
    # A done file of this attempt wins over the ledger.
    _done(other, committed_at=205.0, seconds=0.5)
    assert read_progress(other, attempt_start=199.0).ckpt_write == 0.5


def test_a_job_without_a_sidecar_loses_everything_since_it_started(tmp_path: Path) -> None:
    prog = read_progress(tmp_path, attempt_start=100.0)
    assert prog == JobProgress(directory=str(tmp_path))
    assert not prog.supervised
    assert prog.since_commit(now=160.0, run_start=100.0) == 60.0
    # The ledger of an earlier attempt does not make this one supervised.
    _ledger(tmp_path, {"event": "attempt_start", "attempt": 0, "time": 10.0})
    assert not read_progress(tmp_path, attempt_start=100.0).supervised


def test_job_dir_from_squeue_command_and_an_array_tasks_offset() -> None:
    # squeue %o as 22.05 prints it: the script's path, then its arguments, unquoted.
    base = "/home/a b/.hpclaunch/jobs/0123"
    assert job_dir_of(f"{base}/job.sbatch", "20") == Path(base)
    # A sweep's third array starts at point 202: task 5 runs point 207.
    assert job_dir_of(f"{base}/job.sbatch 202", "17_5") == Path(base) / "tasks" / "207"
    assert job_dir_of(f"{base}/job.sbatch 202", "20") == Path(base)  # not an array task
    assert job_dir_of("/opt/other/run.sh 1", "20") is None  # not hpclaunch's script
    assert job_dir_of(None, "20") is None
    assert job_dir_of("job.sbatch", "20") is None


# -- the decision ---------------------------------------------------------------------------

ROLES = Roles(preempting=frozenset({"critical", "high", "normal"}), grace={"low": 10.0})
NOW = 10_000.0


def _node(name: str, used: int, total: int = 4) -> NodeGpus:
    return NodeGpus(name, total, used, frozenset({"gpu"}), True)


def _job(
    job_id: str,
    qos: str,
    gpus: int,
    hosts: Sequence[str] = (),
    *,
    state: str = "RUNNING",
    reason: str | None = None,
    priority: int = 0,
    nodes: int = 1,
) -> ClusterJob:
    return ClusterJob(
        job_id=job_id,
        unique_id=job_id,
        user="u",
        account="research",
        qos=qos,
        state=state,
        reason=reason,
        priority=priority,
        nodes=nodes,
        gpus=gpus * nodes,
        hosts=tuple(hosts),
        start=NOW - 1000 if state == "RUNNING" else None,
        partition="gpu",
        command=None,
    )


def _waiting(job_id: str, gpus: int, *, qos: str = "high", **kw: object) -> ClusterJob:
    kw.setdefault("reason", "Resources")
    kw.setdefault("priority", 500)
    return _job(job_id, qos, gpus, state="PENDING", **kw)  # type: ignore[arg-type]


def _snap(jobs: Sequence[ClusterJob], nodes: Sequence[NodeGpus]) -> Snapshot:
    return Snapshot(tuple(jobs), tuple(nodes), NOW)


def _supervised(committed_ago: float, write: float = 1.0) -> JobProgress:
    return JobProgress(
        supervised=True, committed_at=NOW - committed_ago, ckpt_write=write, write_measured=True
    )


def _unsupervised() -> JobProgress:
    return JobProgress()


def test_the_victim_that_loses_least_is_asked_to_checkpoint() -> None:
    jobs = [
        _job("1", "low", 2, ["n1"]),  # no sidecar: would lose 1000 s
        _job("2", "low", 2, ["n1"]),  # sidecar: a 1 s checkpoint
        _waiting("9", 2),
    ]
    progress = {"1": _unsupervised(), "2": _supervised(600)}
    (p,) = decide(_snap(jobs, [_node("n1", 4)]), ROLES, progress, [], restart_cost=30)
    assert (p.victim, p.for_job, p.checkpoint_first, p.gpus) == ("2", "9", True, 2)
    assert p.cost == 2 * (1.0 + 30)
    assert p.grace == 10.0
    assert p.placement == {"n1": 2}
    assert "for 9" in p.why()


def test_an_exact_fit_beats_a_cheaper_victim_that_leaves_a_fragment() -> None:
    jobs = [
        _job("1", "low", 4, ["n1"]),  # frees 4 for a 2-GPU job: a fragment of 2
        _job("2", "low", 2, ["n2"]),
        _job("3", "normal", 2, ["n2"]),  # not preemptible
        _waiting("9", 2),
    ]
    # Victim 2 costs 2 x 2.5 = 5 GPU-s, victim 1 4 x 1 = 4: dearer, but within the factor
    # 1.5 an exact fit may cost more (no fragment of 2 GPUs is left on n1).
    progress = {"1": _supervised(10, write=1.0), "2": _supervised(10, write=2.5)}
    nodes = [_node("n1", 4), _node("n2", 4)]
    (p,) = decide(_snap(jobs, nodes), ROLES, progress, [], restart_cost=0)
    assert p.victim == "2"
    progress["2"] = _supervised(10, write=3.5)  # 7 > 4 x 1.5: the fragment is worth it
    (p,) = decide(_snap(jobs, nodes), ROLES, progress, [], restart_cost=0)
    assert p.victim == "1"


def test_no_victim_when_the_job_fits_and_its_gpus_are_kept_for_it() -> None:
    jobs = [
        _job("1", "low", 2, ["n1"]),
        _job("2", "low", 2, ["n2"]),
        _waiting("8", 2, priority=900),  # fits on n2's 2 free GPUs: Slurm starts it
        _waiting("9", 2, priority=500),  # needs a victim: n2's free GPUs are 8's
    ]
    nodes = [_node("n1", 4), _node("n2", 2)]
    progress = {"1": _supervised(100), "2": _supervised(5)}
    (p,) = decide(_snap(jobs, nodes), ROLES, progress, [])
    assert p.for_job == "9"


def test_a_job_whose_victims_are_stopping_gets_nothing_new() -> None:
    jobs = [_job("1", "low", 2, ["n1"]), _job("2", "low", 2, ["n1"]), _waiting("9", 2)]
    flight = InFlight("1", "9", NOW - 2, NOW + 8, NOW - 1000, {"n1": 2})
    progress = {"1": _supervised(5), "2": _supervised(5)}
    assert decide(_snap(jobs, [_node("n1", 4)]), ROLES, progress, [flight]) == []
    # A second waiting job may take the other one.
    jobs.append(_waiting("10", 2, priority=400))
    (p,) = decide(_snap(jobs, [_node("n1", 4)]), ROLES, progress, [flight])
    assert (p.victim, p.for_job) == ("2", "10")


def test_the_cap_roles_and_reasons_limit_who_is_chosen() -> None:
    nodes = [_node("n1", 4)]
    capped = {"1": JobProgress(supervised=True, preemptions=2)}
    jobs = [_job("1", "low", 4, ["n1"]), _waiting("9", 2)]  # its run started 1000 s ago
    assert decide(_snap(jobs, nodes), ROLES, capped, []) != []  # no count cap by default
    assert decide(_snap(jobs, nodes), ROLES, capped, [], max_preemptions=2) == []
    assert decide(_snap(jobs, nodes), ROLES, capped, [], max_preemptions=3) != []
    assert decide(_snap(jobs, nodes), ROLES, capped, [], min_run=1001) == []
    assert decide(_snap(jobs, nodes), ROLES, capped, [], min_run=1000) != []
    never = {"1": JobProgress(supervised=True)}  # never preempted: min_run does not apply
    assert decide(_snap(jobs, nodes), ROLES, never, [], min_run=5000) != []
    medium = [_job("1", "normal", 4, ["n1"]), _waiting("9", 2)]  # not preemptible
    assert decide(_snap(medium, nodes), ROLES, {}, []) == []
    low_waits = [_job("1", "low", 4, ["n1"]), _waiting("9", 2, qos="low")]
    assert decide(_snap(low_waits, nodes), ROLES, {}, []) == []
    for reason in ("Dependency", "AssocGrpGRES", "BeginTime"):
        held = [_job("1", "low", 4, ["n1"]), _waiting("9", 2, reason=reason)]
        assert decide(_snap(held, nodes), ROLES, {}, []) == [], reason


def test_a_slow_checkpoint_is_requeued_at_once_and_costed_as_lost_work() -> None:
    jobs = [_job("1", "low", 4, ["n1"]), _waiting("9", 4)]
    progress = {"1": _supervised(300, write=25.0)}  # 25 s write > 10 s grace
    (p,) = decide(_snap(jobs, [_node("n1", 4)]), ROLES, progress, [], restart_cost=0)
    assert not p.checkpoint_first
    assert p.cost == 4 * 300


def test_a_supervised_job_that_never_committed_is_asked_to_checkpoint() -> None:
    # Under the sidecar but before its first commit: no write time is known. Requeued at
    # once it would lose its whole run; asked, it commits (or is requeued after its grace).
    jobs = [_job("1", "low", 4, ["n1"]), _waiting("9", 4)]
    progress = {"1": JobProgress(supervised=True)}
    (p,) = decide(_snap(jobs, [_node("n1", 4)]), ROLES, progress, [], restart_cost=0)
    assert p.checkpoint_first
    assert p.cost == 4 * DEFAULT_CKPT_WRITE  # costed with the default write time
    plain = {"1": JobProgress()}  # no sidecar: requeued at once, its whole run lost
    (q,) = decide(_snap(jobs, [_node("n1", 4)]), ROLES, plain, [], restart_cost=0)
    assert not q.checkpoint_first
    assert q.cost == 4 * 1000


def test_multi_node_request_takes_victims_on_two_nodes() -> None:
    jobs = [
        _job("1", "low", 4, ["n1"]),
        _job("2", "low", 4, ["n2"]),
        _job("3", "low", 4, ["n3"]),
        _waiting("9", 4, nodes=2),
    ]
    progress = {"1": _supervised(5), "2": _supervised(5, write=9), "3": _supervised(5)}
    nodes = [_node("n1", 4), _node("n2", 4), _node("n3", 4)]
    chosen = decide(_snap(jobs, nodes), ROLES, progress, [])
    assert sorted(p.victim for p in chosen) == ["1", "3"]


def test_roles_come_from_the_site_config() -> None:
    roles = roles_of(load_site("local"))
    assert roles.preempting == {"critical", "high", "normal"}
    assert roles.grace == {"low": 10.0, "overquota": 10.0}


# -- the loop -------------------------------------------------------------------------------


class Cluster:
    """squeue/scontrol answers that the test changes between passes."""

    def __init__(self, jobs: str, nodes: str, restarts: str = "") -> None:
        self.jobs, self.nodes, self.restarts = jobs, nodes, restarts
        self.fail: set[str] = set()

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue" and any(a.startswith("--Format=JobArrayID:|,Restart") for a in argv):
            return result(argv, out=self.restarts)  # squeue -O RestartCnt
        if argv[0] == "squeue":
            return result(argv, out=self.jobs)
        if argv[:3] == ("scontrol", "show", "nodes"):
            return result(argv, out=self.nodes)
        if argv[0] in self.fail:
            return result(argv, rc=1, err=f"{argv[0]}: error: Job has already finished")
        return result(argv)


def _line(job_id: str, qos: str, state: str, gpus: int, hosts: str, start: str, cmd: str) -> str:
    reason = "Resources" if state == "PENDING" else "None"
    prio = "500" if qos == "high" else "1"
    return (
        f"{job_id}|{job_id}|alice|research|{qos}|{state}|{reason}|{prio}|1|1|N/A|N/A|gres:gpu:{gpus}|N/A|"
        f"{hosts}|{start}|gpu|{cmd}\n"
    )


@pytest.fixture
def local() -> SiteConfig:
    return load_site("local").model_copy(update={"preemption": "arbiter"})


#: The victim's start in _full_node (squeue prints the cluster's local time).
START = datetime.fromisoformat("2026-11-23T18:00:00").timestamp()


def _full_node(tmp_path: Path) -> tuple[str, str]:
    victim = tmp_path / "victim"
    _ledger(victim, {"event": "attempt_start", "attempt": 0, "time": START + 1})
    _done(victim, committed_at=START + 100, seconds=0.5)
    jobs = _line(
        "5", "low", "RUNNING", 4, "n1", "2026-11-23T18:00:00", f"{victim}/job.sbatch"
    ) + _line("6", "high", "PENDING", 2, "N/A", "N/A", "/x/job.sh")
    nodes = "NodeName=n1 Gres=gpu:4 State=ALLOCATED Partitions=gpu AllocTRES=gres/gpu=4\n"
    return jobs, nodes


def test_a_pass_signals_the_batch_step_then_forces_the_requeue_after_the_grace(
    tmp_path: Path, local: SiteConfig
) -> None:
    cluster = Cluster(*_full_node(tmp_path))
    runner = FakeRunner(cluster)
    now = [START + 600]
    log = tmp_path / "decisions.jsonl"
    arbiter = Arbiter(CliBackend(runner, local), local, log, clock=lambda: now[0])
    (p,) = arbiter.step()
    assert p.victim == "5"
    assert p.checkpoint_first
    assert runner.calls_to("scancel") == [("scancel", "--batch", "--signal=USR1", "5")]
    # One squeue + one scontrol per pass, and one squeue for the restart counts when a
    # decision is due (job 6 waits).
    assert [c[-1] for c in runner.calls_to("squeue")] == [
        jobs_argv()[-1],
        "--Format=JobArrayID:|,RestartCnt:|",
    ]
    now[0] += 5  # within the grace: nothing new
    assert arbiter.step() == []
    assert runner.calls_to("scontrol")[-1][:3] == ("scontrol", "show", "nodes")
    now[0] += 8  # grace (10 s) + slack (2 s) over, still running: requeued by force
    arbiter.step()
    assert ("scontrol", "requeue", "5") in runner.calls
    arbiter.step()  # not twice
    assert runner.calls.count(("scontrol", "requeue", "5")) == 1
    cluster.jobs = _line("6", "high", "RUNNING", 2, "n1", "2026-11-23T18:10:00", "/x/job.sh")
    arbiter.step()
    events = [e["event"] for e in read_log(log)]
    assert events == ["preempt", "forced_requeue", "released"]
    assert not arbiter.in_flight
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_a_victim_requeued_in_time_is_released_without_force(
    tmp_path: Path, local: SiteConfig
) -> None:
    jobs, nodes = _full_node(tmp_path)
    cluster = Cluster(jobs, nodes)
    runner = FakeRunner(cluster)
    now = [START + 600]
    arbiter = Arbiter(
        CliBackend(runner, local), local, tmp_path / "log.jsonl", clock=lambda: now[0]
    )
    arbiter.step()
    # The sidecar requeued it: pending again (the high job waits for the GPUs to free).
    cluster.jobs = jobs.replace("RUNNING|None", "PENDING|BeginTime")
    now[0] += 3
    arbiter.step()
    assert ("scontrol", "requeue", "5") not in runner.calls
    released = [e for e in read_log(tmp_path / "log.jsonl") if e["event"] == "released"]
    assert released[0]["after"] == 3.0


def test_a_victim_still_completing_is_not_released_before_its_gpus_are(
    tmp_path: Path, local: SiteConfig
) -> None:
    """Clean-clone run 43: a requeued victim, COMPLETING with its next start already shown,
    was released while its GPUs were still held; the next pass preempted a second job."""
    jobs, nodes = _full_node(tmp_path)
    cluster = Cluster(jobs, nodes)
    runner = FakeRunner(cluster)
    now = [START + 600]
    log = tmp_path / "log.jsonl"
    arbiter = Arbiter(CliBackend(runner, local), local, log, clock=lambda: now[0])
    arbiter.step()
    cluster.jobs = jobs.replace("RUNNING|None", "COMPLETING|None").replace(
        "2026-11-23T18:00:00", "2026-11-23T18:11:00"
    )
    now[0] += 3
    arbiter.step()
    assert [e["event"] for e in read_log(log)] == ["preempt"]  # still stopping: held
    assert "5" in arbiter.in_flight
    cluster.jobs = jobs.replace("RUNNING|None", "PENDING|BeginTime")
    now[0] += 1
    arbiter.step()
    assert [e["event"] for e in read_log(log)] == ["preempt", "released"]


def test_dry_run_logs_each_decision_once_and_acts_on_nothing(
    tmp_path: Path, local: SiteConfig
) -> None:
    runner = FakeRunner(Cluster(*_full_node(tmp_path)))
    now = [START + 600]
    log = tmp_path / "log.jsonl"
    arbiter = Arbiter(
        CliBackend(runner, local), local, log, ArbiterOptions(dry_run=True), clock=lambda: now[0]
    )
    for _ in range(4):
        arbiter.step()
        now[0] += 10
    assert runner.calls_to("scancel") == []
    assert ("scontrol", "requeue", "5") not in runner.calls
    events = read_log(log)
    assert [e["event"] for e in events] == ["preempt"]
    assert events[0]["dry_run"] is True
    assert "for 6" in events[0]["why"]


def test_a_failed_action_is_logged(tmp_path: Path, local: SiteConfig) -> None:
    cluster = Cluster(*_full_node(tmp_path))
    cluster.fail.add("scancel")
    arbiter = Arbiter(CliBackend(FakeRunner(cluster), local), local, tmp_path / "log.jsonl")
    arbiter.step()
    failed = [e for e in read_log(tmp_path / "log.jsonl") if e["event"] == "action_failed"]
    assert failed
    assert "already finished" in failed[0]["why"]


def test_the_cli_refuses_a_site_where_slurm_preempts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hpclaunch.cli import cli

    env = {"XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    out = CliRunner().invoke(cli, ["--site", "local", "arbiter", "--once"], env=env)
    assert out.exit_code == 2, out.output
    assert "preemption: arbiter" in out.output
    assert "--dry-run" in out.output


def test_the_library_refuses_it_too_but_a_dry_run(tmp_path: Path) -> None:
    """The guard is the library's (``Session.arbiter``), not only the CLI's."""
    import hpclaunch
    from hpclaunch.errors import ConfigError
    from hpclaunch.scheduling.arbiter.daemon import ArbiterOptions

    runner = FakeRunner(lambda argv: result(argv))
    slurm_site = hpclaunch.Session(site="local", runner=runner)
    with pytest.raises(ConfigError, match="leaves preemption to Slurm"):
        slurm_site.arbiter()
    watching = slurm_site.arbiter(ArbiterOptions(dry_run=True), log_path=tmp_path / "a.jsonl")
    assert watching.options.dry_run
    assert watching.log_path == tmp_path / "a.jsonl"


def test_slurms_restart_count_protects_a_job_a_new_daemon_never_preempted(
    tmp_path: Path, local: SiteConfig
) -> None:
    # Job 5 (no sidecar) was requeued before this daemon started: only Slurm knows. Its new
    # run is 30 s old, under min_run (300 s): left alone; job 4, never restarted, is taken.
    plain = _line("5", "low", "RUNNING", 2, "n1", "2026-11-23T18:10:00", "/x/plain.sh")
    other = _line("4", "low", "RUNNING", 2, "n1", "2026-11-23T18:00:00", "/x/plain.sh")
    waiting = _line("6", "high", "PENDING", 2, "N/A", "N/A", "/x/job.sh")
    nodes = "NodeName=n1 Gres=gpu:4 State=ALLOCATED Partitions=gpu AllocTRES=gres/gpu=4\n"
    # squeue -O "JobArrayID:|,RestartCnt:|" as 22.05.8 prints it.
    cluster = Cluster(plain + other + waiting, nodes, restarts="5|1|\n4|0|\n")
    now = [START + 10 * 60 + 30]
    arbiter = Arbiter(
        CliBackend(FakeRunner(cluster), local), local, tmp_path / "log.jsonl", clock=lambda: now[0]
    )
    (chosen,) = arbiter.step()
    assert (chosen.victim, chosen.preemptions) == ("4", 0)
    # Nobody waits any more: a pass costs no restart count query.
    cluster.jobs = plain + other
    runner = FakeRunner(cluster)
    idle = Arbiter(CliBackend(runner, local), local, tmp_path / "log2.jsonl", clock=lambda: now[0])
    assert idle.step() == []
    assert len(runner.calls_to("squeue")) == 1


def test_restart_counts_are_parsed_from_squeue_format() -> None:
    assert parse_restarts("6692|0|\n17_3|2|\nJOBID|RESTART_COUNT|\n\n") == {
        "6692": 0,
        "17_3": 2,
    }


def test_a_plain_job_this_daemon_requeued_is_protected_for_min_run(
    tmp_path: Path, local: SiteConfig
) -> None:
    # Job 5 has no sidecar (no ledger): only the arbiter knows it preempted it.
    plain = _line("5", "low", "RUNNING", 4, "n1", "2026-11-23T18:00:00", "/x/plain.sh")
    waiting = _line("6", "high", "PENDING", 2, "N/A", "N/A", "/x/job.sh")
    nodes = "NodeName=n1 Gres=gpu:4 State=ALLOCATED Partitions=gpu AllocTRES=gres/gpu=4\n"
    cluster = Cluster(plain + waiting, nodes)
    runner = FakeRunner(cluster)
    now = [START + 600]
    arbiter = Arbiter(
        CliBackend(runner, local), local, tmp_path / "log.jsonl", clock=lambda: now[0]
    )
    (first,) = arbiter.step()
    assert (first.victim, first.checkpoint_first) == ("5", False)  # requeued at once
    # Back 60 s later on the same node, job 6 ran and ended, job 7 waits: 5's new run is
    # 30 s old, under min_run (300 s), so it is left alone until then.
    restarted = plain.replace("18:00:00", "18:11:00")
    cluster.jobs = restarted + _line("7", "high", "PENDING", 2, "N/A", "N/A", "/x/job.sh")
    now[0] = START + 11 * 60 + 30
    assert arbiter.step() == []
    now[0] = START + 11 * 60 + 300
    (second,) = arbiter.step()
    assert (second.victim, second.for_job, second.preemptions) == ("5", "7", 1)
    assert arbiter.preempted == {"5": 2}


def test_an_elastic_victim_is_shrunk_to_what_the_waiting_job_leaves() -> None:
    jobs = [
        _job("1", "low", 4, ["n1", "n2", "n3", "n4"], nodes=4),  # elastic: 2 or 4 nodes
        _job("2", "low", 4, ["n5"]),  # rigid
        _waiting("9", 4, nodes=2, qos="critical"),
    ]
    elastic = replace(_supervised(5), elastic_nodes=(2, 4))
    progress = {"1": elastic, "2": _supervised(5, write=50)}  # 2's write costs more
    nodes = [_node(f"n{i}", 4) for i in range(1, 6)]
    (p,) = decide(_snap(jobs, nodes), ROLES, progress, [])
    assert (p.victim, p.resize_to) == ("1", 2)
    assert "shrunk to 2 node(s)" in p.why()
    # Rigid, it is evicted (with job 2: choose_victims' cheapest two nodes).
    rigid = decide(_snap(jobs, nodes), ROLES, {**progress, "1": _supervised(5)}, [])
    assert sorted((c.victim, c.resize_to) for c in rigid) == [("1", None), ("2", None)]
    # No shrink alone makes room for 3 nodes: both go, and job 1 keeps the 2 nodes left.
    wide = [*jobs[:2], _waiting("9", 4, nodes=3, qos="critical")]
    chosen = decide(_snap(wide, nodes), ROLES, progress, [])
    assert sorted((c.victim, c.resize_to) for c in chosen) == [("1", 2), ("2", None)]
    # 4 nodes leave it 1, not one of its sizes: evicted.
    widest = [*jobs[:2], _waiting("9", 4, nodes=4, qos="critical")]
    chosen = decide(_snap(widest, nodes), ROLES, progress, [])
    assert sorted((c.victim, c.resize_to) for c in chosen) == [("1", None), ("2", None)]


def test_a_shrink_is_asked_of_the_sidecar_through_its_control_directory(
    tmp_path: Path, local: SiteConfig
) -> None:
    victim = tmp_path / "victim"
    _ledger(victim, {"event": "attempt_start", "attempt": 0, "time": START + 1})
    _done(victim, committed_at=START + 100, seconds=0.5)
    (victim / "job.sbatch").write_text(
        '#!/bin/bash\nexport HPCLAUNCH_ELASTIC=\'{"nodes":[1,2],"global_batch":8}\'\n'
    )
    jobs = _line(
        "5", "low", "RUNNING", 2, "n[1-2]", "2026-11-23T18:00:00", f"{victim}/job.sbatch"
    ).replace("|1|1|N/A|", "|2|2|N/A|") + _line("6", "high", "PENDING", 4, "N/A", "N/A", "/x/j")
    nodes = (
        "NodeName=n1 Gres=gpu:4 State=MIXED Partitions=gpu AllocTRES=gres/gpu=2\n"
        "NodeName=n2 Gres=gpu:4 State=MIXED Partitions=gpu AllocTRES=gres/gpu=2\n"
    )
    runner = FakeRunner(Cluster(jobs, nodes))
    log = tmp_path / "decisions.jsonl"
    arbiter = Arbiter(CliBackend(runner, local), local, log, clock=lambda: START + 600)
    (p,) = arbiter.step()
    assert (p.victim, p.resize_to) == ("5", 1)
    request = json.loads((victim / "control" / "resize-request.json").read_text())
    assert (request["nodes"], request["force"], request["by"]) == (1, True, "arbiter")
    assert runner.calls_to("scancel") == []  # no preemption signal
    (event,) = read_log(log)
    assert event["event"] == "shrink"
    assert describe(event).startswith("shrink to 1 node(s): 5 (4 GPU")


def test_an_elastic_job_grows_into_idle_gpus_when_nobody_waits() -> None:
    from hpclaunch.scheduling.arbiter.decide import decide_growth

    jobs = [_job("1", "low", 4, ["n1", "n2"], nodes=2)]
    nodes = [_node("n1", 4), _node("n2", 4), _node("n3", 0), _node("n4", 0)]
    elastic = {"1": replace(_supervised(5), elastic_nodes=(1, 2, 4), elastic_interval=600)}
    grow = decide_growth(_snap(jobs, nodes), elastic, [])
    assert grow is not None
    assert (grow.job_id, grow.from_nodes, grow.to_nodes) == ("1", 2, 4)
    # Not while a job waits for GPUs, nor within min_interval of its start (it ran 1000 s).
    waiting = [*jobs, _waiting("9", 1, qos="low")]
    assert decide_growth(_snap(waiting, nodes), elastic, []) is None
    soon = {"1": replace(elastic["1"], elastic_interval=2000)}
    assert decide_growth(_snap(jobs, nodes), soon, []) is None
    # Only 1 idle node: 3 is not one of its sizes.
    busy = [*jobs, _job("2", "low", 4, ["n4"])]
    assert decide_growth(_snap(busy, [*nodes[:3], _node("n4", 4)]), elastic, []) is None


def test_a_growth_that_saves_less_than_its_cost_is_not_made() -> None:
    from hpclaunch.scheduling.arbiter.decide import decide_growth

    jobs = [_job("1", "low", 4, ["n1", "n2"], nodes=2)]  # ran 1000 s at 2 nodes
    nodes = [_node("n1", 4), _node("n2", 4), _node("n3", 0), _node("n4", 0)]
    base = replace(_supervised(5, write=10), elastic_nodes=(2, 4), elastic_interval=600)
    # 100 s left to its limit at 2 nodes: 50 s at 4, + 10 s write + 30 s restart = 90 < 100.
    worth = {"1": replace(base, time_limit=1100.0)}
    assert decide_growth(_snap(jobs, nodes), worth, [], restart_cost=30.0) is not None
    # 70 s left: 35 + 40 = 75 > 70: it would end later for the restart.
    late = {"1": replace(base, time_limit=1070.0)}
    assert decide_growth(_snap(jobs, nodes), late, [], restart_cost=30.0) is None


def test_a_pending_elastic_job_starts_at_the_largest_of_its_sizes_that_fits() -> None:
    from hpclaunch.scheduling.arbiter.decide import decide_small_start

    nodes = [_node("n1", 4), _node("n2", 4), _node("n3", 0), _node("n4", 0)]
    running = [_job("1", "low", 4, ["n1", "n2"], nodes=2)]
    wants_4 = _waiting("5", 4, nodes=4, qos="low", priority=10)
    elastic = {"5": replace(_unsupervised(), elastic_nodes=(1, 2, 4))}
    small = decide_small_start(_snap([*running, wants_4], nodes), ROLES, elastic, [])
    assert small is not None
    assert (small.job_id, small.from_nodes, small.to_nodes) == ("5", 4, 2)
    assert "starts on 2 of its 4 node(s)" in small.why()
    # Not a rigid job; not while a critical job waits for GPUs (they are its), nor while a
    # preemption or resize is under way.
    assert decide_small_start(_snap([*running, wants_4], nodes), ROLES, {}, []) is None
    critical = _waiting("9", 4, nodes=1, qos="critical", priority=900)
    snap = _snap([*running, wants_4, critical], nodes)
    assert decide_small_start(snap, ROLES, elastic, []) is None
    flight = InFlight("1", "1", NOW, float("inf"), NOW - 100, {"n1": 4})
    assert decide_small_start(_snap([*running, wants_4], nodes), ROLES, elastic, [flight]) is None
    # One idle node holds only size 1; a size list without it leaves the job waiting.
    one_free = [_node("n1", 4), _node("n2", 4), _node("n3", 4), _node("n4", 0)]
    small = decide_small_start(_snap([*running, wants_4], one_free), ROLES, elastic, [])
    assert small is not None
    assert small.to_nodes == 1
    only_2 = {"5": replace(elastic["5"], elastic_nodes=(2, 4))}
    assert decide_small_start(_snap([*running, wants_4], one_free), ROLES, only_2, []) is None


def test_the_arbiter_updates_a_pending_elastic_job_to_the_size_that_fits(
    tmp_path: Path, local: SiteConfig
) -> None:
    job_dir = tmp_path / "pending"
    job_dir.mkdir()
    (job_dir / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --time=00:10:00\n"
        'export HPCLAUNCH_ELASTIC=\'{"nodes":[1,2],"global_batch":8}\'\n'
    )
    jobs = _line("5", "low", "RUNNING", 4, "n1", "2026-11-23T18:00:00", "/x/job.sbatch") + _line(
        "6", "low", "PENDING", 4, "N/A", "N/A", f"{job_dir}/job.sbatch"
    ).replace("|1|1|N/A|", "|2|2|N/A|")
    nodes = (
        "NodeName=n1 Gres=gpu:4 State=ALLOCATED Partitions=gpu AllocTRES=gres/gpu=4\n"
        "NodeName=n2 Gres=gpu:4 State=IDLE Partitions=gpu AllocTRES=\n"
    )
    prog = read_progress(job_dir, None)
    assert (prog.elastic_nodes, prog.time_limit) == ((1, 2), 600)  # from the script
    runner = FakeRunner(Cluster(jobs, nodes))
    log = tmp_path / "decisions.jsonl"
    arbiter = Arbiter(CliBackend(runner, local), local, log, clock=lambda: START + 600)
    assert arbiter.step() == []
    (event,) = read_log(log)
    assert (event["event"], event["job"], event["to_nodes"]) == ("start_small", "6", 1)
    assert describe(event).startswith("start small: 6 starts on 1 of its 2 node(s)")
    (update,) = [c for c in runner.calls_to("scontrol") if c[1] == "update"]
    assert update[:3] == ("scontrol", "update", "JobId=6")
    assert "NumNodes=1-1" in update


def test_a_growth_is_no_preemption_a_shrink_is(tmp_path: Path) -> None:
    """A job that grew must not be protected for min_run (a critical job would wait for
    its whim: seen on the cluster); one that was shrunk is, as after a preemption."""
    _ledger(
        tmp_path,
        {"event": "attempt_start", "attempt": 0, "time": 100.0},
        {"event": "attempt_end", "reason": "resized", "from_nodes": 2, "to_nodes": 4},
        {"event": "attempt_start", "attempt": 1, "time": 150.0},
    )
    grown = read_progress(tmp_path, attempt_start=150.0)
    assert (grown.preemptions, grown.growths) == (0, 1)
    _ledger(
        tmp_path,
        {"event": "attempt_end", "reason": "resized", "from_nodes": 4, "to_nodes": 2},
        {"event": "attempt_start", "attempt": 2, "time": 200.0},
    )
    shrunk = read_progress(tmp_path, attempt_start=200.0)
    assert (shrunk.preemptions, shrunk.growths) == (1, 1)


def test_a_growth_counts_the_speeds_the_job_measured_at_both_sizes(tmp_path: Path) -> None:
    from hpclaunch.scheduling.arbiter.decide import decide_growth

    _ledger(
        tmp_path,
        {
            "event": "attempt_end",
            "reason": "resized",
            "from_nodes": 4,
            "to_nodes": 2,
            "world_size": 4,
            "samples_per_s": 120.0,
        },
        {
            "event": "attempt_end",
            "reason": "resized",
            "from_nodes": 2,
            "to_nodes": 4,
            "world_size": 2,
            "samples_per_s": 100.0,
        },
    )
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --time=00:20:00\n"
        'export HPCLAUNCH_ELASTIC=\'{"nodes":[2,4],"ranks_per_node":1,"min_interval":60}\'\n'
    )
    prog = read_progress(tmp_path, None)
    assert prog.speeds == {4: 120.0, 2: 100.0}
    jobs = [_job("1", "low", 4, ["n1", "n2"], nodes=2)]  # ran 1000 s of its 1,200
    nodes = [_node("n1", 4), _node("n2", 4), _node("n3", 0), _node("n4", 0)]
    measured = {"1": replace(prog, ckpt_write=10.0)}
    # 200 s left at 2 nodes: 4 nodes run only 1.2x faster here: 167 s + 40 s > 200 s.
    assert decide_growth(_snap(jobs, nodes), measured, [], restart_cost=30.0) is None
    # Linear speeds (nothing measured) would have grown it: 100 s + 40 s < 200 s.
    linear = {"1": replace(prog, ckpt_write=10.0, speeds={})}
    assert decide_growth(_snap(jobs, nodes), linear, [], restart_cost=30.0) is not None


def test_the_running_attempts_speed_and_the_service_its_ledger_counts(tmp_path: Path) -> None:
    """Issue 49: the LAS pass learns a size's speed while the job runs there (its
    progress file), and counts the node-seconds its ended attempts held."""
    _ledger(
        tmp_path,
        {"event": "attempt_start", "attempt": 0, "time": 100.0, "nodes": ["n1", "n2"]},
        {"event": "attempt_end", "attempt": 0, "time": 160.0, "world_size": 2,
         "samples_per_s": 50.0, "reason": "resized", "from_nodes": 2, "to_nodes": 4},
        {"event": "attempt_start", "attempt": 1, "time": 170.0, "nodes": ["n1", "n2", "n3", "n4"]},
    )  # fmt: skip
    control = tmp_path / "control"
    control.mkdir(exist_ok=True)
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\n"
        'export HPCLAUNCH_ELASTIC=\'{"nodes":[2,4],"ranks_per_node":1,"batch":"linear"}\'\n'
    )
    stale = {"attempt": 0, "world_size": 2, "samples_per_s": 40.0}
    (control / "progress.json").write_text(json.dumps(stale))
    prog = read_progress(tmp_path, 170.0)
    assert prog.speeds == {2: 50.0}  # the earlier attempt's file is not this one's
    assert prog.served == 60.0 * 2
    assert prog.batch == "linear"
    running = {"attempt": 1, "world_size": 4, "samples_per_s": 90.0}
    (control / "progress.json").write_text(json.dumps(running))
    assert read_progress(tmp_path, 170.0).speeds == {2: 50.0, 4: 90.0}
