"""``hpclaunch history`` and what submit/status store in the history, through click's
CliRunner against the fake Slurm of conftest.py behind the real CliBackend."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hpclaunch.store.history import (
    SubmissionRecord,
    find_record,
    history_path,
    recent_submissions,
    record_submission,
)
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import HELLO, run
from tests.unit.fakes import FakeJob, FakeSlurm, install_fake_slurm

Env = dict[str, str]


def test_submit_records_the_dependency_it_waits_on(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    # status explains a job that never ran from this (like a pipeline step's).
    spec = tmp_path / "after.yaml"
    spec.write_text(
        "name: after\ncommand: ['true']\nproject: research\n"
        "dependencies: [{job: '41', type: afterok}]\n"
    )
    assert run(env, "submit", str(spec)).exit_code == 0
    [record] = recent_submissions(path=history_path(env))
    assert record.dependency == "afterok:41"


def test_submit_records_user_project_account_and_spec_hash(env: Env, slurm: FakeSlurm) -> None:
    assert run(env, "submit", HELLO).exit_code == 0
    [record] = recent_submissions(path=history_path(env))
    assert record.user  # whoever runs the CLI (the SSH login name when remote)
    assert (record.project, record.account, record.tier, record.quota) == (
        "research",
        "research",
        "medium",
        "in-quota",
    )
    assert record.state is None
    # sha256 of the canonical JSON: the same for the same spec, whatever its layout.
    canonical = (
        '{"command":["bash","-c","echo \\"hello from $(hostname)\\"; sleep 2; echo done"],'
        '"name":"hello","project":"research","resources":{"cpus_per_task":1,"mem":"100M",'
        '"time":"00:05:00"},"tier":"medium"}'
    )
    assert record.spec_hash == hashlib.sha256(canonical.encode()).hexdigest()


def test_status_stores_the_final_state_once(env: Env, slurm: FakeSlurm) -> None:
    run(env, "submit", HELLO)
    job = slurm.jobs["1000"]
    job.name = "hello"
    job.attempts = ["REQUEUED"]
    job.restarts = 1
    assert run(env, "status", "1000").exit_code == 0  # PENDING: nothing stored
    assert find_record(job_id="1000", path=history_path(env)).state is None  # type: ignore[union-attr]
    run(env, "status", "1000")  # RUNNING
    run(env, "status", "1000")  # COMPLETED
    record = find_record(job_id="1000", path=history_path(env))
    assert record is not None
    assert (record.state, record.attempts, record.exit_code) == ("COMPLETED", 2, 0)


def test_status_does_not_store_another_jobs_state(env: Env, slurm: FakeSlurm) -> None:
    run(env, "submit", HELLO)
    slurm.jobs["1000"] = FakeJob("not-hello", ["FAILED"], exit_code="1:0")  # a reused id
    run(env, "status", "1000")
    assert find_record(job_id="1000", path=history_path(env)).state is None  # type: ignore[union-attr]


def remember(env: Env, job_id: str, **fields: object) -> None:
    data: dict[str, object] = {
        "job_id": job_id,
        "cluster": None,
        "name": f"j{job_id}",
        "submission_id": f"s{job_id}",
        "job_dir": f"/j/{job_id}",
        "site": "hpclaunch",
        "submitted_at": "2026-11-20T10:00:00+00:00",
        "project": "research",
        "tier": "medium",
        "quota": "in-quota",
    }
    data.update(fields)
    record_submission(SubmissionRecord(**data), path=history_path(env))  # type: ignore[arg-type]


@dataclass
class CountingSlurm(FakeSlurm):
    """FakeSlurm that remembers the commands it answered."""

    calls: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        self.calls.append(argv)
        return super().__call__(argv)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingSlurm:
    fake = CountingSlurm()
    install_fake_slurm(monkeypatch, fake)
    return fake


def test_history_filters_refreshes_unfinished_and_stores_final(
    env: Env, counting: CountingSlurm
) -> None:
    slurm = counting
    remember(env, "1", state="COMPLETED", attempts=1, exit_code=0)
    remember(env, "2", project="vision", tier="high", submitted_at="2026-11-21T10:00:00+00:00")
    remember(env, "3", tier="low", quota="over-quota", submitted_at="2026-11-22T10:00:00+00:00")
    remember(env, "4", site="elsewhere")  # another site's job: not asked about
    slurm.jobs["2"] = FakeJob("j2", ["FAILED"], exit_code="3:0", in_squeue=False)
    slurm.jobs["3"] = FakeJob("j3", ["RUNNING"])

    out = run(env, "history", "--json")
    assert out.exit_code == 0, out.output
    rows = {r["job_id"]: r for r in json.loads(out.stdout)}
    assert [(rows[i]["state"], rows[i]["attempts"]) for i in "1234"] == [
        ("COMPLETED", 1),
        ("FAILED", 1),
        ("RUNNING", 1),
        (None, None),
    ]
    squeues = [argv for argv in slurm.calls if argv[0] == "squeue"]
    assert len(squeues) == 1  # one squeue for the unfinished jobs 2 and 3 of this site
    assert "--jobs=2,3" in squeues[0]
    stored = find_record(job_id="2", path=history_path(env))
    assert stored is not None
    assert (stored.state, stored.exit_code) == ("FAILED", 3)  # final: stored
    running = find_record(job_id="3", path=history_path(env))
    assert running is not None
    assert running.state is None  # not final: shown, not stored

    def ids(*args: str) -> list[str]:
        result = run(env, "history", "--json", *args)
        assert result.exit_code == 0, result.output
        return [r["job_id"] for r in json.loads(result.stdout)]

    assert ids("--project", "vision") == ["2"]
    assert ids("--tier", "medium") == ["1", "4"]
    assert ids("--state", "failed") == ["2"]
    assert ids("--since", "2026-11-21") == ["2", "3"]
    assert ids("--until", "2026-11-21") == ["1", "4"]
    assert ids("--limit", "1") == ["4"]  # the newest recorded


def test_history_table(env: Env, slurm: FakeSlurm) -> None:
    empty = run(env, "history")
    assert empty.exit_code == 0
    assert "No matching submissions" in empty.stdout
    remember(env, "1", state="COMPLETED", attempts=2)
    out = run(env, "history")
    assert out.exit_code == 0, out.output
    header, line = out.stdout.splitlines()[:2]
    assert header.split() == [
        "ID",
        "NAME",
        "PROJECT",
        "TIER",
        "QUOTA",
        "STATE",
        "ATTEMPTS",
        "SUBMITTED",
    ]
    assert line.split() == [
        "1",
        "j1",
        "research",
        "medium",
        "in-quota",
        "COMPLETED",
        "2",
        "2026-11-20T10:00:00Z",
    ]


def test_history_without_slurm_shows_what_it_has(env: Env, tmp_path: Path) -> None:
    remember(env, "1")
    no_slurm = {**env, "HPCLAUNCH_BACKEND": "cli", "PATH": str(tmp_path)}
    out = run(no_slurm, "history")
    assert out.exit_code == 0, out.output
    assert "j1" in out.stdout
    assert "Warning: states not refreshed from Slurm" in out.stderr


@dataclass
class NamingSlurm(CountingSlurm):
    """Names each submitted job ``hello``, as sbatch would from the script."""

    def _sbatch(self, argv: tuple[str, ...]) -> CommandResult:
        answer = super()._sbatch(argv)
        self.jobs[answer.stdout.strip()].name = "hello"
        return answer


def test_submit_wait_stores_the_final_state(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = NamingSlurm()
    install_fake_slurm(monkeypatch, fake)
    fake.new_job_exit = "0:0"
    result = run(env, "submit", "--wait", HELLO)
    assert result.exit_code == 0, result.output
    record = find_record(job_id="1000", path=history_path(env))
    assert record is not None
    assert (record.state, record.attempts, record.exit_code) == ("COMPLETED", 1, 0)


def test_a_sweeps_array_rows_carry_user_project_and_account(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    # One history writer for jobs and sweeps: `history --project P` finds sweep arrays too.
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: sw\ncommand: ['echo', '{x}']\nproject: research\ntier: low\n"
        "sweep: {method: grid, parameters: {x: [1, 2, 3]}}\n"
    )
    result = run(env, "--site", env["HPCLAUNCH_SITE"], "sweep", "--no-check", str(spec))
    assert result.exit_code == 0, result.output
    [record] = recent_submissions(path=history_path(env))
    assert record.user
    assert (record.project, record.account, record.tier) == ("research", "research-oq", "low")
    found = run(env, "history", "--project", "research", "--json")
    assert record.job_id in found.stdout


def test_a_broken_history_is_an_error_not_a_traceback_and_submit_still_works(
    env: dict[str, str], slurm: FakeSlurm
) -> None:
    from tests.unit.conftest import assert_clean_error

    path = history_path(env)
    path.mkdir(parents=True)  # a directory where the database should be: SQLite cannot open it
    out = run(env, "history")
    assert_clean_error(out, 1, f"the hpclaunch history {path} cannot be used")
    assert "Hint: check that" in out.stderr
    submitted = run(env, "submit", HELLO)
    assert submitted.exit_code == 0, submitted.output  # the job matters more than its row
    assert "could not record job 1000 in the history" in submitted.stderr
    assert len(slurm.submitted) == 1
