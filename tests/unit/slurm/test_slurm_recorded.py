"""hpclaunch's parsers on what each supported Slurm release really printed.

tests/unit/data/slurm-<release>/commands.json holds every command hpclaunch ran against the
4-node test cluster of that release, with its output, recorded by scripts/record-slurm
(which runs hpclaunch's own code against the cluster). Here the same code runs again,
answered from the recording: every parse is of real output, never of an imitation.

What differs between releases and is read right here (each also said where it is parsed):
squeue's exit code ("768" in 22.05, "3:0" from 24.11), typed GRES in squeue %b
("gres:gpu:4" vs "gres/gpu:4"), "(null)" for unset plugins, Debian's "slurm-wlm" version
string, and PreemptParameters (printed from 24.11 on).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import load_site
from hpclaunch.report.attempts import summarise_attempts
from hpclaunch.report.usage import summarise_usage
from hpclaunch.slurm.accounting import read_live
from hpclaunch.slurm.capabilities import discover, slurm_release
from hpclaunch.slurm.cluster import (
    jobs_argv,
    nodes_argv,
    parse_jobs,
    parse_nodes,
    parse_restarts,
    restarts_argv,
)
from hpclaunch.slurm.estimate import parse_test_only, will_run_argv
from hpclaunch.slurm.jobs import JobState
from hpclaunch.slurm.limits import parse_submit_limits, submit_limits_argv
from hpclaunch.slurm.queue import parse_queue, queue_argv
from hpclaunch.slurm.times import parse_elapsed
from hpclaunch.slurm.usage import cost_argv, parse_usage
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, result

DATA = Path(__file__).parents[1] / "data"
SUPPORTED = ["22.05", "24.11", "25.11", "26.05"]
RECORDED = sorted(p.parent.name.removeprefix("slurm-") for p in DATA.glob("slurm-*/commands.json"))


class Recording:
    """One release's recording, and a runner that answers from it (exact argv only)."""

    def __init__(self, release: str) -> None:
        self.data: dict[str, Any] = json.loads(
            (DATA / f"slurm-{release}" / "commands.json").read_text()
        )
        self.release = release
        self.jobs: dict[str, str] = self.data["jobs"]
        self.answers = {tuple(c["argv"]): c for c in self.data["commands"]}

    def runner(self) -> FakeRunner:
        def answer(argv: tuple[str, ...]) -> CommandResult:
            found = self.answers.get(argv)
            if found is None:
                raise AssertionError(f"not recorded for Slurm {self.release}: {argv}")
            return result(argv, found["returncode"], found["stdout"], found["stderr"])

        return FakeRunner(answer)

    def require(self, argv: list[str]) -> None:
        """Skip, saying so, where this release was recorded before hpclaunch asked ``argv``
        (a new or changed call, until the release is recorded again)."""
        if tuple(argv) not in self.answers:
            pytest.skip(
                f"Slurm {self.release} was recorded before this call ({' '.join(argv[:4])} "
                f"...): run scripts/record-slurm on a {self.release} cluster"
            )

    def labelled(self, label: str) -> dict[str, Any]:
        """The command recorded under ``label`` (one whose stdin set it apart)."""
        found = [c for c in self.data["commands"] if c.get("label") == label]
        if not found:
            pytest.skip(
                f"Slurm {self.release} was recorded before {label!r}: run scripts/record-slurm "
                f"on a {self.release} cluster"
            )
        return found[0]

    def stdout(self, argv: list[str]) -> str:
        out = self.answers[tuple(argv)]["stdout"]
        assert isinstance(out, str)
        return out


@pytest.fixture(params=RECORDED)
def rec(request: pytest.FixtureRequest) -> Recording:
    return Recording(request.param)


def test_every_supported_release_is_recorded() -> None:
    assert RECORDED == SUPPORTED


def test_discovery(rec: Recording) -> None:
    caps = discover(rec.runner(), now=lambda: 1.0)
    version = rec.data["slurm_version"]
    assert slurm_release(version) == tuple(int(x) for x in rec.release.split("."))
    assert (caps.slurm_version, caps.client_version) == (version, version)
    assert (caps.cluster, caps.preempt_type, caps.preempt_mode) == (
        "hpclaunch",
        "preempt/qos",
        "REQUEUE",
    )
    # 22.05: SlurmctldParameters=preempt_send_user_signal; 23.11+: PreemptParameters
    # (docker/slurm-cluster/etc/23.11+/slurm.conf), each what its slurm.conf(5) documents.
    assert caps.signals_at_preemption
    spelled = caps.preempt_parameters if caps.version >= (24, 11) else caps.slurmctld_parameters
    assert any("send_user_signal" in p for p in spelled)
    assert [(p.name, p.default, p.max_time) for p in caps.partitions] == [
        ("gpu", True, 3600),
        ("debug", False, 600),
    ]
    assert {n.name for n in caps.nodes} == {"n1", "n2", "n3", "n4"}
    # sinfo -N lists a node's partitions in no fixed order (22.05's recording: n1 debug
    # first, n2 gpu first); discovery puts them in slurm.conf's partition order.
    assert {n.partitions for n in caps.nodes} == {("gpu", "debug")}
    assert all(g.count == 4 for n in caps.nodes for g in n.gres)
    assert caps.accounting_problem is None
    assert {"low", "normal", "high", "critical", "overquota"} <= {q.name for q in caps.qos or ()}
    assert caps.default_account == "research"


def test_status_of_every_kind_of_job(rec: Recording) -> None:
    backend = CliBackend(rec.runner(), load_site("local"))
    refs = [JobRef(i) for i in rec.data["status_refs"]]
    infos = {ref.job_id: info for ref, info in backend.status(refs).items()}
    jobs = rec.jobs
    failed = infos[jobs["failed"]]
    assert (failed.state, failed.exit_code) == (JobState.FAILED, 3)  # "768" or "3:0"
    assert (infos[jobs["completed"]].state, infos[jobs["completed"]].exit_code) == (
        JobState.COMPLETED,
        0,
    )
    assert infos[jobs["running"]].state == JobState.RUNNING
    assert infos[jobs["running"]].gpus == 8
    assert infos[jobs["pending"]].state == JobState.PENDING
    assert infos[jobs["cancelled"]].state == JobState.CANCELLED
    requeued = infos[jobs["requeued"]]
    assert (requeued.state, requeued.restarts) == (JobState.COMPLETED, 1)
    assert infos[jobs["array"]].state == JobState.COMPLETED
    for task in range(3):
        assert infos[f"{jobs['array']}_{task}"].state == JobState.COMPLETED


def test_attempts_of_a_requeued_job(rec: Recording) -> None:
    backend = CliBackend(rec.runner(), load_site("local"))
    attempts = backend.attempts(JobRef(rec.jobs["requeued"]))
    assert [a.state for a in attempts] == [JobState.REQUEUED, JobState.COMPLETED]


def test_a_requeued_jobs_attempts_as_its_report_shows_them(rec: Recording) -> None:
    backend = CliBackend(rec.runner(), load_site("local"))
    attempts = backend.attempts(JobRef(rec.jobs["requeued"]))
    done_id = rec.jobs["requeued"]
    first, second = summarise_attempts(attempts)
    # The second attempt waited from the first one's end (the requeue) to its own start.
    start, end = (datetime.fromisoformat(t or "") for t in (second.start, first.end))
    assert second.queued_s == (start - end).total_seconds() >= 0
    assert (first.state, second.state) == ("REQUEUED", "COMPLETED")
    for attempt in (first, second):  # sacct's Elapsed, as its Start and End say
        begun, ended = (datetime.fromisoformat(t or "") for t in (attempt.start, attempt.end))
        assert attempt.ran_s == (ended - begun).total_seconds()
    assert None not in (first.queued_s, first.nodes, second.nodes)
    # What the completed run was given and used (sbatch --time=5 --mem=50M; it burns CPU for
    # about a second, memory sampled every second: on 26.05 it ended before the first sample
    # and within its first second, so sacct has no memory figure and an Elapsed of 0).
    done = attempts[-1]
    assert (done.time_limit, done.cpus) == (300, 1)
    assert "mem=50M" in (done.tres or "")
    assert done.cpu_seconds is not None
    assert done.cpu_seconds > 0
    argv = [
        c["argv"]
        for c in rec.data["commands"]
        if "--format=JobID,State,ExitCode,Submit" in " ".join(c["argv"])
    ]
    raw = rec.stdout(argv[0]).splitlines()
    after = raw[max(i for i, line in enumerate(raw) if line.startswith(f"{done_id}|")) :]
    sampled = [int(m.group(1)) * 1024 for line in after if (m := re.search(r"mem=(\d+)K", line))]
    assert done.mem_peak == (max(sampled) if sampled else None)
    use = summarise_usage(attempts)
    assert use is not None
    assert use.mem_asked == 50 << 20
    assert use.time_limit == 300
    assert use.mem_peak == done.mem_peak
    if parse_elapsed(done.elapsed):
        assert use.cpu_efficiency is not None
        assert 0 < use.cpu_efficiency <= 1
    else:
        assert use.cpu_efficiency is None  # no CPU time was offered
    # A run Slurm started after the job had ended shows as such (sidecar's restart_refused).
    ledger = [
        {"event": "attempt_end", "attempt": 0, "reason": "success"},
        {"event": "restart_refused", "attempt": 1, "after_attempt": 0},
    ]
    assert [a.ended for a in summarise_attempts(attempts, ledger)] == [
        "success",
        "restart_refused",
    ]


def test_start_estimates_from_sbatch_test_only(rec: Recording) -> None:
    """A CPU job that fits now, one that waits for busy GPUs, and a critical one that would
    start by preempting the over-quota jobs (scripts/record-slurm's TEST_ONLY)."""
    found = {}
    for label in ("now", "later", "preempting"):
        said = rec.labelled(f"test-only-{label}")
        assert said["argv"] == will_run_argv()
        assert said["returncode"] == 0, said["stderr"]
        estimate = parse_test_only(said["stderr"])
        assert estimate is not None, said["stderr"]
        assert estimate.cpus >= 1
        assert estimate.partition == "gpu"
        found[label] = estimate
    recorded = datetime.fromisoformat(rec.data["recorded"]).replace(tzinfo=None)
    starts = {k: datetime.fromisoformat(e.start) for k, e in found.items()}
    # Within the running jobs' 5-minute limits (25.11 put the CPU job 3 minutes out).
    assert -60 < (starts["now"] - recorded).total_seconds() < 6 * 60
    assert starts["later"] > starts["now"]  # behind the running jobs' GPUs
    assert found["later"].nodes.startswith("n")
    over_quota = {rec.jobs[k] for k in rec.jobs if k.startswith("gpu-") and k.endswith("running")}
    assert found["preempting"].preempts
    assert set(found["preempting"].preempts) <= over_quota
    assert not found["now"].preempts


def test_queue(rec: Recording) -> None:
    rec.require(queue_argv())
    rows = {r.job_id: r for r in parse_queue(rec.stdout(queue_argv()))}
    running, pending = rows[rec.jobs["running"]], rows[rec.jobs["pending"]]
    assert (running.state, running.nodes, running.gpus) == ("RUNNING", 2, 8)
    assert (pending.state, pending.nodes, pending.gpus) == ("PENDING", 3, 12)
    assert (running.account, running.qos) == ("research", "normal")
    # When it started, and when the scheduler (backfill) expects the pending one to start:
    # after the running job's time limit, which holds the GPUs it needs.
    assert running.start is not None
    assert pending.start is not None
    assert datetime.fromisoformat(pending.start) > datetime.fromisoformat(running.start)


def test_arbiter_snapshot(rec: Recording) -> None:
    rec.require(jobs_argv())
    jobs = {j.job_id: j for j in parse_jobs(rec.stdout(jobs_argv()))}
    running = jobs[rec.jobs["running"]]
    assert (running.state, running.gpus_per_node, running.hosts) == ("RUNNING", 4, ("n1", "n2"))
    assert running.start is not None
    nodes = {n.name: n for n in parse_nodes(rec.stdout(nodes_argv()))}
    assert {name: (n.total, n.used) for name, n in nodes.items() if name in ("n1", "n2")} == {
        "n1": (4, 4),
        "n2": (4, 4),
    }
    assert parse_restarts(rec.stdout(restarts_argv()))[rec.jobs["running"]] == 0


def test_cost(rec: Recording) -> None:
    since, until = (datetime.fromisoformat(t) for t in rec.data["cost_window"])
    usage = parse_usage(rec.stdout(cost_argv(since, until, all_users=True)))
    by_id = {u.job_id: u for u in usage}
    assert by_id[rec.jobs["running"]].gpus == 8
    assert [u.state for u in usage if u.job_id == rec.jobs["requeued"]] == ["REQUEUED", "COMPLETED"]


def test_accounting_read_for_site_plan(rec: Recording) -> None:
    from hpclaunch.slurm.accounting import QOS_FORMAT

    rec.require(["sacctmgr", "-n", "-P", "show", "qos", f"format={QOS_FORMAT}"])
    live = read_live(rec.runner(), "hpclaunch")
    qos = {q.name: q for q in live.qos}
    assert qos["low"].preempt_mode == "requeue"
    assert qos["critical"].priority == 1000
    assert {"research", "vision", "research-oq", "vision-oq"} <= {a.name for a in live.accounts}


def test_what_the_sidecar_reads_from_scontrol_show_job(rec: Recording) -> None:
    from hpclaunch.slurm.live_job import parse_show_job, show_job_argv
    from hpclaunch.supervise.requeue import slurm_restarts

    running = rec.jobs["running"]
    assert slurm_restarts(rec.runner(), running) == 0
    shown = rec.stdout(show_job_argv(running))
    assert re.search(r"\bPreemptTime=None\b", shown)  # printed, and not being preempted
    job = parse_show_job(shown)
    assert (job.restarts, job.preempting, job.failed_node, job.at_time_limit) == (
        0,
        False,
        None,
        False,
    )
    assert (job.nodes, job.tasks, job.cpus) == (2, 2, 2)  # rec-running: -N2, a task a node


def test_the_requeue_delay_a_retry_waits_at_least(rec: Recording) -> None:
    """The test cluster sets AuthInfo=cred_expire=10 (docker/slurm-cluster/etc): slurmctld
    keeps a requeued job 11 s from starting, in every release."""
    from hpclaunch.supervise.requeue import slurm_requeue_delay

    assert slurm_requeue_delay(rec.runner()) == 11


#: The GPUs of each way of asking for them that scripts/record-slurm submits (GPU_STYLES):
#: --gres=gpu:1, --gpus=2, --gpus-per-node=1, -n2 --gpus-per-task=1, -N2 --gpus-per-node=1.
STYLE_GPUS = {"gres": 1, "gpus": 2, "per-node": 1, "per-task": 2, "two-nodes": 2}


def test_gpus_are_counted_however_a_job_asked_for_them(rec: Recording) -> None:
    rec.require(queue_argv())
    rows = {r.job_id: r for r in parse_queue(rec.stdout(queue_argv()))}
    jobs = {j.job_id: j for j in parse_jobs(rec.stdout(jobs_argv()))}
    for style, gpus in STYLE_GPUS.items():
        for state in ("RUNNING", "PENDING"):
            job_id = rec.jobs[f"gpu-{style}-{state.lower()}"]
            assert (rows[job_id].state, rows[job_id].gpus) == (state, gpus), (style, rows[job_id])
            assert (jobs[job_id].state, jobs[job_id].gpus) == (state, gpus), (style, jobs[job_id])


def test_queue_why_from_sprio_and_sshare(
    rec: Recording, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A low-tier job of vision waits behind research's normal-QOS job: `queue --why`
    reads both jobs' factors (sprio), the weights (sprio -w) and the standing (sshare)."""
    from hpclaunch.ops.context import Context
    from hpclaunch.ops.queue_why import why_waiting
    from hpclaunch.slurm.priority import sprio_argv

    rec.require(sprio_argv())
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # no history of our own
    context = Context(site="local", warn=lambda text: None)
    context.__dict__["backend"] = CliBackend(rec.runner(), load_site("local"))
    why = why_waiting(context, rec.jobs["pending-low"])
    assert why.priority is not None
    assert (why.priority.job_id, why.priority.user) == (rec.jobs["pending-low"], "root")
    assert (why.job.row.account, why.job.row.qos) == ("vision-oq", "low")
    research = next(a for a in why.ahead if a.entry.row.job_id == rec.jobs["pending"])
    assert research.priority is not None
    assert research.priority.partition == "gpu"
    assert (research.entry.row.account, research.entry.row.qos) == ("research", "normal")
    assert research.priority.priority > why.priority.priority
    # QOS weight 100000 (slurm.conf), normal's priority 100 of the highest 1000.
    assert why.weights is not None
    assert why.weights.weighted["qos"] == 100000
    assert research.priority.weighted["qos"] == 10000
    assert research.priority.normalized["qos"] == pytest.approx(0.1)
    assert research.reasons[0] == "QOS (tier) +10000 (normal vs low)"
    assert {"research", "vision-oq"} <= {s.account for s in why.shares}
    mine = next(s for s in why.shares if s.account == "vision-oq" and s.user)
    assert mine.fair_share is not None
    assert 0 <= mine.fair_share <= 1
    assert why.lines[0].startswith(f"job {rec.jobs['pending-low']} waits (")
    # The held-back GPU-style jobs (--begin) rank before it; sprio does not list them.
    assert "5 more ranked before it cannot start yet" in "\n".join(why.lines)


def test_job_count_limits_of_an_association_and_a_qos(rec: Recording) -> None:
    """scripts/record-slurm's LIMITS (the user's MaxSubmitJobs 50 in research, research's
    GrpSubmitJobs 1000, QOS low's MaxSubmitJobsPU 40), one held job counted against each."""
    user = rec.data.get("limits_user", "root")
    for qos in ("normal", "low"):
        argv = submit_limits_argv(user, qos)
        rec.require(argv)
        limits = parse_submit_limits(rec.stdout(argv), user, "research", qos)
        found = {(limit.what, limit.limit, limit.used) for limit in limits}
        expected = {
            (f"MaxSubmitJobs of user {user} in account research", 50, 1),
            ("GrpSubmitJobs of account research", 1000, 1),
        }
        if qos == "low":
            expected.add(("MaxSubmitJobsPU of QOS low", 40, 1))
        assert found == expected, limits
        assert min(limit.room for limit in limits) == (39 if qos == "low" else 49)
    # The user's default account (DefAssoc=Yes) when the job names none.
    default = parse_submit_limits(rec.stdout(submit_limits_argv(user, "normal")), user, None, "x")
    assert {limit.what for limit in default} == {
        f"MaxSubmitJobs of user {user} in account research",
        "GrpSubmitJobs of account research",
    }
