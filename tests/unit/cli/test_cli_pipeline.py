"""``hpclaunch submit`` of a multi-job file, and ``status`` of a job that never ran, through
click's CliRunner against the fake Slurm behind the real CliBackend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpclaunch.store.history import history_path, recent_submissions
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeSlurm, result

Env = dict[str, str]


def write_pipeline(tmp_path: Path, *jobs: dict[str, Any]) -> str:
    for name in ("train.py", "eval.py", "export.py"):  # submit checks that they exist
        (tmp_path / name).touch()
    data = {
        "defaults": {
            "project": "research",
            "workdir": str(tmp_path),
            "resources": {"mem": "100M", "time": "00:05:00"},
        },
        "jobs": list(jobs)
        or [
            {"name": "train", "command": ["python", "train.py"]},
            {"name": "eval", "command": ["python", "eval.py"], "after": ["train"]},
            {"name": "export", "command": ["python", "export.py"], "after": ["eval"]},
        ],
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def script_of(slurm: FakeSlurm, n: int) -> str:
    """The batch script of the n-th sbatch call."""
    return slurm.scripts[slurm.submitted[n][-1]][0]


def test_submit_chains_the_jobs_in_order(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    done = run(env, "submit", "--submission-id", "nightly-7", write_pipeline(tmp_path))
    assert done.exit_code == 0, done.output
    assert done.stdout == "1000\n1001\n1002\n"
    assert "train → 1000\n" in done.stderr
    assert "eval → 1001  after afterok:train\n" in done.stderr
    assert "export → 1002  after afterok:eval\n" in done.stderr
    train, evaluate, export = (script_of(slurm, n) for n in range(3))
    assert "--dependency" not in train
    assert "--kill-on-invalid-dep" not in train
    assert "#SBATCH --dependency=afterok:1000\n#SBATCH --kill-on-invalid-dep=yes\n" in evaluate
    assert "#SBATCH --dependency=afterok:1001\n" in export
    records = recent_submissions(path=history_path(env))
    assert [(r.job_id, r.name, r.submission_id, r.dependency) for r in records] == [
        ("1000", "train", "nightly-7-train", None),
        ("1001", "eval", "nightly-7-eval", "afterok:1000"),
        ("1002", "export", "nightly-7-export", "afterok:1001"),
    ]
    assert {r.project for r in records} == {"research"}


def test_when_any_and_notok_and_several_jobs(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    path = write_pipeline(
        tmp_path,
        {"name": "a", "command": ["true"]},
        {"name": "b", "command": ["true"]},
        {"name": "c", "command": ["true"], "after": ["a", {"job": "b", "when": "any"}]},
        {"name": "alert", "command": ["true"], "after": [{"job": "c", "when": "notok"}]},
    )
    done = run(env, "submit", path)
    assert done.exit_code == 0, done.output
    assert "#SBATCH --dependency=afterok:1000,afterany:1001\n" in script_of(slurm, 2)
    assert "#SBATCH --dependency=afternotok:1002\n" in script_of(slurm, 3)


def test_nothing_is_submitted_when_one_job_cannot_be_planned(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    path = write_pipeline(
        tmp_path,
        {"name": "train", "command": ["true"]},
        {
            "name": "eval",
            "command": ["true"],
            "after": ["train"],
            "resources": {"gpus_per_node": 8},
        },
    )
    assert_clean_error(run(env, "submit", path), 2, "the most a node has is 4")
    assert slurm.submitted == []
    assert not history_path(env).exists()


def test_a_bad_file_names_the_file_and_field(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    path = write_pipeline(
        tmp_path,
        {"name": "train", "command": ["true"]},
        {"name": "eval", "command": ["true"], "after": ["trian"]},
    )
    assert_clean_error(
        run(env, "submit", path), 2, f"{path}: jobs[1].after[0]: no job named 'trian'"
    )
    assert slurm.submitted == []


def test_dry_run_prints_every_plan(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    done = run(env, "submit", "--dry-run", write_pipeline(tmp_path))
    assert done.exit_code == 0, done.output
    for n, name in enumerate(["train", "eval", "export"], start=1):
        assert f"# ===== job {name} ({n} of 3) =====\n" in done.stdout
    assert done.stdout.count("# sbatch argv: sbatch --parsable ") == 3
    assert '#SBATCH --dependency="afterok:<train>"\n' in done.stdout
    assert "#SBATCH --kill-on-invalid-dep=yes\n" in done.stdout
    assert slurm.submitted == []
    assert not history_path(env).exists()


def test_a_retry_submits_no_job_twice(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    path = write_pipeline(tmp_path)
    real_sbatch = slurm._sbatch
    calls = []

    def refuse_the_second(argv: tuple[str, ...]) -> CommandResult:
        calls.append(argv)
        if len(calls) == 2:
            return result(argv, 1, err="sbatch: error: Batch job submission failed: Busy\n")
        return real_sbatch(argv)

    pytest.MonkeyPatch().setattr(slurm, "_sbatch", refuse_the_second)
    first = run(env, "submit", "--submission-id", "n7", path)
    assert_clean_error(first, 1, f"{path}: job 'eval' was not submitted: sbatch refused")
    assert "already submitted: train → 1000" in first.stderr
    assert f"'hpclaunch submit --submission-id n7 {path}'" in first.stderr
    assert first.stdout == "1000\n"

    second = run(env, "submit", "--submission-id", "n7", path)
    assert second.exit_code == 0, second.output
    assert second.stdout == "1000\n1001\n1002\n"
    assert "train → 1000 (already submitted: not submitted again)" in second.stderr
    assert sorted(slurm.jobs) == ["1000", "1001", "1002"]
    assert "#SBATCH --dependency=afterok:1000\n" in script_of(slurm, 1)

    third = run(env, "submit", "--submission-id", "n7", path)
    assert (third.exit_code, third.stdout) == (0, "1000\n1001\n1002\n")
    assert len(slurm.jobs) == 3


def test_a_retry_without_history_finds_the_jobs_in_slurm(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path)
    assert run(env, "submit", "--submission-id", "n8", path).exit_code == 0
    history_path(env).unlink()
    again = run(env, "submit", "--submission-id", "n8", path)
    assert (again.exit_code, again.stdout) == (0, "1000\n1001\n1002\n")
    assert len(slurm.submitted) == 3


def test_follow_is_refused_wait_follows_every_job(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path)
    assert_clean_error(run(env, "submit", "--follow", path), 2, "--follow streams one job's log")
    assert slurm.submitted == []
    done = run(env, "submit", "--wait", path)
    assert done.exit_code == 0, done.output
    assert "export 1002: COMPLETED" in done.stderr
    # The ends the wait saw are in the history (as submit --wait of one job stores its end).
    rows = recent_submissions(path=history_path(env))
    assert {r.job_id: r.state for r in rows if r.job_id in ("1000", "1001", "1002")} == {
        "1000": "COMPLETED",
        "1001": "COMPLETED",
        "1002": "COMPLETED",
    }


def test_wait_exits_1_when_a_job_fails(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.new_job_states = ["RUNNING", "FAILED"]
    slurm.new_job_exit = "1:0"
    done = run(env, "submit", "--wait", write_pipeline(tmp_path))
    assert done.exit_code == 1
    assert "not completed: train, eval, export" in done.stderr


def test_status_says_why_a_job_never_ran(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    assert run(env, "submit", write_pipeline(tmp_path)).exit_code == 0
    train, evaluate, export = (slurm.jobs[i] for i in ("1000", "1001", "1002"))
    train.states, train.exit_code, train.in_squeue = ["FAILED"], "1:0", False
    for never in (evaluate, export):  # as sacct shows jobs killed by --kill-on-invalid-dep
        never.states, never.nodes, never.elapsed = ["CANCELLED"], "", "00:00:00"
        never.in_squeue = False
    calls: list[str] = []
    original = FakeSlurm.__call__

    def counting(self: FakeSlurm, argv: tuple[str, ...]) -> CommandResult:
        calls.append(argv[0])
        return original(self, argv)

    pytest.MonkeyPatch().setattr(FakeSlurm, "__call__", counting)
    try:
        shown = run(env, "status", "1001", "1002", "--json")
    finally:
        pytest.MonkeyPatch().setattr(FakeSlurm, "__call__", original)
    assert shown.exit_code == 0, shown.output
    assert calls == ["squeue", "sacct"]  # the dependencies ride along in the same calls
    rows = json.loads(shown.stdout)
    assert [(r["job_id"], r["state"], r["reason"]) for r in rows] == [
        ("1001", "CANCELLED", "never ran: train (job 1000) FAILED, exit code 1"),
        ("1002", "CANCELLED", "never ran: eval (job 1001) CANCELLED (never ran)"),
    ]
    table = run(env, "status", "1001")
    assert "never ran: train (job 1000) FAILED, exit code 1" in table.stdout


def test_status_of_a_waiting_job_names_what_it_waits_for(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    assert run(env, "submit", write_pipeline(tmp_path)).exit_code == 0
    slurm.jobs["1000"].states = ["RUNNING"]
    slurm.jobs["1001"].states, slurm.jobs["1001"].reason = ["PENDING"], "Dependency"
    rows = json.loads(run(env, "status", "1001", "--json").stdout)
    assert rows[0]["reason"] == "waits for: train (job 1000) RUNNING"
