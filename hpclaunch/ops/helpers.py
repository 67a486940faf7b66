"""The second façade: what a program (the CLI) asks that is not a use case of a
:class:`~hpclaunch.ops.session.Session`. Most need no session at all: where the history
is, its newest rows, hpclaunch's time words, the spec's schema, whether a file is a
pipeline, the scheduling simulator. The rest answer a question about a session's jobs
before a use case acts on them (which jobs ``cancel --name`` or ``--all`` would take, the
job whose logs ``hpclaunch logs`` reads).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.ops.logs import log_record
from hpclaunch.ops.records import find_job_record
from hpclaunch.ops.simulate import simulate, simulate_published, write_workload
from hpclaunch.planning.schema import pipeline_schema
from hpclaunch.planning.schema import spec_schema as job_schema
from hpclaunch.slurm.job_ids import JOB_ID_FORMS, is_job_id
from hpclaunch.slurm.usage import parse_when
from hpclaunch.store.history import history_path, recent_submissions
from hpclaunch.store.sweeps import list_sweeps
from hpclaunch.study.summary import summary_line

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.ops.context import Context
    from hpclaunch.ops.job import Job
    from hpclaunch.slurm.jobs import JobInfo

__all__ = [
    "JOB_ID_FORMS",
    "history_path",
    "is_job_id",
    "is_pipeline",
    "job_with_logs",
    "jobs_named",
    "names_a_sweep",
    "recent_submissions",
    "simulate",
    "simulate_published",
    "spec_schema",
    "summary_line",
    "unfinished_jobs",
    "when",
    "write_workload",
]


def when(text: str, now: datetime | None = None) -> datetime:
    """A time as hpclaunch's options take it, as a naive local datetime: ``now``,
    ``today``, ``7d``/``12h``/``30min``/``2w`` before ``now``, or ISO 8601
    (``2026-11-01``, ``2026-11-01T08:00``).

    Raises:
        ValueError: None of these.
    """
    return parse_when(text, now or datetime.now())


def spec_schema(*, pipeline: bool = False) -> dict[str, object]:
    """The JSON schema (draft 2020-12) of a job spec, or of a multi-job file
    (``pipeline``), as ``hpclaunch schema`` prints it."""
    return pipeline_schema() if pipeline else job_schema()


def is_pipeline(path: str | Path) -> bool:
    """Whether the file at ``path`` is a multi-job file (``jobs:``), for
    ``session.pipelines``, not a job spec."""
    from hpclaunch.planning.pipeline import is_pipeline_file  # noqa: PLC0415 (pydantic, yaml)

    return is_pipeline_file(str(path))


def names_a_sweep(text: str) -> bool:
    """Whether ``text``, which may read as a job id (a sweep id's prefix of decimal
    digits: one in 40 of 8-character prefixes), names a sweep recorded here rather than
    a job of the history (``hpclaunch report``), or is the array job of one (a sweep's
    or map's array is not one job: its tasks are)."""
    records = list_sweeps()
    if any(array.job_id == text for record in records for array in record.arrays):
        return True
    if len(text) < 4 or find_job_record(text) is not None:
        return False
    return any(r.sweep_id.startswith(text) for r in records)


def job_with_logs(session: Context, job_id: str) -> Job:
    """A job of the history, whose logs hpclaunch knows where to find (``hpclaunch
    logs``).

    Raises:
        JobNotFound: Not in the history (the message says how to find its output).
        HpclaunchError: ``job_id`` is a sweep's array: each task has its own log.
    """
    from hpclaunch.ops.job import job_of_record  # noqa: PLC0415 (the backends: completion stays light)

    return job_of_record(session, log_record(job_id))


def jobs_named(session: Context, name: str) -> list[JobRef]:
    """Your unfinished jobs named exactly ``name`` (as squeue prints it), for ``cancel
    --name``."""
    from hpclaunch.ops import cancel  # noqa: PLC0415 (the backends: completion stays light)

    return cancel.jobs_named(session, name)


def unfinished_jobs(session: Context) -> list[JobInfo] | None:
    """The history's jobs on this site that have not ended (one status call), for
    ``cancel --all``; ``None`` when the history has no job of this site."""
    from hpclaunch.ops import cancel  # noqa: PLC0415 (the backends: completion stays light)

    return cancel.unfinished_jobs(session)
