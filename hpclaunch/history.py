"""A small local record of what this user submitted, so ``hpclaunch status`` can list it.

One JSON object per line in ``$XDG_STATE_HOME/hpclaunch/submissions.jsonl``
(``~/.local/state/hpclaunch/submissions.jsonl`` when ``XDG_STATE_HOME`` is unset); the file
is private (0600). It is only a list of recent jobs: Slurm stays the source of truth.

The file is append-only. A change to a submitted job (``hpclaunch tier``) appends the whole
record again with the new values and ``amended_at`` set (:func:`record_amendment`); readers
put it in the place of the job's earlier record. An older hpclaunch, which does not know
``amended_at``, reads it as one more record of the same job, and the latest one wins there
too (:func:`find_record`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

__all__ = [
    "SubmissionRecord",
    "find_record",
    "history_path",
    "recent_submissions",
    "record_amendment",
    "record_submission",
]


@dataclass(frozen=True)
class SubmissionRecord:
    """One submitted job.

    ``log_dir``, ``tier``, ``qos`` and ``quota`` were added later: older records lack them
    (``None``; their logs are in ``job_dir``). ``quota``: ``in-quota``, ``over-quota`` or
    ``none`` (the site has no quotas), as decided at submission. ``amended_at`` (ISO 8601,
    UTC) marks a record that replaces the job's earlier one (see the module docstring).
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

    @property
    def logs(self) -> str:
        """Where the job's ``attempt-N.log`` files are."""
        return self.log_dir or self.job_dir


def history_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the record lives (see the module docstring)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "hpclaunch" / "submissions.jsonl"


def record_submission(record: SubmissionRecord, path: Path | None = None) -> None:
    """Append ``record`` to the history file (created private if missing)."""
    path = path or history_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(asdict(record), sort_keys=True) + "\n")


def record_amendment(
    record: SubmissionRecord,
    *,
    tier: str | None,
    qos: str | None,
    quota: str | None,
    path: Path | None = None,
) -> SubmissionRecord:
    """Append ``record`` with a new tier, QOS and quota class, as an amendment.

    Returns:
        The amended record.
    """
    from dataclasses import replace
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    amended = replace(record, tier=tier, qos=qos, quota=quota, amended_at=now)
    record_submission(amended, path)
    return amended


def recent_submissions(limit: int = 20, path: Path | None = None) -> list[SubmissionRecord]:
    """The last ``limit`` records, oldest first; damaged lines are skipped."""
    path = path or history_path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    known = {f.name for f in fields(SubmissionRecord)}
    records: list[SubmissionRecord] = []
    where: dict[tuple[str, str], int] = {}  # (job id, submission id) → index in records
    for line in lines:
        try:  # keys a newer hpclaunch added are ignored
            data = json.loads(line)
            record = SubmissionRecord(**{k: v for k, v in data.items() if k in known})
        except (ValueError, TypeError, AttributeError):
            continue
        key = (record.job_id, record.submission_id)
        if record.amended_at is not None and key in where:
            records[where[key]] = record  # an amendment takes the earlier record's place
        else:
            where[key] = len(records)
            records.append(record)
    return records[-limit:] if limit > 0 else []


def find_record(
    *, job_id: str | None = None, submission_id: str | None = None, path: Path | None = None
) -> SubmissionRecord | None:
    """The latest record with this job id (or submission id), or ``None``."""
    for record in reversed(recent_submissions(limit=sys.maxsize, path=path)):
        if job_id is not None and record.job_id == job_id:
            return record
        if submission_id is not None and record.submission_id == submission_id:
            return record
    return None
