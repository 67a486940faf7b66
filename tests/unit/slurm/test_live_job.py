"""The one reader of ``scontrol show job`` and ``squeue -o %L`` (recorded output of each
release is replayed in test_slurm_recorded.py)."""

from __future__ import annotations

import pytest

from hpclaunch.slurm.live_job import parse_show_job, parse_time_left, time_left_argv


def test_a_preemption_and_a_failed_node_are_read_and_empty_values_are_not() -> None:
    preempted = parse_show_job(
        "JobId=9 JobState=RUNNING Reason=None Restarts=1\n"
        "   PreemptEligibleTime=2026-11-28T13:48:33 PreemptTime=2026-11-28T13:49:00\n"
        "   NumNodes=4 NumCPUs=8 NumTasks=4 FailedNode=n3\n"
    )
    assert (preempted.preempting, preempted.failed_node, preempted.restarts) == (True, "n3", 1)
    assert (preempted.nodes, preempted.cpus, preempted.tasks) == (4, 8, 4)
    quiet = parse_show_job("JobId=9 Reason=TimeLimit PreemptTime=None FailedNode=(null)")
    assert (quiet.preempting, quiet.failed_node, quiet.at_time_limit) == (False, None, True)
    assert parse_show_job("") == parse_show_job("slurm_load_jobs error: Invalid job id")


def test_time_left_is_squeues_time_in_seconds_and_no_time_is_an_error() -> None:
    assert time_left_argv("77_3") == ["squeue", "-h", "-j", "77_3", "-o", "%L"]
    assert parse_time_left("1-00:00:05\n") == 86405
    assert parse_time_left("59:58\n") == 3598
    for said in ("UNLIMITED\n", ""):
        with pytest.raises((ValueError, IndexError)):
            parse_time_left(said)
