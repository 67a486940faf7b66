"""The spec's ``retry:`` in the sidecar: which endings are retried, the backoff, the count,
the crash-loop breaker, and the requeue + start time it asks Slurm for (fake scontrol; the
cluster test is tests/integration/test_rerun_retry_on_cluster.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.jobspec.job import JobSpec
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.requeue import finished_attempt
from hpclaunch.supervise.retry import OOM, RetryPolicy, decide_retry
from hpclaunch.supervise.sidecar import EXIT_REQUEUED, Sidecar, SidecarConfig
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, result

REPO = Path(__file__).resolve().parents[2]


def _policy(**fields: Any) -> RetryPolicy:
    retry = {"times": 3, "when": ["node_failure", {"exit_code": [3]}], **fields}
    spec = JobSpec.model_validate(
        {"name": "r", "command": ["x"], "launcher": "srun", "retry": retry}
    )
    assert spec.retry is not None
    policy = RetryPolicy.from_env({"HPCLAUNCH_RETRY": spec.retry.env_value()})
    assert policy is not None
    return policy


def _end(n: int, **fields: Any) -> dict[str, Any]:
    return {"event": "attempt_end", "attempt": n, **fields}


def test_the_policy_names_endings_and_exit_codes_and_never_the_users_own_errors() -> None:
    policy = _policy()
    assert policy.names("user_error", 3)
    assert not policy.names("user_error", 1)  # a bug: not named
    assert policy.names("node_failure", None)
    assert not policy.names("oom", 137)
    assert not policy.names("job_lost", 1)
    assert not policy.names("time_limit", None)  # not a failure: max_requeues handles it
    lost = _policy(when=["job_lost", "oom", "user_error"])
    assert lost.names("controller_unreachable", 1)
    assert lost.names("oom", 1)
    assert lost.names("user_error", 2)


def test_the_wait_doubles_up_to_the_cap_and_times_bounds_the_retries() -> None:
    policy = _policy(backoff=30, max_backoff=100)
    assert [policy.wait(n) for n in (1, 2, 3, 4)] == [30, 60, 100, 100]
    first = decide_retry(policy, "user_error", 3, [], no_progress=True, reports_progress=False)
    assert first is not None
    assert (first.retry, first.number, first.wait) == (True, 1, 30)
    two = [_end(0, retry=1, no_progress=True), _end(1, retry=2, no_progress=True)]
    third = decide_retry(policy, "user_error", 3, two, no_progress=True, reports_progress=False)
    assert third is not None
    assert (third.retry, third.number, third.wait) == (True, 3, 100)
    done = [*two, _end(2, retry=3)]
    last = decide_retry(policy, "user_error", 3, done, no_progress=True, reports_progress=False)
    assert last is not None
    assert not last.retry
    assert "retry.times (3) used up" in last.why
    assert (
        decide_retry(policy, "user_error", 1, [], no_progress=True, reports_progress=False) is None
    )
    assert decide_retry(None, "user_error", 3, [], no_progress=True, reports_progress=False) is None


def test_the_crash_loop_breaker_stays_for_jobs_that_report_progress() -> None:
    policy = _policy()
    stuck = [_end(0, retry=1, no_progress=True)]
    tripped = decide_retry(policy, "user_error", 3, stuck, no_progress=True, reports_progress=True)
    assert tripped is not None
    assert not tripped.retry
    assert "crash-loop breaker" in tripped.why
    moved = decide_retry(policy, "user_error", 3, stuck, no_progress=False, reports_progress=True)
    assert moved is not None
    assert moved.retry


def test_a_retried_failure_is_no_end_of_the_job() -> None:
    assert finished_attempt([_end(0, reason="user_error", requeued=True, retry=1)]) is None
    assert finished_attempt([_end(0, reason="user_error", requeued=False)]) is not None


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: Detected 1 oom_kill event in StepId=12.0. Some of the step tasks "
        "have been OOM Killed.",
        "srun: error: n1: task 0: Out Of Memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "MemoryError",
    ],
)
def test_out_of_memory_is_recognised(line: str) -> None:
    assert OOM.search(line)


def test_the_spec_refuses_retry_without_the_sidecar_or_requeues() -> None:
    with pytest.raises(ValueError, match="launcher none has no sidecar"):
        JobSpec.model_validate(
            {"name": "r", "command": ["x"], "retry": {"times": 1, "when": ["oom"]}}
        )
    with pytest.raises(ValueError, match="max_requeues 0"):
        JobSpec.model_validate(
            {
                "name": "r",
                "command": ["x"],
                "launcher": "srun",
                "checkpoint": {"max_requeues": 0},
                "retry": {"times": 1, "when": ["oom"]},
            }
        )
    with pytest.raises(ValueError, match="0 is success"):
        JobSpec.model_validate(
            {
                "name": "r",
                "command": ["x"],
                "launcher": "srun",
                "retry": {"times": 1, "when": [{"exit_code": [0]}]},
            }
        )


#: ``scontrol show config`` of the 22.05 test cluster (AuthInfo = cred_expire=10).
CONFIG = (REPO / "tests/unit/data/cluster-22.05/scontrol_show_config.txt").read_text()


def _scontrol(config: str = CONFIG) -> FakeRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:3] == ("scontrol", "show", "config"):
            return result(argv, out=config)
        if argv[:2] == ("scontrol", "show"):
            return result(argv, out="JobId=4242 Restarts=0\n")
        return result(argv)

    return FakeRunner(answer)


def _config(tmp_path: Path, code: int, retry: dict[str, Any], attempt: int = 0) -> SidecarConfig:
    spec = JobSpec.model_validate(
        {"name": "r", "command": ["x"], "launcher": "srun", "retry": retry}
    )
    assert spec.retry is not None
    env = dict(os.environ, SLURM_JOB_ID="4242", PYTHONPATH=str(REPO))
    env.pop("SLURM_JOB_NODELIST", None)
    env["HPCLAUNCH_RETRY"] = spec.retry.env_value()
    return SidecarConfig(
        launcher="srun",
        command=(sys.executable, "-c", f"import sys; print('failing'); sys.exit({code})"),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        attempt=attempt,
        stop_timeout=1.0,
    )


def test_a_named_exit_code_requeues_and_delays_the_next_start(tmp_path: Path) -> None:
    runner = _scontrol()
    retry = {"times": 2, "when": [{"exit_code": [3]}], "backoff": 45}
    assert Sidecar(_config(tmp_path, 3, retry), runner).run() == EXIT_REQUEUED
    assert ("scontrol", "requeue", "4242") in runner.calls
    assert ("scontrol", "update", "JobId=4242", "StartTime=now+45") in runner.calls
    # The delay is read before the requeue, whose SIGTERM would kill the scontrol asking.
    kinds = [c[:3] for c in runner.calls]
    assert kinds.index(("scontrol", "show", "config")) < kinds.index(
        ("scontrol", "requeue", "4242")
    )
    ledger = {e["event"]: e for e in read_ledger(tmp_path)}
    assert ledger["retry_scheduled"]["number"] == 1
    assert ledger["retry_scheduled"]["wait"] == 45
    end = ledger["attempt_end"]
    assert (end["reason"], end["exit_code"], end["requeued"], end["retry"]) == (
        "user_error",
        3,
        True,
        1,
    )
    # The next attempt runs (a retried failure is no end), and its retry waits twice as long.
    runner2 = _scontrol()
    assert Sidecar(_config(tmp_path, 3, retry, attempt=1), runner2).run() == EXIT_REQUEUED
    assert ("scontrol", "update", "JobId=4242", "StartTime=now+90") in runner2.calls
    # The third failure finds retry.times used up: the job fails with its own code.
    runner3 = _scontrol()
    assert Sidecar(_config(tmp_path, 3, retry, attempt=2), runner3).run() == 3
    assert not any(c[:2] == ("scontrol", "requeue") for c in runner3.calls)
    last = read_ledger(tmp_path)
    assert [e["event"] for e in last if e["event"].startswith("retry")] == [
        "retry_scheduled",
        "retry_scheduled",
        "retry_skipped",
    ]
    assert "used up" in last[-2]["why"]


def test_a_backoff_shorter_than_slurms_own_requeue_delay_leaves_slurms(tmp_path: Path) -> None:
    """Slurm keeps a requeued job from starting until its credential expired (cred_expire
    + 1 s): a shorter backoff would start it too soon, so the start time is left alone and
    the ledger says the real wait; an unreadable configuration means Slurm's default."""
    runner = _scontrol()
    retry = {"times": 2, "when": ["user_error"], "backoff": 5}
    assert Sidecar(_config(tmp_path, 1, retry), runner).run() == EXIT_REQUEUED
    assert not any(c[:2] == ("scontrol", "update") for c in runner.calls)
    scheduled = next(e for e in read_ledger(tmp_path) if e["event"] == "retry_scheduled")
    assert scheduled["wait"] == 11
    assert scheduled["why"] == (
        "user_error (exit code 1): retry 1 of 2 in 11 s (backoff 5 s; Slurm starts a requeued "
        "job no sooner than 11 s: its credential must expire first)"
    )  # issue 45: the floor was unexplained
    unknown = _scontrol(config="")
    assert Sidecar(_config(tmp_path, 1, retry, attempt=1), unknown).run() == EXIT_REQUEUED
    scheduled = [e for e in read_ledger(tmp_path) if e["event"] == "retry_scheduled"][-1]
    assert scheduled["wait"] == 121


def test_an_exit_code_the_policy_does_not_name_is_not_retried(tmp_path: Path) -> None:
    runner = _scontrol()
    retry = {"times": 2, "when": [{"exit_code": [3]}]}
    assert Sidecar(_config(tmp_path, 4, retry), runner).run() == 4
    assert runner.calls == []
    kinds = [e["event"] for e in read_ledger(tmp_path)]
    assert not [k for k in kinds if k.startswith("retry")]
    assert json.dumps(read_ledger(tmp_path)[-1]["requeued"]) == "false"
