"""hpclaunch.slurm.queue: parsing squeue lines, the scheduler's order, reasons in words, tiers and
quota classes; and the history's tier amendments."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hpclaunch.config.site import SiteConfig, load_site
from hpclaunch.ops.queue import build_queue, explain, format_seconds, tier_of
from hpclaunch.slurm.queue import QUEUE_FORMAT, QueueQuery, QueueRow, order, parse_queue, queue_argv
from hpclaunch.store.history import (
    SubmissionRecord,
    find_record,
    recent_submissions,
    record_amendment,
    record_submission,
)

# Recorded on the local cluster (Slurm 22.05) in the earlier -o format and put into
# QUEUE_FORMAT's fields (tres-per-node where %b was; StartTime: N/A while pending), then odd
# values.
RECORDED = """\
29|root|research|critical|RUNNING|None|100000|2026-11-22T14:20:01|2|1|N/A|N/A|gres:gpu:4|N/A|0|gpu|0:07|2026-11-22T14:20:01|it-a
30|root|vision|critical|RUNNING|None|100000|2026-11-22T14:20:02|1|1|N/A|N/A|gres:gpu:4|N/A|0|gpu|0:06|2026-11-22T14:20:02|it-b
32|root|research-oq|low|PENDING|Priority|1|2026-11-22T14:20:05|1|1|N/A|N/A|gres:gpu:1|N/A|0|gpu|0:00|N/A|it-low
33|root|research-oq|overquota|PENDING|Priority|3000|2026-11-22T14:20:06|1|1|N/A|N/A|gres:gpu:1|N/A|2000|gpu|0:00|N/A|it-m
34|root|research-oq|overquota|PENDING|Resources|5000|2026-11-22T14:20:07|1|1|N/A|N/A|gres:gpu:1|N/A|0|gpu|0:00|N/A|it-c
10_[0-3]|root|research|low|PENDING|JobHeldUser|0|2026-11-22T14:01:42|1|1|N/A|N/A|N/A|N/A|0|gpu|0:00|N/A|tqarr
"""
NOW = datetime.fromisoformat("2026-11-22T14:21:07")


@pytest.fixture(scope="module")
def site() -> SiteConfig:
    return load_site("local")


def row(job_id: str = "1", **fields: object) -> QueueRow:
    values: dict[str, object] = {
        "job_id": job_id,
        "user": "u",
        "account": "research",
        "qos": "normal",
        "state": "PENDING",
        "reason": "Priority",
        "priority": 100,
        "submit": "2026-11-22T14:00:00",
        "nodes": 1,
        "gpus": 1,
        "nice": 0,
        "partition": "gpu",
        "elapsed": "0:00",
        "name": "j",
    }
    values.update(fields)
    return QueueRow(**values)  # type: ignore[arg-type]


# -- parsing ------------------------------------------------------------------------------


def test_queue_argv_is_one_squeue_call() -> None:
    assert queue_argv() == [
        "squeue",
        "--noheader",
        "--states=PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
        f"--Format={QUEUE_FORMAT}",
    ]
    assert queue_argv(QueueQuery(me=True, partition="debug"))[-2:] == ["--me", "--partition=debug"]
    assert QUEUE_FORMAT.endswith("|,Name:0")  # the free-text name last


def test_parse_recorded_lines() -> None:
    rows = parse_queue(RECORDED)
    assert [r.job_id for r in rows] == ["29", "30", "32", "33", "34", "10_[0-3]"]
    first, *_, medium, _, array = rows
    assert (first.state, first.nodes, first.gpus_per_node, first.gpus) == ("RUNNING", 2, 4, 8)
    assert first.reason is None
    assert first.reason_code is None
    assert (medium.qos, medium.nice, medium.priority) == ("overquota", 2000, 3000)
    assert array.gpus == 0
    assert array.array_job
    assert array.pending


def test_parse_odd_values() -> None:
    text = (
        "garbage without bars\n"
        "\n"
        "x|too|few\n"
        "7|bob|(null)|(null)|PENDING|ReqNodeNotAvail, UnavailableNodes:n[1-2]|N/A|N/A|"
        "|1|N/A|N/A|gres:gpu:a100:2,gres:gpu:1|N/A|-5|gpu,debug||N/A|name|with|bars\n"
    )
    (odd,) = parse_queue(text)
    assert odd.account is None
    assert odd.qos is None
    assert odd.submit is None
    assert odd.priority is None
    assert odd.nodes == 1
    assert odd.nice == -5
    assert odd.gpus_per_node == 3
    assert odd.reason_code == "ReqNodeNotAvail"
    assert odd.partitions == {"gpu", "debug"}
    assert odd.name == "name|with|bars"
    assert odd.start is None


# -- order --------------------------------------------------------------------------------


def test_running_first_then_priority_then_submit_then_id() -> None:
    rows = [
        row("5", priority=10, submit="2026-11-22T10:00:00"),
        row("4", priority=10, submit="2026-11-22T09:00:00"),
        row("3", priority=10, submit="2026-11-22T09:00:00"),
        row("9", priority=500),
        row("1", state="RUNNING", elapsed="1:00"),
        row("2", state="RUNNING", elapsed="1-00:00:00"),
        row("6", priority=None),
    ]
    assert [r.job_id for r in order(rows)] == ["2", "1", "9", "3", "4", "5", "6"]


def test_build_queue_ranks_reasons_and_waits(site: SiteConfig) -> None:
    entries = build_queue(parse_queue(RECORDED), site, {}, now=NOW)
    assert [e.row.job_id for e in entries] == ["29", "30", "34", "33", "32", "10_[0-3]"]
    assert [e.rank for e in entries] == [None, None, 1, 2, 3, 4]
    by_id = {e.row.job_id: e for e in entries}
    assert by_id["34"].why.startswith("next in line: waiting for GPUs")
    idle = "over-quota: waits for idle GPUs (it preempts nothing)"
    assert by_id["34"].why.endswith(f"; {idle}")
    assert by_id["33"].why == f"behind 1 higher-priority job in the queue; {idle}"
    assert by_id["32"].why == (
        "behind 2 higher-priority jobs in the queue; preemptible: waits for idle GPUs "
        "(it preempts nothing)"
    )
    assert by_id["10_[0-3]"].why == "held by you: scontrol release 10_[0-3]"
    assert by_id["34"].waited == 60
    assert by_id["29"].waited is None
    data = by_id["33"].to_dict()
    assert (data["reason"], data["project"], data["account"]) == (
        "Priority",
        "research",
        "research-oq",
    )


def test_a_waiting_in_quota_job_says_which_jobs_it_will_preempt(site: SiteConfig) -> None:
    running = {"state": "RUNNING", "reason": None, "gpus": 4}
    rows = [
        row("31", qos="critical", **running, elapsed="5:00"),
        row("32", qos="overquota", account="vision-oq", **running, elapsed="3:00"),
        row("33", qos="low", account="research-oq", **running, elapsed="4:00"),
        row("34", qos="low", account="research-oq", **running, elapsed="1:00"),
        row("40", qos="critical", reason="Resources", priority=100000, gpus=4),
        row("41", qos="high", reason="Priority", priority=50000, gpus=8),
        row("42", qos="normal", reason="Priority", priority=10000, gpus=4),
        row("43", qos="normal", reason="AssocGrpGRES", priority=10000, gpus=4),
    ]
    why = {e.row.job_id: e.why for e in build_queue(rows, site, now=NOW)}
    # low (priority 0) before overquota (50); among equals the oldest job (33) first, as
    # Slurm's preempt/qos keeps its job list's order (issue 27: the youngest was named).
    assert why["40"].endswith("; will likely preempt job 33, grace 10 s")
    assert why["41"].endswith("; will likely preempt jobs 34, 32, grace 10 s")
    assert why["42"].endswith("; no preemptible job holds GPUs: waits for GPUs to free up")
    assert why["43"] == explain("AssocGrpGRES")  # at its quota: preemption does not help


def test_victims_are_ranked_as_slurm_ranks_them(site: SiteConfig) -> None:
    """preempt/qos: QOS priority, then fewest nodes, then the older job; the youngest
    2-node low job comes after the 1-node ones, over-quota work after every low job."""
    running = {"state": "RUNNING", "reason": None}
    rows = [
        row("50", qos="low", account="research-oq", **running, gpus=1, elapsed="9:00"),
        row("51", qos="low", account="research-oq", **running, gpus=1, elapsed="8:00"),
        row("52", qos="overquota", account="vision-oq", **running, gpus=1, elapsed="7:00"),
        row("53", qos="low", account="research-oq", **running, gpus=2, nodes=2, elapsed="1:00"),
        row("60", qos="critical", reason="Resources", priority=100000, gpus=2),
    ]
    why = {e.row.job_id: e.why for e in build_queue(rows, site, now=NOW)}
    assert why["60"].endswith("; will likely preempt jobs 50, 51, grace 10 s")


def test_jobs_ahead_are_counted_per_partition(site: SiteConfig) -> None:
    rows = [
        row("1", priority=50, partition="debug"),
        row("2", priority=40, partition="gpu"),
        row("3", priority=30, partition="gpu"),
        row("4", priority=20, partition="gpu,debug"),
    ]
    ahead = {e.row.job_id: e.ahead for e in build_queue(rows, site, now=NOW)}
    assert ahead == {"1": 0, "2": 0, "3": 1, "4": 3}


# -- reasons ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("Resources", "waiting for GPUs"),
        ("AssocGrpGRES", "project at its guaranteed GPU quota"),
        ("QOSMaxGRESPerUser", "most GPUs this tier's QOS allows per user"),
        ("QOSMaxJobsPerUserLimit", "most jobs this tier's QOS allows per user"),
        ("Dependency", "waiting for the jobs it depends on"),
        ("BeginTime", "begin time"),
        ("JobHeldAdmin", "held by an admin"),
        ("ReqNodeNotAvail", "down, drained or reserved"),
        ("PartitionTimeLimit", "over the partition's limit"),
        ("BadConstraints", "no node has"),
        ("InvalidQOS", "QOS is not valid"),
        ("AssociationJobLimit", "running-jobs limit"),
        ("AssocGrpBillingMinutes", "project at a group limit (AssocGrpBillingMinutes)"),
        ("QOSMaxCpuPerUserLimit", "per-user limit (QOSMaxCpuPerUserLimit)"),
        (None, "not looked at by the scheduler yet"),
    ],
)
def test_reason_words(code: str | None, words: str) -> None:
    assert words in explain(code)


def test_unknown_reason_is_shown_raw() -> None:
    assert explain("SomethingNew") == "SomethingNew"
    assert explain("Priority", ahead=0) == "behind 0 higher-priority jobs in the queue"


# -- tiers and quota ------------------------------------------------------------------------


def test_tier_from_qos_and_from_over_quota_nice(site: SiteConfig) -> None:
    assert tier_of(row(qos="normal"), site) == "medium"
    assert tier_of(row(qos="overquota", nice=0), site) == "critical"
    assert tier_of(row(qos="overquota", nice=2000), site) == "medium"
    assert tier_of(row(qos="overquota", nice=1500), site) is None
    assert tier_of(row(qos="elsewhere"), site) is None


def test_history_tier_wins_and_quota_class(site: SiteConfig) -> None:
    rows = [
        row("1", qos="critical", account="research"),
        row("2", qos="overquota", account="research-oq", nice=0),
        row("3", qos="low", account="vision-oq"),
        row("4", qos="normal", account="someone-else"),
    ]
    entries = build_queue(rows, site, {"2": "high"}, now=NOW)
    got = {e.row.job_id: (e.tier, e.quota, e.ours) for e in entries}
    assert got == {
        "1": ("critical", "in-quota", False),
        "2": ("high", "over-quota", True),
        "3": ("low", "over-quota", False),
        "4": ("medium", None, False),
    }


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (None, 5, 3725, 90061)] == [
        "",
        "0:05",
        "1:02:05",
        "1-01:01:01",
    ]


# -- history amendments -------------------------------------------------------------------


def test_tier_amendment_replaces_the_record_in_place(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    first = SubmissionRecord("1", None, "a", "s1", "/j/1", "local", "t0", tier="low", qos="low")
    record_submission(first, path)
    record_submission(SubmissionRecord("2", None, "b", "s2", "/j/2", "local", "t1"), path)
    record_amendment(first, tier="critical", qos="critical", quota="in-quota", path=path)
    records = recent_submissions(path=path)
    assert [(r.job_id, r.tier) for r in records] == [("1", "critical"), ("2", None)]
    assert records[0].amended_at is not None
    assert find_record(job_id="1", path=path) == records[0]
    assert records[0].job_dir == "/j/1"  # the rest of the record is kept
    assert len(recent_submissions(limit=10, path=path)) == 2  # in place: no third record
