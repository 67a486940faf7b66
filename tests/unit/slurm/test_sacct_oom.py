"""A job whose srun step ran out of memory is OUT_OF_MEMORY, though Slurm calls the job
FAILED (its batch script, the sidecar, exited 1): recorded sacct output of the 25.11 cluster
with memory enforced, through both the status and the attempts parsers."""

from __future__ import annotations

from pathlib import Path

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.merge import _with_exit
from hpclaunch.backends.slurm_text import parse_attempts, parse_sacct, step_out_of_memory
from hpclaunch.slurm.jobs import JobInfo, JobState

DATA = Path(__file__).parents[1] / "data" / "cluster-25.11"


def test_a_step_out_of_memory_makes_the_failed_job_out_of_memory() -> None:
    text = (DATA / "sacct_oom_status.txt").read_text()
    infos = parse_sacct(text, {i: JobRef(i) for i in ("1", "2", "31")}, "gpu")
    seen = {ref.job_id: (info.state, info.reason) for ref, info in infos.items()}
    assert seen == {
        "1": (JobState.OUT_OF_MEMORY, None),  # Slurm's own: the batch script ran out
        "2": (JobState.OUT_OF_MEMORY, "OutOfMemory (step 2.0)"),
        "31": (JobState.OUT_OF_MEMORY, "OutOfMemory (step 31.0)"),
    }


def test_each_attempt_says_out_of_memory_too() -> None:
    text = (DATA / "sacct_oom_attempts.txt").read_text()
    attempts = parse_attempts(text, "2")
    assert [(a.state, a.reason) for a in attempts] == [
        (JobState.OUT_OF_MEMORY, "OutOfMemory (step 2.0)")
    ]


def test_only_a_failed_job_is_taken_for_its_steps_oom() -> None:
    cancelled = JobInfo(JobRef("5"), JobState.CANCELLED)
    assert step_out_of_memory(cancelled, "5.0") is cancelled  # cancelled is what it was
    failed = JobInfo(JobRef("5"), JobState.FAILED, reason="NonZeroExitCode")
    assert step_out_of_memory(failed, None) is failed


def test_squeue_failed_with_accounting_oom_is_out_of_memory() -> None:
    known = JobInfo(JobRef("2"), JobState.FAILED, reason="NonZeroExitCode", source="squeue")
    found = JobInfo(
        JobRef("2"), JobState.OUT_OF_MEMORY, reason="OutOfMemory (step 2.0)", exit_code=1
    )
    merged = _with_exit(known, found)
    assert (merged.state, merged.reason, merged.exit_code, merged.source) == (
        JobState.OUT_OF_MEMORY,
        "OutOfMemory (step 2.0)",
        1,
        "squeue",
    )
