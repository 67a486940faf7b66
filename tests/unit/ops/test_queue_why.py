"""`queue --why`: the explanation, on hand-made factors (the parsers are tested on
recorded sprio and sshare output in test_slurm_recorded.py)."""

from __future__ import annotations

from dataclasses import replace

from hpclaunch.config.site import load_site
from hpclaunch.ops.queue import build_queue
from hpclaunch.ops.queue_why import explain_queue_wait
from hpclaunch.slurm.priority import FACTORS, JobPriority, ShareRow
from hpclaunch.slurm.queue import QueueRow

SITE = load_site("local")


def _row(job: str, account: str, qos: str, priority: int, submit: str) -> QueueRow:
    return QueueRow(
        job_id=job,
        user="alice" if account.startswith("research") else "bob",
        account=account,
        qos=qos,
        state="PENDING",
        reason="Priority",
        priority=priority,
        submit=submit,
        nodes=1,
        gpus=4,
        nice=0,
        partition="gpu",
        elapsed="0:00",
        name=f"job{job}",
    )


def _prio(job: str, account: str, **weighted: int) -> JobPriority:
    values = {key: weighted.get(key, 0) for key, *_ in FACTORS}
    return JobPriority(
        job_id=job,
        partition="gpu",
        user="alice" if account.startswith("research") else "bob",
        priority=sum(values.values()),
        nice=0,
        weighted=values,
        normalized={key: value / 100 for key, value in values.items()},
    )


def test_each_job_ahead_is_named_with_the_factors_it_gains_by() -> None:
    rows = [
        _row("11", "research", "normal", 10050, "2026-11-26T10:00:00"),
        _row("12", "vision", "normal", 10010, "2026-11-26T09:00:00"),
        _row("13", "vision", "normal", 10010, "2026-11-26T09:30:00"),
        _row("14", "research", "normal", 10010, "2026-11-26T09:40:00"),
    ]
    entries = build_queue(rows, SITE)
    job = next(e for e in entries if e.row.job_id == "14")
    factors = [
        _prio("11", "research", qos=10000, fairshare=50),
        _prio("12", "vision", qos=10000, fairshare=10),
        _prio("13", "vision", qos=10000, fairshare=10),
        _prio("14", "research", qos=10000, fairshare=10),
    ]
    shares = [
        ShareRow("research", None, 1, 3600, 0.7, None),
        ShareRow("research", "alice", 1, 3600, 1.0, 0.25),
        ShareRow("vision", "bob", 1, 600, 1.0, 0.75),
    ]
    weights = _prio("Weights", "", age=100, qos=100000)
    why = explain_queue_wait(entries, job, factors, weights, shares, SITE)
    assert [a.entry.row.job_id for a in why.ahead] == ["13", "12", "11"]  # nearest first
    assert why.ahead[0].reasons == ("same priority, submitted earlier",)
    assert why.ahead[2].reasons == ("fair share +40 (its fair-share factor 0.500 vs 0.100)",)
    text = "\n".join(why.lines)
    assert "3 pending job(s) ranked before it" in text
    assert "Fair share of alice in research: factor 0.250" in text
    assert "account usage 3600 billing-seconds" in text
    assert "weight 0 in slurm.conf): fair share, job size, partition." in text
    assert why.to_dict()["ahead"][2]["reasons"] == list(why.ahead[2].reasons)


def test_a_job_first_in_line_or_running_says_so() -> None:
    rows = [_row("21", "research", "high", 50000, "2026-11-26T10:00:00")]
    entries = build_queue(rows, SITE)
    why = explain_queue_wait(entries, entries[0], [_prio("21", "research")], None, [], SITE)
    assert why.lines[0].endswith("no pending job is ranked before it")
    started = build_queue([replace(_row("22", "vision", "normal", 1, "x"), state="RUNNING")], SITE)
    why = explain_queue_wait(started, started[0], [], None, [], SITE)
    assert why.lines == ("job 22 is RUNNING: it is not waiting",)
