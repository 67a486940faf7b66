"""``hpclaunch tier`` and ``hpclaunch queue`` through click's CliRunner, against a FakeRunner
that answers squeue/scontrol as Slurm 22.05 does (conftest.py's private env)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import Result

from hpclaunch import backends
from hpclaunch.backends.cli import CliBackend
from hpclaunch.config.site import load_site
from hpclaunch.ops.session import Session
from hpclaunch.slurm.capabilities import Association, Capabilities
from hpclaunch.store.capabilities import cache_path, write_cache
from hpclaunch.store.history import SubmissionRecord, find_record, history_path, record_submission
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeRunner, result

Env = dict[str, str]

LOW = (
    "100|root|research-oq|low|PENDING|Priority|1|2026-11-22T14:20:05|1|1|"
    "N/A|N/A|gres:gpu:1|N/A|0|gpu|0:00|N/A|j\n"
)
MEDIUM = (
    "101|root|research|normal|PENDING|Resources|100|2026-11-22T14:20:05|1|1|"
    "N/A|N/A|gres:gpu:4|N/A|0|gpu|0:00|2026-11-22T15:00:00|m\n"
)
RUNNING = (
    "29|root|research|critical|RUNNING|None|100000|2026-11-22T14:20:01|2|1|"
    "N/A|N/A|gres:gpu:4|N/A|0|gpu|0:07|2026-11-22T14:20:01|a\n"
)
ARRAY = (
    "7_[1-3]|root|research|normal|PENDING|Priority|5|2026-11-22T14:01:42|1|1|"
    "N/A|N/A|N/A|N/A|0|gpu|0:00|N/A|arr\n"
)


def usage(*jobs: tuple[str, int]) -> str:
    """squeue's lines of a project's running jobs, each (QOS, nodes) with 4 GPUs a node."""
    return "".join(
        f"{30 + i}|root|research|{qos}|RUNNING|None|100|2026-11-22T14:20:01|{nodes}|"
        "1|N/A|N/A|gres:gpu:4|N/A|0|gpu|0:07|2026-11-22T14:20:01|u\n"
        for i, (qos, nodes) in enumerate(jobs)
    )


class Slurm:
    """squeue for one job or a project's usage, and scontrol update."""

    def __init__(self, job: str = LOW, usage: str = "", scontrol_err: str = "") -> None:
        self.job, self.usage, self.scontrol_err = job, usage, scontrol_err
        self.runner = FakeRunner(self)

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue" and any(a.startswith("--jobs=") for a in argv):
            return result(argv, out=self.job)
        if argv[0] == "squeue" and any(a.startswith("--account=") for a in argv):
            return result(argv, out=self.usage)
        if argv[0] == "squeue":
            return result(argv, out=LOW + MEDIUM + RUNNING)
        if argv[:2] == ("scontrol", "update"):
            return result(argv, 1 if self.scontrol_err else 0, err=self.scontrol_err)
        return result(argv, 127, err=f"{argv[0]}: not faked")

    def updates(self) -> list[tuple[str, ...]]:
        return [c for c in self.runner.calls if c[:2] == ("scontrol", "update")]


def caps(assocs: tuple[Association, ...] | None) -> Capabilities:
    return Capabilities(
        cluster="hpclaunch",
        slurm_version="22.05.8",
        max_array_size=1001,
        min_job_age=300,
        preempt_type="preempt/qos",
        preempt_mode="REQUEUE",
        job_requeue=True,
        scheduler_parameters=(),
        slurmctld_parameters=(),
        partitions=(),
        nodes=(),
        user="root",
        qos=None,
        default_account="research",
        associations=assocs,
    )


ALL_ASSOCS = (
    Association("research", None, ("critical", "high", "low", "normal")),
    Association("research-oq", None, ("low", "overquota")),
)


@pytest.fixture
def slurm(env: Env, monkeypatch: pytest.MonkeyPatch) -> Slurm:
    fake = Slurm()
    # The update goes through the backend: the cli backend, on the fake's runner (a backend
    # class made for this test, registered under the env's backend name).
    backend = type(
        "TierSlurmBackend",
        (CliBackend,),
        {"__init__": lambda self, _runner, site: CliBackend.__init__(self, fake.runner, site)},
    )
    monkeypatch.setitem(backends._REGISTRY, "fakeslurm", backends._Entry(backend, None))
    discovered(env, ALL_ASSOCS)
    return fake


def discovered(env: Env, assocs: tuple[Association, ...]) -> None:
    """A fresh discovery cache (the real clock) for site hpclaunch: no discovery runs."""
    import time

    path = cache_path("hpclaunch", {"XDG_CACHE_HOME": str(Path(env["HOME"]) / ".cache")})
    write_cache(path, replace(caps(assocs), discovered_at=time.time()))


def remember(env: Env, job_id: str, tier: str) -> None:
    record_submission(
        SubmissionRecord(job_id, None, "j", f"sid{job_id}", "/j", "hpclaunch", "t0", tier=tier),
        path=history_path(env),
    )


def out(res: Result) -> str:
    return res.stdout + res.stderr


# -- tier -----------------------------------------------------------------------------------


def test_low_to_critical_within_quota_moves_account_and_qos(env: Env, slurm: Slurm) -> None:
    slurm.usage = usage(("critical", 1), ("low", 1))  # 4 in-quota GPUs of 8
    remember(env, "100", "low")
    res = run(env, "tier", "100", "critical")
    assert res.exit_code == 0, out(res)
    assert slurm.updates() == [
        ("scontrol", "update", "JobId=100", "QOS=critical", "Account=research", "Requeue=0")
    ]
    assert "tier: low → critical" in res.stdout
    assert "account: research-oq → research" in res.stdout
    assert "job 100: moved to tier critical" in res.stdout
    record = find_record(job_id="100", path=history_path(env))
    assert record is not None
    assert (record.tier, record.qos, record.quota) == ("critical", "critical", "in-quota")


def test_over_quota_when_the_project_is_full(env: Env, slurm: Slurm) -> None:
    slurm.usage = usage(("critical", 2))
    res = run(env, "tier", "100", "medium")
    assert res.exit_code == 0, out(res)
    assert slurm.updates() == [
        ("scontrol", "update", "JobId=100", "QOS=overquota", "Nice=2000", "Requeue=1")
    ]
    assert "over-quota" in res.stdout


def test_the_job_itself_is_not_counted_twice(env: Env, slurm: Slurm) -> None:
    slurm.job = MEDIUM  # in-quota already: its 4 GPUs are in the usage
    slurm.usage = usage(("normal", 1), ("critical", 1))
    res = run(env, "tier", "101", "critical")
    assert res.exit_code == 0, out(res)
    assert slurm.updates() == [("scontrol", "update", "JobId=101", "QOS=critical", "Requeue=0")]


def test_dry_run_changes_nothing(env: Env, slurm: Slurm) -> None:
    res = run(env, "tier", "--dry-run", "100", "critical")
    assert res.exit_code == 0, out(res)
    assert "dry run, nothing changed: scontrol update JobId=100 QOS=critical" in res.stdout
    assert slurm.updates() == []


def test_running_job_cannot_change_tier(env: Env, slurm: Slurm) -> None:
    slurm.job = RUNNING
    res = run(env, "tier", "29", "low")
    assert_clean_error(res, 1, "the tier of a job that has started cannot change")
    assert "cancel it and resubmit" in res.stderr
    assert slurm.updates() == []


def test_unknown_tier_and_bad_id_exit_2(env: Env, slurm: Slurm) -> None:
    res = run(env, "tier", "100", "urgent")
    assert res.exit_code == 2
    assert "has no tier 'urgent'; tiers: critical, high" in res.stderr
    assert run(env, "tier", "abc", "low").exit_code == 2


def test_unknown_job(env: Env, slurm: Slurm) -> None:
    slurm.job = ""
    assert_clean_error(run(env, "tier", "555", "low"), 1, "job 555 is not in Slurm's queue")


def test_association_without_the_account_is_refused_with_the_list(env: Env, slurm: Slurm) -> None:
    slurm.job = MEDIUM
    discovered(env, ALL_ASSOCS[:1])
    res = run(env, "tier", "101", "low")
    assert_clean_error(res, 1, "has no association with it; your accounts: research")
    assert slurm.updates() == []


def test_qos_not_allowed_is_refused_with_the_allowed_list(env: Env, slurm: Slurm) -> None:
    assocs = (Association("research", None, ("low", "normal")), ALL_ASSOCS[1])
    discovered(env, assocs)
    res = run(env, "tier", "100", "critical")
    assert_clean_error(res, 1, "QOS allowed there: low, normal")


def test_scontrol_refusal_becomes_an_error_with_a_hint(env: Env, slurm: Slurm) -> None:
    slurm.scontrol_err = "Invalid qos specification for job 100\n"
    res = run(env, "tier", "100", "critical")
    assert_clean_error(res, 1, "Slurm refused to move job 100 to tier critical")
    assert "Hint: the new QOS is not allowed" in res.stderr


def test_array_job_moves_every_pending_task(env: Env, slurm: Slurm) -> None:
    slurm.job = ARRAY
    res = run(env, "tier", "7", "high")
    assert res.exit_code == 0, out(res)
    assert slurm.updates()[0][:4] == ("scontrol", "update", "JobId=7", "QOS=high")
    assert "every pending task of array 7 moves" in res.stdout


# -- queue ----------------------------------------------------------------------------------


def test_queue_is_one_squeue_call_in_scheduler_order(env: Env, slurm: Slurm) -> None:
    res = run(env, "queue", "--json")
    assert res.exit_code == 0, out(res)
    assert [c[0] for c in slurm.runner.calls] == ["squeue"]
    data = json.loads(res.stdout)
    assert [(d["job_id"], d["rank"]) for d in data] == [("29", None), ("101", 1), ("100", 2)]
    assert data[2]["why"].startswith("behind 1 higher-priority job in the queue")


def test_queue_of_a_partition_that_does_not_exist_is_refused(env: Env, slurm: Slurm) -> None:
    """Issue 45: it said "nobody has jobs in partition nope"."""
    res = run(env, "queue", "--partition", "nope")
    assert res.exit_code == 2, out(res)
    assert "partition 'nope': the cluster has no such partition" in res.stderr
    assert "its partitions: " in res.stderr
    assert not [c for c in slurm.runner.calls if c[0] == "squeue"]
    assert run(env, "queue", "--partition", "gpu").exit_code == 0  # the site's


def test_queue_table(env: Env, slurm: Slurm) -> None:
    res = run(env, "queue", "--me")
    assert res.exit_code == 0, out(res)
    assert "--me" in slurm.runner.calls[0]
    header = res.stdout.splitlines()[0].split()
    assert header[:4] == ["#", "ID", "USER", "PROJECT"]
    assert header[-1] == "WHY"
    assert "STARTS" in header
    assert "1 running, 2 pending" in res.stdout
    # Slurm's expected start of the pending job that has one (squeue's StartTime)
    (medium,) = [line for line in res.stdout.splitlines() if " 101 " in line]
    assert "~11-22 15:00" in medium


def test_the_queue_from_python_is_the_clis(
    env: Env, slurm: Slurm, monkeypatch: pytest.MonkeyPatch
) -> None:

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    site = load_site(env["HPCLAUNCH_SITE"])
    session = Session(runner=slurm.runner, backend=CliBackend(slurm.runner, site))
    entries = session.queue()
    cli = json.loads(run(env, "queue", "--json").stdout)

    def steady(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in row.items() if k != "waited"} for row in rows]  # the clock

    assert steady([e.to_dict() for e in entries]) == steady(cli)
    assert [e.row.job_id for e in entries] == ["29", "101", "100"]
