"""The local record of what this user submitted: ``hpclaunch status``, ``history`` and more.

A SQLite database, ``$XDG_DATA_HOME/hpclaunch/history.sqlite``
(``~/.local/share/hpclaunch/history.sqlite`` when ``XDG_DATA_HOME`` is unset), private
(file 0600, directory 0700). It lives where the CLI runs: on a laptop that submits over SSH
it is the laptop's; for one shared record, run hpclaunch on the login node. Slurm stays the
source of truth: the state, attempts and exit code here are the last ones a command saw.

Safe against concurrent CLI calls: WAL journal (readers never wait for a writer and see
whole transactions only), a busy timeout for writers, and every write one transaction
(``BEGIN IMMEDIATE``). A ``schema_version`` table and :data:`_MIGRATIONS` take an older
database forward; the first use also imports the earlier JSON-lines record
(``$XDG_STATE_HOME/hpclaunch/submissions.jsonl``, amendments included) once, in the same
transaction, and leaves that file where it is.

A change to a submitted job (``hpclaunch tier``) updates its row in place
(:func:`record_amendment`, ``amended_at`` set). A database that cannot be opened or written
raises :class:`~hpclaunch.errors.HistoryError`. Fields that a newer hpclaunch adds to
:class:`SubmissionRecord` and that have no column yet are kept in the row's ``extra`` JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpclaunch._private import make_private_dirs
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import HistoryError

__all__ = [
    "SCHEMA_VERSION",
    "SubmissionRecord",
    "find_record",
    "find_spec",
    "history_path",
    "legacy_path",
    "query_submissions",
    "recent_submissions",
    "record_amendment",
    "record_state",
    "record_submission",
]

#: The schema this hpclaunch writes; older databases are migrated on first use.
SCHEMA_VERSION = 2
#: How long a writer waits for another one (seconds) before giving up.
BUSY_TIMEOUT = 30.0


@dataclass(frozen=True)
class SubmissionRecord:
    """One submitted job.

    ``log_dir``, ``tier``, ``qos`` and ``quota`` were added later: older records lack them
    (``None``; their logs are in ``job_dir``). ``quota``: ``in-quota``, ``over-quota`` or
    ``none`` (the site has no quotas), as decided at submission. ``amended_at`` (ISO 8601,
    UTC) marks a record changed after submission (``hpclaunch tier``).

    ``user`` (the Slurm user), ``project`` (the spec's project; ``account`` is the Slurm
    account it ran in, ``P-oq`` when over quota) and ``spec_hash`` (sha256 of the spec
    file's canonical JSON) are set at submission. ``state``, ``attempts`` and
    ``exit_code`` are the last ones ``status``/``history``/``submit --wait`` saw.
    ``dependency`` is the ``--dependency`` it was submitted with (``afterok:123:124``), for
    ``status`` to say which job it waits for or why it never ran (kept in ``extra``).
    ``rerun_of``: the job this one reruns (``hpclaunch rerun``); ``submit_dir``: where the
    spec's relative paths started (the submit directory; ``None`` over SSH, where they start
    from the job directory), for a rerun to read them the same way (both in ``extra``).
    The spec itself is kept once per ``spec_hash`` (:func:`find_spec`). ``notify``: who the
    job tells of its events (``webhook lab-slack``: a name, never a URL), in ``extra``.
    """

    job_id: str
    cluster: str | None
    name: str
    submission_id: str
    job_dir: str
    site: str
    submitted_at: str  # ISO 8601, UTC
    log_dir: str | None = None
    tier: str | None = None
    qos: str | None = None
    quota: str | None = None
    amended_at: str | None = None
    user: str | None = None
    project: str | None = None
    account: str | None = None
    spec_hash: str | None = None
    state: str | None = None
    attempts: int | None = None
    exit_code: int | None = None
    dependency: str | None = None
    rerun_of: str | None = None
    submit_dir: str | None = None
    notify: str | None = None

    @property
    def logs(self) -> str:
        """Where the job's ``attempt-N.log`` files are."""
        return self.log_dir or self.job_dir


# The columns of schema 1, in SubmissionRecord's order; other fields go to "extra".
_COLUMNS = (
    "job_id",
    "cluster",
    "name",
    "submission_id",
    "job_dir",
    "site",
    "submitted_at",
    "log_dir",
    "tier",
    "qos",
    "quota",
    "amended_at",
    "user",
    "project",
    "account",
    "spec_hash",
    "state",
    "attempts",
    "exit_code",
)


def _schema_1(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE submissions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL, cluster TEXT, name TEXT NOT NULL,
            submission_id TEXT NOT NULL, job_dir TEXT NOT NULL, site TEXT NOT NULL,
            submitted_at TEXT NOT NULL, log_dir TEXT, tier TEXT, qos TEXT, quota TEXT,
            amended_at TEXT, user TEXT, project TEXT, account TEXT, spec_hash TEXT,
            state TEXT, attempts INTEGER, exit_code INTEGER, extra TEXT,
            UNIQUE (job_id, submission_id))"""
    )
    db.execute("CREATE INDEX submissions_submitted_at ON submissions (submitted_at)")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _schema_2(db: sqlite3.Connection) -> None:
    # The specs jobs were submitted from, once per hash (``hpclaunch rerun``).
    db.execute(
        "CREATE TABLE specs (spec_hash TEXT PRIMARY KEY, spec TEXT NOT NULL, "
        "stored_at TEXT NOT NULL)"
    )


#: Migration i takes a database from schema version i to i + 1 (0: empty file).
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_schema_1, _schema_2)


def history_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the database lives (see the module docstring)."""
    return user_dir("data", env) / "history.sqlite"


def legacy_path(env: Mapping[str, str] | None = None) -> Path:
    """The JSON-lines record of hpclaunch before the database (imported once)."""
    return user_dir("state", env) / "submissions.jsonl"


# -- writing ---------------------------------------------------------------------------------


def record_submission(
    record: SubmissionRecord,
    path: Path | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
) -> None:
    """Add ``record`` (a record of the same job id and submission id is replaced in place),
    and ``spec``, the spec it was submitted from (the mapping whose canonical JSON hashes to
    ``record.spec_hash``), unless a spec of that hash is kept already."""
    with _transaction(path) as db:
        _upsert(db, record)
        if spec is not None and record.spec_hash:
            db.execute(
                "INSERT OR IGNORE INTO specs (spec_hash, spec, stored_at) VALUES (?, ?, ?)",
                (record.spec_hash, json.dumps(spec, sort_keys=True), _now()),
            )


def record_amendment(
    record: SubmissionRecord,
    *,
    tier: str | None,
    qos: str | None,
    quota: str | None,
    path: Path | None = None,
) -> SubmissionRecord:
    """Give ``record``'s job a new tier, QOS and quota class (``amended_at``: now).

    Returns:
        The amended record.
    """
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    amended = replace(record, tier=tier, qos=qos, quota=quota, amended_at=now)
    with _transaction(path) as db:
        changed = db.execute(
            "UPDATE submissions SET tier = ?, qos = ?, quota = ?, amended_at = ? "
            "WHERE job_id = ? AND submission_id = ?",
            (tier, qos, quota, now, record.job_id, record.submission_id),
        ).rowcount
        if not changed:
            _upsert(db, amended)
    return amended


def record_state(
    job_id: str,
    *,
    state: str,
    attempts: int | None,
    exit_code: int | None,
    path: Path | None = None,
) -> bool:
    """Store the last seen state of the newest record of ``job_id``.

    Returns:
        Whether such a record exists.
    """
    with _transaction(path) as db:
        return bool(
            db.execute(
                "UPDATE submissions SET state = ?, attempts = COALESCE(?, attempts), "
                "exit_code = COALESCE(?, exit_code) WHERE seq = "
                "(SELECT MAX(seq) FROM submissions WHERE job_id = ?)",
                (state, attempts, exit_code, job_id),
            ).rowcount
        )


# -- reading ---------------------------------------------------------------------------------


def recent_submissions(limit: int = 20, path: Path | None = None) -> list[SubmissionRecord]:
    """The last ``limit`` records, oldest first."""
    if limit <= 0:
        return []
    return _select("", (), limit, path)


def find_record(
    *, job_id: str | None = None, submission_id: str | None = None, path: Path | None = None
) -> SubmissionRecord | None:
    """The latest record with this job id (or submission id), or ``None``."""
    if job_id is not None:
        found = _select("WHERE job_id = ?", (job_id,), 1, path)
    elif submission_id is not None:
        found = _select("WHERE submission_id = ?", (submission_id,), 1, path)
    else:
        return None
    return found[0] if found else None


def find_spec(spec_hash: str, path: Path | None = None) -> dict[str, Any] | None:
    """The spec kept for ``spec_hash`` (see :func:`record_submission`), or ``None``."""
    with _connection(path, create=False) as db:
        if db is None:
            return None
        row = db.execute("SELECT spec FROM specs WHERE spec_hash = ?", (spec_hash,)).fetchone()
    if row is None:
        return None
    try:
        data = json.loads(row[0])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def query_submissions(
    *,
    project: str | None = None,
    tier: str | None = None,
    state: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
    path: Path | None = None,
    spec_hash: str | None = None,
    name: str | None = None,
) -> list[SubmissionRecord]:
    """The records that match every filter given, oldest first (the newest ``limit``).

    Args:
        project: The spec's project (or, for older records, the account).
        tier: The tier at submission or after an amendment.
        state: The last seen Slurm state (case-insensitive).
        since: Submitted at or after (an aware datetime; naive ones are local time).
        until: Submitted before.
        limit: At most this many (the newest); ``None``: all.
        spec_hash: Submitted from this spec (its sha256, overrides applied).
        name: The job's name.
    """
    where: list[str] = []
    args: list[Any] = []
    if project is not None:
        where.append("(project = ? OR (project IS NULL AND account = ?))")
        args += [project, project]
    if tier is not None:
        where.append("tier = ?")
        args.append(tier)
    if state is not None:
        where.append("UPPER(state) = ?")
        args.append(state.upper())
    if since is not None:
        where.append("submitted_at >= ?")
        args.append(_utc_text(since))
    if until is not None:
        where.append("submitted_at < ?")
        args.append(_utc_text(until))
    if spec_hash is not None:
        where.append("spec_hash = ?")
        args.append(spec_hash)
    if name is not None:
        where.append("name = ?")
        args.append(name)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    return _select(clause, tuple(args), limit, path)


def _utc_text(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def _select(
    where: str, args: tuple[Any, ...], limit: int | None, path: Path | None
) -> list[SubmissionRecord]:
    sql = f"SELECT {', '.join(_COLUMNS)}, extra FROM submissions {where} ORDER BY seq DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    with _connection(path, create=False) as db:
        if db is None:
            return []
        rows = db.execute(sql, args).fetchall()
    return [_from_row(row) for row in reversed(rows)]


# -- rows ------------------------------------------------------------------------------------


def _known_fields() -> set[str]:
    return {f.name for f in fields(SubmissionRecord)}


def _from_row(row: Sequence[Any]) -> SubmissionRecord:
    data = dict(zip(_COLUMNS, row[:-1], strict=True))
    if row[-1]:
        with contextlib.suppress(ValueError):
            data.update(json.loads(row[-1]))
    known = _known_fields()
    return SubmissionRecord(**{k: v for k, v in data.items() if k in known})


def _upsert(db: sqlite3.Connection, record: SubmissionRecord) -> None:
    data = asdict(record)
    extra = {k: v for k, v in data.items() if k not in _COLUMNS}
    values = [data[c] for c in _COLUMNS] + [json.dumps(extra, sort_keys=True) if extra else None]
    names = [*_COLUMNS, "extra"]
    updates = ", ".join(f"{c} = excluded.{c}" for c in names if c not in _KEY)
    db.execute(
        f"INSERT INTO submissions ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        f"ON CONFLICT (job_id, submission_id) DO UPDATE SET {updates}",
        values,
    )


_KEY = ("job_id", "submission_id")


# -- the database ----------------------------------------------------------------------------


@contextlib.contextmanager
def _transaction(path: Path | None) -> Iterator[sqlite3.Connection]:
    """A write transaction (``BEGIN IMMEDIATE``: the write lock from the start, so two
    writers never deadlock upgrading a read lock); committed at the end, or rolled back."""
    with _connection(path, create=True) as db:
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


@contextlib.contextmanager
def _connection(path: Path | None, *, create: bool) -> Iterator[sqlite3.Connection | None]:
    """An open, migrated database (``None`` when it does not exist and ``create`` is off
    and there is no older record to import); closed at the end."""
    legacy = legacy_path() if path is None else None
    path = path or history_path()
    if not path.exists():
        if not create and (legacy is None or not legacy.exists()):
            yield None
            return
        try:
            make_private_dirs(path.parent)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # private before SQLite
        except OSError as exc:
            raise _history_error(path, exc) from exc
    try:
        # isolation_level=None: no implicit transactions, ours are explicit.
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    except sqlite3.Error as exc:
        raise _history_error(path, exc) from exc
    try:
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        _prepare_when_free(db, legacy)
        yield db
    except (sqlite3.Error, OSError) as exc:
        raise _history_error(path, exc) from exc
    finally:
        db.close()


def _history_error(path: Path, exc: Exception) -> HistoryError:
    return HistoryError(
        f"the hpclaunch history {path} cannot be used: {exc}",
        hint=f"check that {path.parent} is yours and writable and the disk is not full; the "
        "history only lets status/logs/history find your jobs: moving the file away starts "
        "a new one (your jobs in Slurm are not affected)",
    )


def _prepare_when_free(db: sqlite3.Connection, legacy: Path | None) -> None:
    """:func:`_prepare`, tried again while another process holds the new database.

    SQLite returns "database is locked" at once, without waiting the busy timeout, where
    waiting could deadlock (sqlite3_busy_handler(3)): ``PRAGMA journal_mode = WAL`` asks for
    an exclusive lock, and processes that create the history together (the first commands
    run side by side) can each hold a lock the other needs. Seen once in CI: a reader beside
    8 writers of a new history, on 2 loaded cores.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT
    wait = 0.01
    while True:
        try:
            _prepare(db, legacy)
            return
        except sqlite3.OperationalError as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            locked = "locked" in str(exc) or "busy" in str(exc)
            if not locked or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(wait * 2, 0.25)


def _prepare(db: sqlite3.Connection, legacy: Path | None) -> None:
    """WAL mode, the current schema, and the one-time import of the JSON-lines record."""
    if _version(db) == SCHEMA_VERSION and (legacy is None or _imported(db)):
        return
    # WAL needs shared memory between the processes: a filesystem that cannot give it
    # (some network filesystems) keeps the rollback journal, which is still safe.
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN IMMEDIATE")
    try:
        version = _version(db)
        if version > SCHEMA_VERSION:
            db.execute("ROLLBACK")
            return  # a newer hpclaunch made it: its columns are a superset of ours
        if version == 0:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for migrate in _MIGRATIONS[version:]:
            migrate(db)
        db.execute("DELETE FROM schema_version")
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        if legacy is not None and not _imported(db):
            count = _import_jsonl(db, legacy)
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('jsonl_import', ?)",
                (json.dumps({"path": str(legacy), "records": count, "at": _now()}),),
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _version(db: sqlite3.Connection) -> int:
    try:
        row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
    except sqlite3.OperationalError:  # no such table: a new database
        return 0
    return int(row[0]) if row and row[0] is not None else 0


def _imported(db: sqlite3.Connection) -> bool:
    row = db.execute("SELECT 1 FROM meta WHERE key = 'jsonl_import'").fetchone()
    return row is not None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _import_jsonl(db: sqlite3.Connection, legacy: Path) -> int:
    """Replay the JSON-lines record into the database; returns the records read.

    Its semantics are kept: an amendment (``amended_at``) takes the place of the job's
    earlier record; a record repeated for the same job and submission id is one row.
    Damaged lines are skipped, as the old reader did.
    """
    try:
        lines = legacy.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    known = _known_fields()
    count = 0
    for line in lines:
        try:
            data = json.loads(line)
            record = SubmissionRecord(**{k: v for k, v in data.items() if k in known})
        except (ValueError, TypeError, AttributeError):
            continue
        _upsert(db, record)
        count += 1
    return count
