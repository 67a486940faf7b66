"""Running jobs' progress and expected end (``hpclaunch status``, ``report``): each one's
``control/progress.json`` in its job directory, read where the job runs (here or over SSH),
when a command asks; never a poller (:mod:`hpclaunch.report.eta`). And whether their idle
guard can act: ``control/idle-guard-off``, written by nodes that sample no GPU."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from hpclaunch.errors import HistoryError
from hpclaunch.ops.records import read_job_file
from hpclaunch.report.eta import Eta, eta_of
from hpclaunch.slurm.jobs import JobState
from hpclaunch.supervise.gpumon import GUARD_OFF_PATH

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["MAX_READS", "PROGRESS_PATH", "eta_of_record", "running_etas", "unwatched_guards"]

#: Where the trainer's reports are, in the job directory (HPCLAUNCH_CONTROL_DIR).
PROGRESS_PATH = "control/progress.json"
#: The most files one command reads (one per running job shown).
MAX_READS = 20


def running_etas(ctx: Context, infos: Sequence[JobInfo]) -> dict[str, Eta]:
    """Job id → ETA, for the running jobs of ``infos`` submitted from here whose trainer
    reports a ``total`` (at most :data:`MAX_READS` files read)."""
    found: dict[str, Eta] = {}
    for record in _running_records(infos):
        eta = eta_of_record(ctx, record)
        if eta is not None:
            found[record.job_id] = eta
    return found


def unwatched_guards(ctx: Context, infos: Sequence[JobInfo]) -> dict[str, str]:
    """Job id → why its idle guard cannot stop it (``n1: pynvml is not installed``), for
    the running jobs of ``infos`` whose nodes said they sample no GPU (one file read each,
    at most :data:`MAX_READS`)."""
    found: dict[str, str] = {}
    for record in _running_records(infos):
        text = read_job_file(ctx, record, GUARD_OFF_PATH)
        lines = list(dict.fromkeys(line for line in (text or "").splitlines() if line))
        if lines:
            found[record.job_id] = "; ".join(lines)
    return found


def _running_records(infos: Sequence[JobInfo]) -> Iterator[SubmissionRecord]:
    """The history's records of the running jobs of ``infos`` (the first
    :data:`MAX_READS`); none once the history cannot be read."""
    from hpclaunch.store.history import find_record

    for info in [i for i in infos if i.state is JobState.RUNNING][:MAX_READS]:
        try:
            record = find_record(job_id=info.ref.job_id)
        except HistoryError:
            return
        if record is not None:
            yield record


def eta_of_record(ctx: Context, record: SubmissionRecord) -> Eta | None:
    """The ETA of a recorded job from its ``progress.json`` (``None``: none to tell)."""
    text = read_job_file(ctx, record, PROGRESS_PATH)
    if not text:
        return None
    try:
        progress = json.loads(text)
    except json.JSONDecodeError:
        return None
    return eta_of(progress) if isinstance(progress, dict) else None
