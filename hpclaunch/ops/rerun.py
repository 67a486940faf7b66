"""Run a submitted job again, changed as asked: ``hpclaunch rerun JOB [--set k=v] [--tier T]``.

The history keeps the spec every job was submitted from, once per spec hash, with the
directory its relative paths started from (:class:`~hpclaunch.ops.plan_job.SpecKept`). A
rerun takes that spec, applies the changes as ``submit --set`` does, and submits it from the
same directory, so the rerun runs what the job ran but for the changes; its history record
names the job it came from (``rerun_of``).

A sweep task (``<array job>_<task>``) is rerun alone: as a sweep of that one point, so the
trainer sees the same parameters (``{name}`` in its arguments, ``sweep_params()``).

Not rerun: a job submitted before the history kept specs, or by another machine's
hpclaunch (its history has the spec), and a function's job (its pickled call is in the old
job's directory; call the function again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import JobNotFound, SubmissionError, TransportError
from hpclaunch.jobspec.job import apply_overrides
from hpclaunch.ops.plan_job import NamedSpec
from hpclaunch.ops.submit import submit_spec
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.ops.sweep import submit_sweep_spec
from hpclaunch.store.history import find_record, find_spec
from hpclaunch.store.sweeps import find_task

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.ops.submit import Submitted
    from hpclaunch.ops.sweep import Swept
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["Rerun", "rerun_job", "rerun_spec"]


@dataclass(frozen=True)
class Rerun:
    """What :func:`rerun_job` submitted.

    Attributes:
        of: The job that was rerun.
        spec: The spec submitted (the old one, changed as asked).
        submitted: The new job (a spec's rerun), or ``None``.
        swept: The new one-point sweep (a sweep task's rerun), or ``None``.
    """

    of: str
    spec: Mapping[str, Any]
    submitted: Submitted | None = None
    swept: Swept | None = None

    @property
    def job_id(self) -> str:
        """The new job's id (a sweep task's: ``<array job>_0``)."""
        if self.submitted is not None and self.submitted.ref is not None:
            return self.submitted.ref.job_id
        if self.swept is not None and self.swept.refs:
            return f"{self.swept.refs[0].job_id}_0"
        return ""


def rerun_spec(
    context: Context, job_id: str, overrides: Sequence[str] = (), tier: str | None = None
) -> tuple[SubmissionRecord, dict[str, Any], int | None]:
    """The spec ``job_id`` ran with, changed by ``overrides`` and ``tier``, its record, and
    for a sweep task the point it ran (the spec is then that point's one-point sweep).

    Raises:
        JobNotFound: The history does not know the job, or kept no spec of it.
        SubmissionError: A function's job, or the spec cannot be changed as asked.
    """
    task = find_task(job_id) if "_" in job_id else None
    array_id = job_id.partition("_")[0] if task is not None else job_id
    record = find_record(job_id=array_id)
    if record is None:
        raise JobNotFound(
            f"job {job_id} is not in this machine's hpclaunch history",
            hint="'hpclaunch history' lists the jobs submitted from here; a job submitted "
            "elsewhere is rerun from there, or by submitting its spec again",
        )
    spec = find_spec(record.spec_hash) if record.spec_hash else None
    if spec is None:
        raise JobNotFound(
            f"job {job_id}: the history kept no spec of it (submitted by an hpclaunch older "
            "than rerun, or its spec could not be read then)",
            hint="submit its spec again with 'hpclaunch submit SPEC --set ...'",
        )
    if _is_call(spec):
        raise SubmissionError(
            f"job {job_id} ran a Python function: its call was pickled into that job's "
            "directory, not into the history",
            hint="call session.submit(fn, ...) again",
        )
    point = None
    if task is not None:
        sweep_record, point = task
        one = {"method": "list", "points": [_point(context, sweep_record, point)]}
        spec = {**spec, "sweep": one}
    elif spec.get("sweep") is not None:
        raise SubmissionError(
            f"job {job_id} is a sweep's array: rerun one task ({job_id}_<task>), or the points "
            "that never ran with 'hpclaunch sweep rerun SWEEP_ID'",
        )
    changes = [*overrides, *([f"tier={tier}"] if tier else [])]
    return record, apply_overrides(spec, changes), point


def rerun_job(
    context: Context,
    job_id: str,
    *,
    overrides: Sequence[str] = (),
    tier: str | None = None,
    check: bool = True,
) -> Rerun:
    """Submit ``job_id``'s spec again, changed by ``overrides`` (``KEY=VALUE``, as
    ``submit --set``) and ``tier``; see the module docstring.

    Raises:
        JobNotFound: See :func:`rerun_spec`.
        SpecError, PlanError: The changed spec is wrong, or the site cannot run it.
        SubmissionError: Slurm refused it.
    """
    record, data, point = rerun_spec(context, job_id, overrides, tier)
    spec = NamedSpec(data, f"rerun of job {job_id}")
    cwd = record.submit_dir
    if point is None:
        done = submit_spec(context, spec, SubmitOptions(check=check, cwd=cwd, rerun_of=job_id))
        return Rerun(job_id, data, submitted=done)

    swept = submit_sweep_spec(context, spec, SubmitOptions(check=check, cwd=cwd, rerun_of=job_id))
    return Rerun(job_id, data, swept=swept)


def _point(context: Context, record: Any, point: int) -> dict[str, Any]:
    """The params of sweep point ``point`` (line ``point`` of the sweep's params file, read
    where the sweep's files are: here, or over SSH)."""
    try:
        text = context.runner.read_file(record.params_file)
    except TransportError as exc:
        raise JobNotFound(
            f"sweep {record.sweep_id}: its params file {record.params_file} cannot be read "
            f"({exc.message.splitlines()[0]})",
            hint="the sweep's job directory was cleaned up? submit the spec again",
        ) from exc
    lines = text.splitlines()
    try:
        entry = json.loads(lines[point]) if point < len(lines) else None
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
        raise JobNotFound(f"sweep {record.sweep_id}: its params file has no point {point}")
    params: dict[str, Any] = entry["params"]
    return params


def _is_call(spec: Mapping[str, Any]) -> bool:
    command = spec.get("command")
    return isinstance(command, list) and command[1:3] == ["-m", "hpclaunch.calls"]
