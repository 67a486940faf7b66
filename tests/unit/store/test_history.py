"""hpclaunch.store.history over SQLite: the one-time import of the JSON-lines record, filters,
state updates, permissions, and concurrent writers and readers in separate processes."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpclaunch.store.history import (
    SCHEMA_VERSION,
    SubmissionRecord,
    find_record,
    find_spec,
    history_path,
    legacy_path,
    query_submissions,
    recent_submissions,
    record_amendment,
    record_state,
    record_submission,
)


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Private XDG dirs in os.environ (the default paths follow them)."""
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def rec(job_id: str, **fields: object) -> SubmissionRecord:
    data: dict[str, object] = {
        "job_id": job_id,
        "cluster": None,
        "name": f"n{job_id}",
        "submission_id": f"s{job_id}",
        "job_dir": f"/j/{job_id}",
        "site": "local",
        "submitted_at": "2026-11-22T10:00:00+00:00",
    }
    data.update(fields)
    return SubmissionRecord(**data)  # type: ignore[arg-type]


def test_paths_follow_xdg(tmp_path: Path) -> None:
    env = {"HOME": "/h", "XDG_DATA_HOME": "/d", "XDG_STATE_HOME": "/s"}
    assert history_path(env) == Path("/d/hpclaunch/history.sqlite")
    assert legacy_path(env) == Path("/s/hpclaunch/submissions.jsonl")
    assert history_path({"HOME": "/h"}) == Path("/h/.local/share/hpclaunch/history.sqlite")


def test_private_file_and_directory_wal_and_schema_version(xdg: dict[str, str]) -> None:
    record_submission(rec("1"))
    path = history_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        db.close()


def test_reading_creates_nothing(xdg: dict[str, str]) -> None:
    assert recent_submissions() == []
    assert find_record(job_id="1") is None
    assert not history_path().exists()


def write_jsonl(path: Path, records: list[dict[str, object]], junk: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records]
    path.write_text("\n".join(lines[:1] + ([junk] if junk else []) + lines[1:]) + "\n")


def test_jsonl_record_is_imported_once_with_its_amendments(xdg: dict[str, str]) -> None:
    old = legacy_path()
    first = {**rec("1", tier="low", qos="low").__dict__}
    for key in ("user", "project", "account", "spec_hash", "state", "attempts", "exit_code"):
        first.pop(key)  # the old format never had them
    first.pop("amended_at")
    amended = {**first, "tier": "critical", "qos": "critical", "amended_at": "2026-11-22T11:00"}
    second = {**first, "job_id": "2", "submission_id": "s2", "future_key": 1}
    write_jsonl(old, [first, second, amended, second], junk="{not json")
    before = old.read_text()

    records = recent_submissions(limit=100)  # the first use imports
    assert [(r.job_id, r.tier, r.amended_at) for r in records] == [
        ("1", "critical", "2026-11-22T11:00"),
        ("2", "low", None),
    ]
    assert old.read_text() == before  # left in place
    record_submission(rec("3"))
    # Imported once: a later use (another process, another hpclaunch) reads no duplicate.
    assert [r.job_id for r in recent_submissions(limit=100)] == ["1", "2", "3"]
    db = sqlite3.connect(history_path())
    try:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'jsonl_import'").fetchone()
    finally:
        db.close()
    assert json.loads(value)["records"] == 4


def test_import_finds_the_same_records_as_the_old_reader(xdg: dict[str, str]) -> None:
    records = [{**rec(str(i)).__dict__} for i in range(30)]
    write_jsonl(legacy_path(), records)
    assert [r.job_id for r in recent_submissions(limit=10)] == [str(i) for i in range(20, 30)]
    assert find_record(submission_id="s7") == rec("7")


def test_amendment_in_place_and_state_updates(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    record_submission(rec("1", tier="low"), path)
    record_submission(rec("2"), path)
    first = find_record(job_id="1", path=path)
    assert first is not None
    amended = record_amendment(first, tier="high", qos="high", quota="in-quota", path=path)
    assert record_state("1", state="COMPLETED", attempts=2, exit_code=0, path=path)
    assert not record_state("404", state="FAILED", attempts=1, exit_code=1, path=path)
    got = find_record(job_id="1", path=path)
    assert got is not None
    assert amended.amended_at is not None
    assert (got.tier, got.quota, got.state, got.attempts, got.exit_code) == (
        "high",
        "in-quota",
        "COMPLETED",
        2,
        0,
    )
    assert [r.job_id for r in recent_submissions(path=path)] == ["1", "2"]
    # A record submitted again (same job and submission id) is replaced, not repeated.
    record_submission(rec("2", name="renamed"), path)
    assert [r.name for r in recent_submissions(path=path)] == ["n1", "renamed"]


def test_filters(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    rows = [
        rec("1", project="research", tier="low", submitted_at="2026-11-01T00:00:00+00:00"),
        rec("2", project="vision", tier="high", submitted_at="2026-11-10T00:00:00+00:00"),
        rec("3", account="research", tier="high", submitted_at="2026-11-20T00:00:00+00:00"),
        rec("4", project="research", tier="high", submitted_at="2026-11-21T00:00:00+00:00"),
    ]
    for row in rows:
        record_submission(row, path)
    record_state("4", state="FAILED", attempts=1, exit_code=3, path=path)

    def ids(**filters: object) -> list[str]:
        return [r.job_id for r in query_submissions(path=path, **filters)]  # type: ignore[arg-type]

    assert ids() == ["1", "2", "3", "4"]
    assert ids(project="research") == ["1", "3", "4"]  # 3: an older record, by its account
    assert ids(tier="high") == ["2", "3", "4"]
    assert ids(state="failed") == ["4"]
    utc = timezone.utc
    assert ids(since=datetime(2026, 11, 10, tzinfo=utc)) == ["2", "3", "4"]
    assert ids(until=datetime(2026, 11, 10, tzinfo=utc)) == ["1"]
    assert ids(project="research", tier="high", limit=1) == ["4"]
    assert query_submissions(path=tmp_path / "none.sqlite") == []


def test_fields_without_a_column_survive(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    record_submission(rec("1"), path)
    db = sqlite3.connect(path)
    try:  # as a newer hpclaunch would write a field this one does not know
        db.execute("UPDATE submissions SET extra = ? WHERE job_id = '1'", ('{"later": 1}',))
        db.commit()
    finally:
        db.close()
    assert find_record(job_id="1", path=path) == rec("1")


def test_a_schema_1_history_gains_the_specs_table_and_keeps_its_rows(tmp_path: Path) -> None:
    """The history of hpclaunch before rerun (schema 1) is migrated in place."""
    from hpclaunch.store.history import _schema_1

    path = tmp_path / "h.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        _schema_1(db)
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version VALUES (1)")
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('jsonl_import', '{}')"
        )  # imported already
        db.execute(
            "INSERT INTO submissions (job_id, name, submission_id, job_dir, site, submitted_at) "
            "VALUES ('9', 'old', 's9', '/j/9', 'local', '2026-11-01T00:00:00+00:00')"
        )
    finally:
        db.close()
    assert find_record(job_id="9", path=path) is not None
    spec = {"name": "new", "command": ["true"]}
    record_submission(rec("10", spec_hash="ab" * 32, rerun_of="9"), path, spec=spec)
    record_submission(rec("11", spec_hash="ab" * 32), path, spec={"other": 1})  # kept once
    assert find_spec("ab" * 32, path=path) == spec
    assert find_spec("cd" * 32, path=path) is None
    again = find_record(job_id="10", path=path)
    assert again is not None
    assert again.rerun_of == "9"
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(2,)]
    finally:
        db.close()


WRITER = """
import sys, time
from pathlib import Path
from hpclaunch.store.history import SubmissionRecord, record_submission
path, worker, go = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
for i in range(50):
    j = f"{worker}-{i}"
    record_submission(SubmissionRecord(j, None, "n" + j, "s" + j, "/j/" + j, "local",
                      "2026-11-22T10:00:00+00:00", log_dir="/l/" + j, tier="low", user="u" + j),
                      path)
"""


def test_concurrent_writers_lose_nothing_and_readers_see_whole_rows(tmp_path: Path) -> None:
    path, go = tmp_path / "h.sqlite", tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(go)],
            env={**os.environ, "XDG_DATA_HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)},
        )
        for w in range(8)
    ]
    go.touch()
    reads = 0
    deadline = time.monotonic() + 120
    try:
        while any(w.poll() is None for w in writers):
            for r in recent_submissions(limit=1000, path=path):  # while they write
                j = r.job_id
                assert (r.name, r.submission_id, r.job_dir, r.log_dir, r.user) == (
                    "n" + j,
                    "s" + j,
                    "/j/" + j,
                    "/l/" + j,
                    "u" + j,
                )
            reads += 1
            assert time.monotonic() < deadline
    finally:  # a failure here must not leave writers running into the next test
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert [w.wait() for w in writers] == [0] * 8
    records = recent_submissions(limit=10_000, path=path)
    assert len(records) == 400
    assert {r.job_id for r in records} == {f"{w}-{i}" for w in range(8) for i in range(50)}
    assert reads > 1


OPENER = """
import sys, time
from pathlib import Path
from hpclaunch.store.history import SubmissionRecord, record_submission
path, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
record_submission(SubmissionRecord(sys.argv[3], None, "n", "s", "/j", "local",
                  "2026-11-22T10:00:00+00:00"), path)
"""


def test_processes_creating_a_new_history_together_all_get_it(tmp_path: Path) -> None:
    # Changing a new database to WAL takes an exclusive lock, and SQLite answers "database is
    # locked" at once, without the busy timeout, where waiting could deadlock: before the
    # retry about 1 opening in 60 failed so (12 at once, on 2 cores).
    for round_ in range(8):
        path, go = tmp_path / f"h{round_}.sqlite", tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(path), str(go), str(i)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(12)
        ]
        time.sleep(0.5)  # all of them waiting at the line
        go.touch()
        failed = [err for p in procs if (err := p.communicate(timeout=60)[1]) and p.returncode]
        assert failed == [], f"round {round_}"
        assert len(recent_submissions(limit=100, path=path)) == 12
