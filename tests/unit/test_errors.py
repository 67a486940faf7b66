"""The error tree and the texts failure errors carry."""

from __future__ import annotations

import pytest

from hpclaunch import errors
from hpclaunch.transport.base import CommandResult


@pytest.mark.parametrize(
    ("child", "parent"),
    [
        (errors.ConfigError, errors.HpclaunchError),
        (errors.SpecError, errors.ConfigError),
        (errors.PlanError, errors.ConfigError),
        (errors.RenderError, errors.HpclaunchError),
        (errors.TransportError, errors.HpclaunchError),
        (errors.ConnectError, errors.TransportError),
        (errors.ProgramNotFound, errors.ConnectError),
        (errors.CommandFailed, errors.TransportError),
        (errors.CommandTimeout, errors.TransportError),
        (errors.BackendError, errors.HpclaunchError),
        (errors.SubmissionError, errors.BackendError),
        (errors.BackendUnavailable, errors.BackendError),
        (errors.JobNotFound, errors.BackendError),
        (errors.WatchTimeout, errors.BackendError),
        (errors.SupervisorError, errors.HpclaunchError),
        (errors.LaunchFailed, errors.SupervisorError),
        (errors.CheckpointTimeout, errors.SupervisorError),
    ],
)
def test_tree(child: type[Exception], parent: type[Exception]) -> None:
    assert issubclass(child, parent)


def test_message_and_hint() -> None:
    exc = errors.ConfigError("bad value", hint="fix it")
    assert str(exc) == "bad value"
    assert exc.hint == "fix it"


def test_command_failed_names_argv_exit_code_and_last_lines() -> None:
    stderr = "".join(f"err line {i}\n" for i in range(30))
    result = CommandResult(("sbatch", "--parsable", "my job.sh"), 1, "out line\n", stderr)
    exc = errors.CommandFailed(result)
    text = str(exc)
    assert "sbatch --parsable 'my job.sh'" in text
    assert "exit code: 1" in text
    assert "err line 29" in text
    assert "err line 20" in text
    assert "err line 19" not in text  # only the last 10 lines
    assert "out line" in text
    assert exc.result is result


def test_submission_error_carries_result() -> None:
    result = CommandResult(("sbatch",), 1, "", "sbatch: error: Invalid qos specification\n")
    exc = errors.SubmissionError("sbatch refused job 'x'", result=result, hint="check the tier")
    assert "Invalid qos specification" in str(exc)
    assert exc.result is result


def test_program_not_found_hints_at_cluster() -> None:
    exc = errors.ProgramNotFound("sbatch")
    assert "'sbatch' not found" in str(exc)
    assert exc.hint is not None
    assert "Slurm installed" in exc.hint


def test_command_timeout_text() -> None:
    exc = errors.CommandTimeout(["squeue", "--me"], 2.5, stderr="slow\n")
    assert "timed out after 2.5 s: squeue --me" in str(exc)
    assert "slow" in str(exc)
