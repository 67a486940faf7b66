"""LocalRunner: real child processes (small ones), files with private modes."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.errors import CommandTimeout, ProgramNotFound, TransportError
from hpclaunch.transport.base import CommandResult, Runner
from hpclaunch.transport.local import LocalRunner


def test_run_returns_output_and_never_raises_on_failure() -> None:
    runner = LocalRunner()
    ok = runner.run(["echo", "a b", "$HOME"])
    assert (ok.returncode, ok.stdout, ok.ok) == (0, "a b $HOME\n", True)
    assert ok.argv == ("echo", "a b", "$HOME")
    assert ok.duration >= 0
    bad = runner.run(
        [sys.executable, "-c", "import sys; print('oops', file=sys.stderr); sys.exit(3)"]
    )
    assert (bad.returncode, bad.stderr, bad.ok) == (3, "oops\n", False)


def test_stdin_and_env() -> None:
    runner = LocalRunner()
    code = "import os, sys; print(sys.stdin.read() + os.environ['HPCLAUNCH_TEST_VALUE'])"
    out = runner.run([sys.executable, "-c", code], stdin="in-", env={"HPCLAUNCH_TEST_VALUE": "env"})
    assert out.stdout == "in-env\n"


def test_timeout() -> None:
    with pytest.raises(CommandTimeout, match=r"timed out after 0\.2 s"):
        LocalRunner().run([sys.executable, "-c", "import time; time.sleep(10)"], timeout=0.2)


def test_missing_program_is_named_with_a_hint() -> None:
    with pytest.raises(ProgramNotFound, match="'no-such-sbatch' not found") as info:
        LocalRunner().run(["no-such-sbatch", "--parsable"])
    assert info.value.hint is not None
    assert "--remote" in info.value.hint


def test_put_file_makes_private_dirs_and_sets_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "jobs" / "abc" / "job.sbatch"
    runner = LocalRunner()
    runner.put_file(str(target), "#!/bin/bash\n", 0o700)
    assert target.read_text() == "#!/bin/bash\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    for directory in (tmp_path / "jobs", tmp_path / "jobs" / "abc"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    runner.put_file(str(target), "second\n", 0o600)  # replaces atomically
    assert target.read_text() == "second\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["job.sbatch"]  # no temp left
    assert runner.read_file(str(target)) == "second\n"


def test_read_missing_file() -> None:
    with pytest.raises(TransportError, match="cannot read /nonexistent"):
        LocalRunner().read_file("/nonexistent")


def test_put_file_failure(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(TransportError, match="cannot write"):
        LocalRunner().put_file(str(tmp_path / "file" / "x"), "", 0o600)


def test_slurm_bin_runs_the_sites_slurm_commands_and_only_those(tmp_path: Path) -> None:
    # A site's slurm_bin (site config): its commands, whatever PATH finds first.
    bindir = tmp_path / "slurm 25.11" / "bin"
    bindir.mkdir(parents=True)
    fake = bindir / "sinfo"
    fake.write_text("#!/bin/sh\necho slurm 25.11.7 from slurm_bin\n")
    fake.chmod(0o755)
    runner = LocalRunner()
    runner.slurm_bin = str(bindir)
    got = runner.run(["sinfo", "--version"])
    assert (got.stdout, got.argv[0]) == ("slurm 25.11.7 from slurm_bin\n", str(fake))
    assert runner.run(["echo", "sinfo"]).argv == ("echo", "sinfo")  # not a Slurm command
    with pytest.raises(ProgramNotFound, match=r"slurm 25\.11/bin/squeue"):
        runner.run(["squeue"])  # not there: named with its path, never another squeue


class ShellChecked(LocalRunner):
    """A local runner that checks ownership as a remote one does: one shell command."""

    first_foreign_or_open = Runner.first_foreign_or_open


def test_one_command_checks_every_path_as_a_remote_runner_does(tmp_path: Path) -> None:
    runner = ShellChecked()
    private = tmp_path / "call.pkl"
    private.write_bytes(b"x")
    private.chmod(0o600)
    tmp_path.chmod(0o700)
    missing = tmp_path / "result.pkl"
    open_dir = tmp_path / "shared"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    calls: list[tuple[str, ...]] = []
    run = runner.run

    def counted(argv: Sequence[str], **options: Any) -> CommandResult:
        calls.append(tuple(argv))
        return run(argv, **options)

    runner.run = counted  # type: ignore[method-assign]
    assert runner.first_foreign_or_open([str(tmp_path), str(private), str(missing)]) is None
    said = runner.first_foreign_or_open([str(private), str(open_dir), "/"])
    assert said == f"{open_dir} is writable by others (mode 0777)"
    if os.getuid() != 0:
        assert "belongs to uid 0" in (runner.first_foreign_or_open(["/"]) or "")
    assert len(calls) == (2 if os.getuid() == 0 else 3)  # one command a check, however many paths
