"""Jobs' state now (``hpclaunch status``, ``Session.status``, ``Job.status``) and the
history brought up to date (``hpclaunch history``, ``Session.history``).

One status call to the backend answers for all jobs (squeue, plus sacct for the jobs squeue
forgot); what Slurm does not know comes from the history: the tier, in-quota or over-quota,
and why a job waits for the jobs it depends on.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hpclaunch import jobdir
from hpclaunch.backends.base import JobRef
from hpclaunch.backends.route import status_anywhere
from hpclaunch.errors import HpclaunchError, TransportError
from hpclaunch.ops.records import another_job_reason, names_another_job, remember_finished
from hpclaunch.planning.pipeline import explain_dependency_wait, parse_dependency
from hpclaunch.planning.quota import classify
from hpclaunch.planning.script_start import EXIT_NO_WORKDIR
from hpclaunch.slurm.jobs import JobInfo, JobState, parse_state
from hpclaunch.store.history import recent_submissions

if TYPE_CHECKING:
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.ops.context import Context
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["REFRESH_MAX", "job_statuses", "refresh_records"]

#: At most this many unfinished history rows are asked about in one ``history`` call.
REFRESH_MAX = 1000


def job_statuses(
    ctx: Context, job_ids: Sequence[str] | None = None, *, limit: int = 20
) -> list[JobInfo]:
    """The state of each job of ``job_ids`` now, in that order, or (``None``) of the newest
    ``limit`` jobs of the history, oldest first (none recorded: ``[]``). A job Slurm does
    not know is ``UNKNOWN``, with the reason; the final states seen are stored in the
    history, which is read once."""
    records = {r.job_id: r for r in recent_submissions(limit=10_000)}
    if job_ids is None:
        job_ids = list(records)[-limit:] if limit > 0 else []
    if not job_ids:
        return []
    ids = list(dict.fromkeys(job_ids))
    refs = [JobRef(job_id) for job_id in ids]
    # The jobs they wait for ride along in the same status call, to say why they wait.
    waited_for = [JobRef(i) for i in _dependency_ids(refs, records) if i not in ids]
    infos = _ours(status_anywhere(ctx.backend, [*refs, *waited_for]), records)
    remember_finished(ctx, infos.values(), records)
    return [
        _explain_start_failure(
            ctx,
            _explain_dependency(
                _annotate(infos[ref], records.get(ref.job_id), ctx.site_config), infos, records
            ),
            records.get(ref.job_id),
        )
        for ref in refs
    ]


def _ours(
    infos: Mapping[JobRef, JobInfo], records: Mapping[str, SubmissionRecord]
) -> dict[JobRef, JobInfo]:
    """``infos``, where Slurm's job of a recorded id is another job (its name differs: a
    reset controller, a wrapped MaxJobId or another cluster gave the id again) replaced by
    what hpclaunch recorded, saying so: another job's state is never this one's."""
    mine: dict[JobRef, JobInfo] = {}
    for ref, info in infos.items():
        record = records.get(ref.job_id)
        if record is None or not names_another_job(info, record):
            mine[ref] = info
            continue
        recorded = parse_state(record.state) if record.state else JobState.UNKNOWN
        mine[ref] = JobInfo(
            ref,
            recorded,
            name=record.name,
            exit_code=record.exit_code,
            restarts=None if record.attempts is None else record.attempts - 1,
            reason=another_job_reason(info),
        )
    return mine


def _annotate(info: JobInfo, record: SubmissionRecord | None, site: SiteConfig) -> JobInfo:
    """Add what Slurm does not know: the tier, in-quota or over-quota (and the name of a
    job Slurm forgot)."""
    tier = record.tier if record is not None else None
    quota = record.quota if record is not None and record.quota != "none" else None
    return dataclasses.replace(
        info,
        name=info.name or (record.name if record is not None else None),
        tier=tier or site.tier_of_qos(info.qos),
        quota=quota or classify(site, None, info.qos),
    )


def _dependency_ids(refs: Sequence[JobRef], records: Mapping[str, SubmissionRecord]) -> list[str]:
    """The ids of the jobs that ``refs`` were submitted to wait for (from the history)."""
    found: list[str] = []
    for ref in refs:
        record = records.get(ref.job_id)
        if record is not None and record.dependency:
            found += [job_id for _, job_id in parse_dependency(record.dependency)]
    return list(dict.fromkeys(found))


def _explain_dependency(
    info: JobInfo, infos: Mapping[JobRef, JobInfo], records: Mapping[str, SubmissionRecord]
) -> JobInfo:
    """``info`` with a REASON in words when it waits for, or never ran because of, the
    jobs it depends on ("never ran: train (job 123) FAILED" rather than Slurm's bare
    DependencyNeverSatisfied)."""
    record = records.get(info.ref.job_id)
    if record is None or not record.dependency:
        return info

    states = {ref.job_id: found for ref, found in infos.items()}
    names = {job_id: rec.name for job_id, rec in records.items()}
    why = explain_dependency_wait(info, record.dependency, states, names)
    return info if why is None else dataclasses.replace(info, reason=why)


def _explain_start_failure(ctx: Context, info: JobInfo, record: SubmissionRecord | None) -> JobInfo:
    """``info`` with the batch script's own line as its reason when it stopped before the
    command started (the node lacked the workdir: :mod:`hpclaunch.planning.script_start`).
    Only a failed job with that exit code costs a file read."""
    if record is None or info.state is not JobState.FAILED or info.exit_code != EXIT_NO_WORKDIR:
        return info

    try:
        text = ctx.runner.read_file(posixpath.join(record.logs, jobdir.START_FAILURE))
    except TransportError:
        return info
    line = text.strip().splitlines()[0] if text.strip() else ""
    return dataclasses.replace(info, reason=line) if line else info


def refresh_records(ctx: Context, records: list[SubmissionRecord]) -> list[SubmissionRecord]:
    """``records`` with Slurm's state now for this site's unfinished jobs (the newest
    :data:`REFRESH_MAX`, in one status call); the final ones are stored. When Slurm cannot
    be asked, the records as they are, with a warning."""
    unfinished = [r for r in records if r.site == ctx.site_config.name and not _settled(r)][
        -REFRESH_MAX:
    ]
    if not unfinished:
        return records
    try:
        infos = status_anywhere(ctx.backend, [JobRef(r.job_id, r.cluster) for r in unfinished])
    except HpclaunchError as exc:
        ctx.warn(f"states not refreshed from Slurm: {exc.message}")
        return records
    by_id = {r.job_id: r for r in unfinished}
    remember_finished(ctx, infos.values(), by_id)
    live = {
        ref.job_id: info
        for ref, info in infos.items()
        if info.state is not JobState.UNKNOWN and info.name in (None, by_id[ref.job_id].name)
    }

    def now(record: SubmissionRecord) -> SubmissionRecord:
        info = live.get(record.job_id) if by_id.get(record.job_id) is record else None
        if info is None:
            return record
        attempts = record.attempts if info.restarts is None else info.restarts + 1
        exit_code = info.exit_code if info.exit_code is not None else record.exit_code
        return dataclasses.replace(
            record, state=info.state.value, attempts=attempts, exit_code=exit_code
        )

    return [now(r) for r in records]


def _settled(record: SubmissionRecord) -> bool:
    """Whether the record has its job's final state and exit code (squeue can see a job
    finished before sacct has its exit code: such a record is asked about again)."""
    if record.state is None or not parse_state(record.state).is_finished:
        return False
    return record.exit_code is not None
