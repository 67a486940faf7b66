"""The error tree and the texts failure errors carry."""

from __future__ import annotations

import re

from hpclaunch import errors
from hpclaunch.transport.base import CommandResult


def drawn_tree() -> dict[str, str | None]:
    """Each class of the error tree drawn in hpclaunch/errors.py's docstring -> the class
    it is drawn under (``None`` for the root)."""
    block = (errors.__doc__ or "").split("::", 1)[1].strip("\n").split("\n\n")[0]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name)
    for line in block.splitlines():
        match = re.match(r"^([ │├└─]*)([A-Za-z]+)", line)
        assert match is not None, line
        column, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def test_the_drawn_tree_is_the_class_tree() -> None:
    """Every error class is drawn, under its own base; nothing drawn is not a class."""
    drawn = drawn_tree()
    classes = {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, errors.HpclaunchError)
    }
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        bases = [
            b.__name__ for b in classes[name].__bases__ if issubclass(b, errors.HpclaunchError)
        ]
        assert bases == ([] if parent is None else [parent]), name


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
