"""Running jobs' progress and expected end (``hpclaunch status``, ``report``): each one's
``control/progress.json`` in its job directory, read where the job runs (here or over SSH),
when a command asks; never a poller (:mod:`hpclaunch.report.eta`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpclaunch.errors import HistoryError
from hpclaunch.ops.records import read_job_file
from hpclaunch.report.eta import Eta, eta_of
from hpclaunch.slurm.jobs import JobState

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["MAX_READS", "PROGRESS_PATH", "eta_of_record", "running_etas"]

#: Where the trainer's reports are, in the job directory (HPCLAUNCH_CONTROL_DIR).
PROGRESS_PATH = "control/progress.json"
#: The most files one command reads (one per running job shown).
MAX_READS = 20


def running_etas(ctx: Context, infos: Sequence[JobInfo]) -> dict[str, Eta]:
    """Job id → ETA, for the running jobs of ``infos`` submitted from here whose trainer
    reports a ``total`` (at most :data:`MAX_READS` files read)."""
    from hpclaunch.store.history import find_record

    found: dict[str, Eta] = {}
    running = [i for i in infos if i.state is JobState.RUNNING][:MAX_READS]
    for info in running:
        try:
            record = find_record(job_id=info.ref.job_id)
        except HistoryError:
            return found
        if record is None:
            continue
        eta = eta_of_record(ctx, record)
        if eta is not None:
            found[info.ref.job_id] = eta
    return found


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
