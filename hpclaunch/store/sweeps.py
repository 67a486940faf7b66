"""The local record of a sweep: its arrays' job ids, offsets and files, so that
``hpclaunch sweep status ID`` finds them.

One JSON file per sweep, ``$XDG_STATE_HOME/hpclaunch/sweeps/<sweep id>.json`` (private,
written atomically). Each array is also in the submission history (:mod:`hpclaunch.store.history`,
through its public functions only), so ``hpclaunch status``, ``cancel`` and ``logs`` know it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.config.paths import user_dir
from hpclaunch.errors import JobNotFound
from hpclaunch.store.files import write_private
from hpclaunch.store.history import find_record
from hpclaunch.supervise.sweep_task import points_of, task_dir

if TYPE_CHECKING:
    from hpclaunch.store.history import SubmissionRecord

__all__ = [
    "SweepArray",
    "SweepRecord",
    "find_sweep",
    "find_task",
    "list_sweeps",
    "save_sweep",
    "sweeps_dir",
    "task_submission",
]


@dataclass(frozen=True)
class SweepArray:
    """One array of a sweep: Slurm job ``job_id`` runs points ``offset`` .. ``+ count - 1``
    (task *t* runs point ``offset + t``); in a packed sweep (:attr:`SweepRecord.pack`) the
    offset and count are of tasks, task *t* running pack ``offset + t``'s points.

    ``tasks``: a rerun of some points (``hpclaunch sweep rerun``): only these task ids of
    the array at ``offset`` were submitted, as ``--array=35,37``; ``None``: all of them.
    ``script``: the batch script it runs (a split sweep's over-quota part has its own);
    ``None`` in records written before it was kept: the job directory's ``job.sbatch``.
    """

    job_id: str
    offset: int
    count: int
    tasks: tuple[int, ...] | None = None
    script: str | None = None

    def task_ids(self) -> tuple[int, ...]:
        """The task ids this array has in Slurm."""
        return self.tasks if self.tasks is not None else tuple(range(self.count))

    def has_task(self, task: int) -> bool:
        """Whether task ``task`` is one of this array's (no tuple of every id built)."""
        return 0 <= task < self.count if self.tasks is None else task in self.tasks


@dataclass(frozen=True)
class SweepRecord:
    """A submitted sweep. ``pack``: points per array task (``sweep.pack``); pack *k* is
    points ``k * pack`` .. ``(k + 1) * pack - 1`` (fewer in the last)."""

    sweep_id: str
    name: str
    site: str
    job_dir: str
    log_dir: str
    params_file: str
    points: int
    submitted_at: str
    tier: str
    qos: str
    max_concurrent: int | None = None
    cluster: str | None = None
    arrays: tuple[SweepArray, ...] = field(default=())
    pack: int = 1

    def points_of(self, pack: int) -> range:
        """The points pack (array task index) ``pack`` runs: just ``pack`` unpacked."""
        return points_of(pack, self.pack, self.points)

    def task_job_id(self, point: int) -> str | None:
        """Slurm's id (``<array>_<task>``) of the task that runs ``point``: the newest
        array that has it (a rerun's); ``None``: no array has it."""
        index = point // self.pack
        for array in reversed(self.arrays):
            if array.has_task(index - array.offset):
                return f"{array.job_id}_{index - array.offset}"
        return None

    def task_of(self, job_id: str, task: int) -> int | None:
        """The point that task ``task`` of array ``job_id`` runs (a packed task's first),
        or ``None``."""
        for array in self.arrays:
            if array.job_id == job_id and array.has_task(task):
                return (array.offset + task) * self.pack
        return None

    def latest_tasks(self) -> dict[int, str]:
        """Point → the job id of the task that runs it now (``<array>_<task>``): a rerun's
        task replaces the one before it (arrays are kept in submission order)."""
        return {
            point: f"{array.job_id}_{task}"
            for array in self.arrays
            for task in array.task_ids()
            for point in self.points_of(array.offset + task)
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepRecord:
        """From :meth:`to_dict` (unknown keys ignored)."""
        known = {f for f in cls.__dataclass_fields__ if f != "arrays"}
        arrays = tuple(
            SweepArray(**{**a, "tasks": None if a.get("tasks") is None else tuple(a["tasks"])})
            for a in data.get("arrays", ())
        )
        return cls(**{k: v for k, v in data.items() if k in known}, arrays=arrays)


def sweeps_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/hpclaunch/sweeps`` (``~/.local/state/...`` by default)."""
    return user_dir("state", env) / "sweeps"


def save_sweep(record: SweepRecord, directory: Path | None = None) -> Path:
    """Write ``record`` (atomically, mode 0600); returns the file."""
    path = (directory or sweeps_dir()) / f"{record.sweep_id}.json"
    write_private(path, json.dumps(record.to_dict(), indent=1))
    return path


def list_sweeps(directory: Path | None = None) -> list[SweepRecord]:
    """Every recorded sweep, oldest first; unreadable files are skipped."""
    directory = directory or sweeps_dir()
    records = []
    for path in directory.glob("*.json") if directory.is_dir() else ():
        try:
            records.append(SweepRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return sorted(records, key=lambda r: r.submitted_at)


def find_sweep(sweep_id: str, directory: Path | None = None) -> SweepRecord:
    """The sweep with this id, a unique prefix of it (4+ characters), or one of its arrays'
    job ids.

    Raises:
        JobNotFound: No such sweep, or the prefix is ambiguous.
    """
    directory = directory or sweeps_dir()
    exact = directory / f"{sweep_id}.json"
    if sweep_id.isalnum() and exact.is_file():
        return SweepRecord.from_dict(json.loads(exact.read_text(encoding="utf-8")))
    records = list_sweeps(directory)
    found = [r for r in records if any(a.job_id == sweep_id for a in r.arrays)]
    if not found and len(sweep_id) >= 4:
        found = [r for r in records if r.sweep_id.startswith(sweep_id)]
    if len(found) == 1:
        return found[0]
    if found:
        raise JobNotFound(
            f"{sweep_id!r} names {len(found)} sweeps",
            hint="give more characters of the sweep id",
        )
    raise JobNotFound(
        f"no sweep {sweep_id!r} in {directory}",
        hint="'hpclaunch sweep SPEC' prints the sweep id; 'hpclaunch sweep list' lists them",
    )


def find_task(job_id: str, directory: Path | None = None) -> tuple[SweepRecord, int] | None:
    """For ``<array job id>_<task id>``: the sweep and the point that task runs."""
    array, _, task = job_id.partition("_")
    if not task.isdigit():
        return None
    for record in reversed(list_sweeps(directory)):
        point = record.task_of(array, int(task))
        if point is not None:
            return record, point
    return None


def task_submission(job_id: str) -> SubmissionRecord | None:
    """The history's record of the array that runs ``<array job id>_<task id>``, pointed
    at the task's own directories (``tasks/<point>/``: ledger, attempt logs), or ``None``
    when ``job_id`` is not a task of a recorded sweep."""

    found = find_task(job_id)
    if found is None:
        return None
    record, point = found
    array = find_record(job_id=job_id.partition("_")[0])
    if array is None:
        return None
    return replace(
        array,
        job_id=job_id,
        job_dir=task_dir(record.job_dir, point),
        log_dir=task_dir(record.log_dir, point),
    )
