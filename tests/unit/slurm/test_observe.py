"""The Slurm state table and polite polling."""

from __future__ import annotations

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.errors import WatchTimeout
from hpclaunch.slurm.jobs import (
    EXIT_CODE_WAIT,
    FINISHED_STATES,
    JobInfo,
    JobState,
    parse_state,
    wait_for,
)
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import make_site
from tests.unit.fakes import FakeRunner, ScriptedBackend

ALL_STATES = [
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "STOPPED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
    "SPECIAL_EXIT",
    "PREEMPTED",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
    "UNKNOWN",
]
FINISHED = (
    "COMPLETED PREEMPTED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY BOOT_FAIL "
    "DEADLINE REVOKED"
)


def test_the_table_is_complete() -> None:
    assert [s.value for s in JobState] == ALL_STATES


@pytest.mark.parametrize("state", ALL_STATES)
def test_finished(state: str) -> None:
    assert JobState(state).is_finished == (state in FINISHED.split())


@pytest.mark.parametrize("state", ["REQUEUED", "REQUEUE_HOLD", "UNKNOWN"])
def test_requeued_is_not_finished(state: str) -> None:
    # A requeued job runs again under the same id.
    assert not JobState(state).is_finished


def test_preempted_is_finished() -> None:
    # slurmctld shows a job it requeues PENDING at once; one left PREEMPTED will not run
    # again (job_mgr.c): waiting on it must end.
    assert JobState.PREEMPTED.is_finished


def test_only_completed_is_success() -> None:
    assert [s for s in JobState if s.is_success] == [JobState.COMPLETED]
    assert len(FINISHED_STATES) == 10


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 0", "CANCELLED"),
        ("CANCELLED+", "CANCELLED"),
        ("  RUNNING\n", "RUNNING"),
        ("completed", "COMPLETED"),
        ("PD", "PENDING"),
        ("OOM", "OUT_OF_MEMORY"),
        ("", "UNKNOWN"),
        ("SOMETHING_NEW", "UNKNOWN"),
        ("NODE_FAIL", "NODE_FAIL"),
    ],
)
def test_parse_state(text: str, state: str) -> None:
    assert parse_state(text) is JobState(state)


def test_job_info_to_dict() -> None:
    info = JobInfo(JobRef("12"), JobState.FAILED, name="x", exit_code=2, source="sacct")
    assert info.to_dict() == {
        "job_id": "12",
        "cluster": None,
        "name": "x",
        "state": "FAILED",
        "finished": True,
        "reason": None,
        "nodes": None,
        "exit_code": 2,
        "exit_signal": None,
        "elapsed": None,
        "source": "sacct",
        "qos": None,
        "tier": None,
        "quota": None,
        "node_count": None,
        "gpus": None,
        "restarts": None,
        "expected_start": None,
    }


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def never_run(argv: tuple[str, ...]) -> CommandResult:
    raise AssertionError(f"unexpected command {argv}")


def backend(rounds: list[dict[str, str]], poll_min_interval: float = 5.0) -> ScriptedBackend:
    return ScriptedBackend(
        FakeRunner(never_run), make_site(poll_min_interval=poll_min_interval), rounds
    )


def test_waiting_ends_on_a_job_slurm_left_preempted() -> None:
    # Slurm preempted a task whose sidecar had forbidden the requeue (its function had
    # finished): the map's results() waited until its timeout (run 22, pyslurm).
    fake = backend([{"1": "RUNNING"}, {"1": "PREEMPTED"}, {"1": "PREEMPTED"}])
    clock = FakeClock()
    infos = wait_for(fake, [JobRef("1")], clock=clock, sleep=clock.sleep, timeout=60)
    assert infos[JobRef("1")].state is JobState.PREEMPTED
    assert len(fake.status_calls) == 2


def test_wait_polls_all_jobs_in_one_call_per_round() -> None:
    refs = [JobRef("1"), JobRef("2")]
    fake = backend(
        [
            {"1": "PENDING", "2": "RUNNING"},
            {"1": "RUNNING", "2": "REQUEUED"},
            {"1": "COMPLETED", "2": "PENDING"},
            {"1": "COMPLETED", "2": "COMPLETED"},
        ]
    )
    clock = FakeClock()
    changes: list[str] = []
    infos = wait_for(
        fake,
        refs,
        clock=clock,
        sleep=clock.sleep,
        on_change=lambda i: changes.append(f"{i.ref.job_id}:{i.state}"),
    )
    assert fake.status_calls == [refs] * 4
    assert {r.job_id: i.state.value for r, i in infos.items()} == {
        "1": "COMPLETED",
        "2": "COMPLETED",
    }
    assert changes == [
        "1:PENDING",
        "2:RUNNING",
        "1:RUNNING",
        "2:REQUEUED",
        "1:COMPLETED",
        "2:PENDING",
        "2:COMPLETED",
    ]


def test_wait_never_polls_faster_than_the_site_allows() -> None:
    fake = backend([{"1": "RUNNING"}] * 3 + [{"1": "FAILED:1"}], poll_min_interval=5.0)
    clock = FakeClock()
    wait_for(fake, [JobRef("1")], interval=0.1, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [5.0, 5.0, 5.0]


def test_wait_uses_a_longer_interval_when_asked() -> None:
    fake = backend([{"1": "RUNNING"}, {"1": "COMPLETED"}], poll_min_interval=1.0)
    clock = FakeClock()
    wait_for(fake, [JobRef("1")], interval=30, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [30]


def test_wait_until_a_custom_condition() -> None:
    fake = backend([{"1": "PENDING"}, {"1": "RUNNING"}, {"1": "COMPLETED"}], 1.0)
    clock = FakeClock()
    infos = wait_for(
        fake,
        [JobRef("1")],
        until=lambda i: i.state is JobState.RUNNING,
        clock=clock,
        sleep=clock.sleep,
    )
    assert infos[JobRef("1")].state is JobState.RUNNING


def test_wait_times_out_naming_the_waiting_jobs() -> None:
    fake = backend([{"1": "COMPLETED", "2": "PENDING"}], poll_min_interval=5.0)
    clock = FakeClock()
    with pytest.raises(WatchTimeout, match=r"gave up after 12 s; still waiting for 2 \(PENDING\)"):
        wait_for(fake, [JobRef("1"), JobRef("2")], timeout=12, clock=clock, sleep=clock.sleep)
    assert len(fake.status_calls) == 3  # at 0, 5 and 10 s; the next would be past 12 s


def test_wait_asks_again_for_the_exit_code_of_a_failed_job() -> None:
    # slurmdbd's record can lag slurmctld's: FAILED first, its exit code a round later.
    fake = backend([{"1": "FAILED"}, {"1": "FAILED"}, {"1": "FAILED:3"}], poll_min_interval=1.0)
    clock = FakeClock()
    infos = wait_for(fake, [JobRef("1")], clock=clock, sleep=clock.sleep)
    assert infos[JobRef("1")].exit_code == 3
    assert len(fake.status_calls) == 3


def test_wait_gives_up_on_an_exit_code_that_never_comes() -> None:
    fake = backend([{"1": "FAILED"}], poll_min_interval=1.0)
    clock = FakeClock()
    infos = wait_for(fake, [JobRef("1")], clock=clock, sleep=clock.sleep)
    assert infos[JobRef("1")].exit_code is None
    assert clock.now == EXIT_CODE_WAIT
