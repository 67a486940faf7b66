"""``scontrol requeue`` (through a fake runner) and the retry policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpclaunch.errors import ProgramNotFound
from hpclaunch.supervise.requeue import decide, issue_requeue, requeue_target, slurm_restarts
from tests.unit.fakes import FakeRunner, result

DATA = Path(__file__).resolve().parents[1] / "unit" / "data"


def test_target_is_array_aware() -> None:
    assert requeue_target({"SLURM_JOB_ID": "77"}) == "77"
    env = {"SLURM_JOB_ID": "80", "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}
    assert requeue_target(env) == "77_3"


def test_issue_requeue_ok_refused_and_missing() -> None:
    ok = FakeRunner(lambda argv: result(argv))
    assert issue_requeue(ok, "77_3").ok
    assert ok.calls == [("scontrol", "requeue", "77_3")]
    refused = FakeRunner(lambda argv: result(argv, 1, err="Requested operation is disabled"))
    outcome = issue_requeue(refused, "77")
    assert not outcome.ok
    assert outcome.why == "Requested operation is disabled"

    def missing(argv: tuple[str, ...]) -> Any:
        raise ProgramNotFound("scontrol")

    gone = issue_requeue(FakeRunner(missing), "77")
    assert gone.missing
    assert not gone.ok


def test_a_requeue_slurm_made_a_moment_before_counts_as_done() -> None:
    """At the end of a preemption's grace Slurm requeues the job itself; the sidecar's own
    requeue a moment later is refused (25.11), and the restart count shows it is requeued."""
    text = (DATA / "cluster-25.11" / "scontrol_show_job_sigterm_preempted.txt").read_text()
    assert "Restarts=1" in text

    def answer(argv: tuple[str, ...]) -> Any:
        if argv[:2] == ("scontrol", "requeue"):
            return result(argv, 1, err="scontrol: error: Job is pending execution for job 77")
        return result(argv, out=text)

    outcome = issue_requeue(FakeRunner(answer), "77", attempt=0)
    assert outcome.ok
    assert "Job is pending execution" in (outcome.why or "")
    assert "Restarts=1" in (outcome.why or "")
    # Not when the count did not move: the job is not requeued.
    assert not issue_requeue(FakeRunner(answer), "77", attempt=1).ok


def _end(reason: str, *, requeued: bool = True, no_progress: bool = False) -> dict[str, Any]:
    return {
        "event": "attempt_end",
        "reason": reason,
        "requeued": requeued,
        "no_progress": no_progress,
    }


def test_preemption_is_requeued_without_limit() -> None:
    history = [_end("preempted") for _ in range(20)]
    assert decide("preempted", history, max_requeues=1, no_progress=False).requeue


def test_time_limit_and_node_failure_are_capped_together() -> None:
    history = [_end("time_limit"), _end("preempted"), _end("node_failure")]
    assert decide("time_limit", history, max_requeues=3, no_progress=False).requeue
    refused = decide("time_limit", history, max_requeues=2, no_progress=False)
    assert not refused.requeue
    assert "max_requeues (2)" in refused.why
    assert not decide("time_limit", [], max_requeues=0, no_progress=False).requeue


def test_user_error_is_never_requeued() -> None:
    assert not decide("user_error", [], max_requeues=5, no_progress=False).requeue


def test_crash_loop_breaker_after_two_attempts_without_progress() -> None:
    one = [_end("node_failure", no_progress=True)]
    tripped = decide("time_limit", one, max_requeues=5, no_progress=True)
    assert not tripped.requeue
    assert "crash-loop breaker" in tripped.why
    # progress in between resets the count
    broken = [_end("node_failure", no_progress=True), _end("time_limit")]
    assert decide("time_limit", broken, max_requeues=5, no_progress=True).requeue
    assert decide("node_failure", [], max_requeues=5, no_progress=True).requeue


def test_preemptions_without_progress_are_requeued_without_limit() -> None:
    """Preempted during start-up again and again (or a script that reports no steps): the
    scheduler's doing, no crash loop; the job must not end PREEMPTED, never requeued."""
    preempted = _end("preempted", no_progress=True)
    for before in ([preempted], [preempted] * 4, [_end("time_limit", no_progress=True)]):
        assert decide("preempted", before, max_requeues=5, no_progress=True).requeue
    # ...and they neither count towards a crash loop nor break one.
    loop = [_end("time_limit", no_progress=True), preempted, preempted]
    tripped = decide("node_failure", loop, max_requeues=5, no_progress=True)
    assert "crash-loop breaker: 2 attempts" in tripped.why
    assert decide("node_failure", [preempted], max_requeues=5, no_progress=True).requeue


def test_slurm_restarts_reads_scontrol_show_job() -> None:
    shown = "JobId=77 JobName=x\n   Requeue=1 Restarts=2 BatchFlag=1 Reboot=0 ExitCode=0:0\n"
    runner = FakeRunner(lambda argv: result(argv, out=shown))
    assert slurm_restarts(runner, "77") == 2
    assert runner.calls == [("scontrol", "show", "job", "77")]
    assert (
        slurm_restarts(FakeRunner(lambda argv: result(argv, 1, err="Invalid job id")), "77") is None
    )

    def missing(argv: tuple[str, ...]) -> Any:
        raise ProgramNotFound("scontrol")

    assert slurm_restarts(FakeRunner(missing), "77") is None


def test_operator_requeues_neither_trip_nor_reset_the_breaker() -> None:
    requeued = _end("requeued", no_progress=True)
    history = [_end("time_limit", no_progress=True), requeued, requeued]
    decision = decide("time_limit", history, max_requeues=5, no_progress=True)
    assert not decision.requeue
    assert "2 attempts" in decision.why
    ok = decide("time_limit", [requeued, requeued], max_requeues=5, no_progress=True)
    assert ok.requeue


def test_job_now_reads_a_failed_node_from_real_scontrol_output() -> None:
    """Recorded on the 25.11.7 cluster right after `scontrol update NodeName=n2 State=DOWN`."""
    from hpclaunch.supervise.requeue import job_now

    recorded = (DATA / "cluster-25.11" / "scontrol_show_job_failed_node.txt").read_text()
    now = job_now(FakeRunner(lambda argv: result(argv, out=recorded)), "268")
    assert (now.restarts, now.failed_node) == (1, "n2")
    healthy = "JobId=77\n   JobState=RUNNING Reason=None Dependency=(null)\n   Restarts=0\n"
    assert job_now(FakeRunner(lambda argv: result(argv, out=healthy)), "77").failed_node is None


@pytest.mark.parametrize(
    ("recording", "time_limit", "restarts"),
    [("timelimit", True, 0), ("scancel", False, 0), ("preempted", False, 1)],
)
def test_job_now_tells_the_time_limit_from_real_scontrol_output(
    recording: str, time_limit: bool, restarts: int
) -> None:
    """Recorded on the 25.11.7 cluster by a batch script's SIGTERM trap: at a 1-minute
    job's time limit (``Reason=TimeLimit``), at a scancel, and at a preemption of a low-QOS
    job (PreemptMode=REQUEUE: already requeued, ``Restarts=1``)."""
    from hpclaunch.supervise.requeue import job_now

    recorded = (DATA / "cluster-25.11" / f"scontrol_show_job_sigterm_{recording}.txt").read_text()
    now = job_now(FakeRunner(lambda argv: result(argv, out=recorded)), "1")
    assert now.at_time_limit is time_limit
    assert now.restarts == restarts
    assert not now.preempting


def test_a_time_limit_without_progress_is_not_requeued_in_a_guaranteed_tier() -> None:
    """A trainer that reports no steps would run the same steps to the same limit again."""
    refused = decide("time_limit", [], max_requeues=5, no_progress=True, preemptible=False)
    assert not refused.requeue
    assert "no progress reported in this attempt" in refused.why
    assert decide("preempted", [], max_requeues=5, no_progress=True).requeue
    # Preemptible work keeps one retry (the crash-loop breaker stops the second).
    assert decide("time_limit", [], max_requeues=5, no_progress=True, preemptible=True).requeue


def test_a_used_up_cap_is_the_reason_whatever_the_attempt_showed() -> None:
    # Whether the attempt reported a step before its time limit depends on the machine's
    # load; the cap does not (a clean-clone run's second attempt was refused for "no
    # progress" where the test and the user expect "max_requeues").
    history = [_end("time_limit", requeued=True)]
    for progress in (True, False):
        for preemptible in (True, False):
            refused = decide(
                "time_limit",
                history,
                max_requeues=1,
                no_progress=not progress,
                preemptible=preemptible,
            )
            assert not refused.requeue
            assert "max_requeues (1) used up" in refused.why
