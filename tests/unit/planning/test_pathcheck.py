"""Paths a spec needs are checked before sbatch: on this machine, or in one command where
Slurm runs (SSH); placeholders, node-only mounts and hpclaunch's own job root are skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hpclaunch.errors import SpecError
from hpclaunch.planning.paths import check_paths, missing_paths, needed_paths
from hpclaunch.planning.plan import build_plan
from hpclaunch.transport.local import LocalRunner
from tests.unit.conftest import HOME, PYTHON, SUBMISSION_ID, make_site, make_spec

SITE = make_site(node_only_paths=["/local", "~/node"], job_root="~/.hpclaunch/jobs")


def needed(cwd: str = "/work/p", **fields: Any) -> list[tuple[str, str, str]]:
    spec = make_spec(**fields)
    plan = build_plan(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, cwd=cwd, python=PYTHON)
    return [(n.field, n.path, n.kind) for n in needed_paths(spec, plan, SITE, HOME)]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python", "train.py"], [("command[1]", "/work/p/train.py", "file")]),
        (
            ["python3.11", "-u", "src/t.py", "--lr", "1"],
            [("command[2]", "/work/p/src/t.py", "file")],
        ),
        (["bash", "~/run.sh"], [("command[1]", f"{HOME}/run.sh", "file")]),
        (["./run.sh", "x"], [("command[0]", "/work/p/run.sh", "file")]),
        (["/opt/env/bin/python", "-c", "1"], [("command[0]", "/opt/env/bin/python", "file")]),
        (["python", "-m", "trainer"], []),
        (["bash", "-c", "echo hi"], []),
        (["torchrun_like_tool", "train.py"], []),  # not an interpreter we know
        (["python", "train_{lr}.py"], []),  # a sweep placeholder: known only in the job
        (["python", "$HOME/t.py"], []),
        (["python", "/local/t.py"], []),  # under node_only_paths
        (["python", "~/node/t.py"], []),
    ],
)
def test_the_paths_of_a_command(command: list[str], expected: list[tuple[str, str, str]]) -> None:
    assert needed(command=command) == expected


def test_script_workdir_venv_and_conda_prefix() -> None:
    found = needed(
        command=None,
        script="scripts/go.sh",
        workdir="exp",
        venv=".venv",
        resources={"time": 10},
    )
    assert found == [
        ("script", "/work/p/exp/scripts/go.sh", "file"),
        ("workdir", "/work/p/exp", "dir"),
        ("venv", "/work/p/exp/.venv", "dir"),
    ]
    assert needed(command=["true"], conda="~/envs/torch") == [
        ("conda", f"{HOME}/envs/torch", "dir")
    ]
    assert needed(command=["true"], conda="torch") == []  # a name, not a path


def test_the_job_root_is_not_checked() -> None:
    # Remote default and --sync: the workdir is under the job root, made at submit.
    assert needed(cwd=f"{HOME}/.hpclaunch/jobs/snap/abc", command=["python", "t.py"]) == []


def _spec_and_plan(tmp_path: Path, **fields: Any) -> tuple[Any, Any]:
    spec = make_spec(**fields)
    plan = build_plan(
        spec, SITE, submission_id=SUBMISSION_ID, home=HOME, cwd=str(tmp_path), python=PYTHON
    )
    return spec, plan


@pytest.mark.parametrize("remote", [False, True])
def test_missing_paths_here_and_in_one_remote_command(tmp_path: Path, remote: bool) -> None:
    (tmp_path / "train.py").touch()
    (tmp_path / "venv").mkdir()
    (tmp_path / "a:b.py").touch()  # a colon in a name survives the remote script
    calls: list[tuple[str, ...]] = []

    class Counting(LocalRunner):
        def run(self, argv: Any, **kw: Any) -> Any:
            calls.append(tuple(argv))
            return super().run(argv, **kw)

    runner = Counting() if remote else None
    for command, venv, missing in [
        (["python", "train.py"], "venv", []),
        (["python", "a:b.py"], "venv", []),
        (["python", "nope.py"], "venv", ["command[1]"]),
        (["python", "train.py"], "train.py", ["venv"]),  # a file is not a venv directory
        (["python", "venv"], "nope", ["command[1]", "venv"]),  # a directory is not a script
    ]:
        spec, plan = _spec_and_plan(tmp_path, command=command, venv=venv)
        found = missing_paths(runner, needed_paths(spec, plan, SITE, HOME))
        assert [n.field for n in found] == missing, command
    assert len(calls) == (5 if remote else 0)  # one command per check, whatever the count


def test_the_error_names_the_file_the_field_and_the_fix(tmp_path: Path) -> None:
    spec, plan = _spec_and_plan(tmp_path, command=["python", "train.py"], workdir="runs")
    with pytest.raises(SpecError) as info:
        check_paths(spec, plan, SITE, HOME, source="job.yaml")
    text = str(info.value)
    assert text.startswith("job.yaml: paths do not exist:")
    assert f"  - command[1]: 'train.py' ({tmp_path}/runs/train.py) is not a file" in text
    assert f"  - workdir: 'runs' ({tmp_path}/runs) is not a directory on this machine" in text
    assert info.value.hint is not None
    assert f"relative paths start from the workdir ({tmp_path}/runs)" in info.value.hint
    assert "--no-check" in info.value.hint
