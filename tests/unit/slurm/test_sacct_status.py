"""sacct's view of finished jobs, parsed from recorded real output (Slurm 22.05.8, steps
included): the real exit of a job Slurm ended, no exit for one that never ran, one elapsed
format, restarts counted from attempts only."""

from __future__ import annotations

from pathlib import Path

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.merge import _finished_view
from hpclaunch.backends.slurm_text import is_waiting_reason, parse_sacct
from hpclaunch.cli.status import exit_text
from hpclaunch.slurm.jobs import JobInfo, JobState

DATA = Path(__file__).parents[1] / "data" / "cluster-22.05" / "sacct_status_steps.txt"
IDS = ("17", "26", "54", "65", "66", "67", "91")


def parsed() -> dict[str, JobInfo]:
    infos = parse_sacct(DATA.read_text(), {i: JobRef(i) for i in IDS}, "gpu")
    return {ref.job_id: _finished_view(info) for ref, info in infos.items()}


def test_exit_codes_and_signals_as_the_batch_step_saw_them() -> None:
    infos = parsed()
    seen = {
        i: (info.state, info.exit_code, info.exit_signal, exit_text(info))
        for i, info in infos.items()
    }
    assert seen == {
        "17": (JobState.COMPLETED, 0, None, "0"),
        "26": (JobState.CANCELLED, None, None, "never ran"),  # its last attempt never started
        "54": (JobState.FAILED, 4, None, "4"),
        "65": (JobState.TIMEOUT, 0, 15, "SIGTERM"),  # the allocation says 0:0
        "66": (JobState.CANCELLED, 0, 15, "SIGTERM"),
        "67": (JobState.COMPLETED, 0, None, "0"),
        "91": (JobState.CANCELLED, None, None, "never ran"),
    }


def test_restarts_count_attempts_not_steps_and_elapsed_is_one_format() -> None:
    infos = parsed()
    assert infos["17"].restarts == 1
    assert infos["26"].restarts == 1
    assert infos["65"].restarts == 0
    assert infos["65"].elapsed == "1:13"  # sacct: 00:01:13
    assert infos["91"].elapsed == "0:00"
    assert infos["91"].nodes is None  # "None assigned"


def test_a_finished_job_keeps_no_waiting_reason() -> None:
    infos = parsed()
    assert infos["91"].reason is None  # was BeginTime
    assert infos["17"].reason is None
    assert is_waiting_reason("AssocGrpGRES")
    assert is_waiting_reason("ReqNodeNotAvail, UnavailableNodes:n1")
    assert not is_waiting_reason("TimeLimit")
    assert not is_waiting_reason("RaisedSignal:15(Terminated)")


def test_attempts_take_the_batch_steps_exit() -> None:
    from hpclaunch.backends.slurm_text import parse_attempts

    data = DATA.parent

    def recorded(name: str) -> str:
        """Recorded before the usage columns were asked (Timelimit ... TRESUsageInTot):
        those come out empty."""
        return "".join(line + "|" * 5 + "\n" for line in (data / name).read_text().splitlines())

    timeout = parse_attempts(recorded("sacct_attempts_65.txt"), "65")
    assert [(a.state, a.exit_code, a.exit_signal) for a in timeout] == [(JobState.TIMEOUT, 0, 15)]
    preempted = parse_attempts(recorded("sacct_attempts_26.txt"), "26")
    assert [(a.state, a.exit_code, a.exit_signal, a.nodes) for a in preempted] == [
        (JobState.PREEMPTED, 0, 15, "n3"),
        (JobState.CANCELLED, None, None, None),  # never ran: "None assigned", no batch step
    ]


def test_a_failed_job_never_shows_exit_code_0() -> None:
    # FAILED is a non-zero exit: 0:0 there is an exit not recorded yet (seen on 22.05).
    ref = JobRef("5")
    info = _finished_view(JobInfo(ref, JobState.FAILED, exit_code=0, nodes="n1"))
    assert (info.exit_code, exit_text(info)) == (None, "")
    killed = _finished_view(JobInfo(ref, JobState.FAILED, exit_code=0, exit_signal=9))
    assert killed.exit_code == 0
