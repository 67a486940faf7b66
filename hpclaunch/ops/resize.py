"""Resizing an elastic job (``hpclaunch resize``, ``Job.resize``).

A pending job is given its new node count at once (``scontrol update NumNodes``). A running
one is asked through its control directory: the sidecar has the trainer checkpoint, then
requeues the job held, updates its node count and releases it
(:mod:`hpclaunch.supervise.resize`); the next attempt starts at the new size and resumes.
Waiting (``wait`` > 0) follows the ledger to the next attempt, and finishes what the
sidecar could not (a job left held at its requeue is updated and released here).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hpclaunch import jobdir
from hpclaunch.backends.abilities import control_of
from hpclaunch.errors import ResizeRefused, TransportError, WatchTimeout
from hpclaunch.jobdir import JobDir
from hpclaunch.ops.records import read_job_file, submission_record
from hpclaunch.slurm.jobs import JobRef
from hpclaunch.slurm.nodecount import node_count_update
from hpclaunch.supervise.ledger import parse_ledger
from hpclaunch.supervise.resize import elastic_of_script, request_data

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["DEFAULT_WAIT", "ResizeResult", "elastic_block", "resize_job"]

_POLL = 1.0
#: Seconds ``hpclaunch resize`` follows a running job to its restart unless told.
DEFAULT_WAIT = 300.0


@dataclass(frozen=True)
class ResizeResult:
    """What became of a resize.

    Attributes:
        job_id: The job.
        from_nodes: Its node count before (``None``: unknown).
        to_nodes: The count asked for.
        outcome: ``updated`` (it was pending: done), ``asked`` (the sidecar has the request;
            not waited for), ``resized`` (the next attempt has the new size or waits for
            it), ``refused`` (the sidecar said no: ``why``), ``unchanged`` (already there).
        why: The sidecar's reason for a refusal, or what was finished here.
        checkpoint_step: The step the trainer committed before the restart.
    """

    job_id: str
    from_nodes: int | None
    to_nodes: int
    outcome: Literal["updated", "asked", "resized", "refused", "unchanged"]
    why: str | None = None
    checkpoint_step: int | None = None


def elastic_block(ctx: Context, record: SubmissionRecord) -> dict[str, Any] | None:
    """The job's ``elastic:`` block as its script exports it; ``None``: not elastic."""
    return elastic_of_script(read_job_file(ctx, record, jobdir.SCRIPT) or "")


def resize_job(
    ctx: Context,
    job_id: str,
    nodes: int,
    *,
    why: str = "asked by the user",
    force: bool = False,
    wait: float | None = 0.0,
) -> ResizeResult:
    """Resize ``job_id`` to ``nodes`` nodes (see the module's docstring).

    Args:
        why: Said in the ledger (``hpclaunch events``).
        force: Resize even within the spec's ``elastic.min_interval`` of the last one.
        wait: Seconds to follow the resize: a running job to its next attempt, a pending
            one to its start (0: return once asked; ``None``: :data:`DEFAULT_WAIT` for a
            running job, none for a pending one, as ``hpclaunch resize`` does).

    Raises:
        JobNotFound: Not in the history.
        ResizeRefused: Not elastic, not one of its sizes, ended, or the resize failed.
        UpdateRefused: Slurm refused the update of a pending job.
    """
    record = submission_record(job_id, "resize")
    block = elastic_block(ctx, record)
    if block is None:
        raise ResizeRefused(
            f"job {job_id} is not elastic: its spec has no elastic: block",
            hint="add elastic: {nodes: [...], global_batch: ..., max_batch_per_gpu: ...} to "
            "the spec and submit it again (it resumes from its last checkpoint)",
        )
    sizes = [int(n) for n in block["nodes"]]
    if nodes not in sizes:
        raise ResizeRefused(
            f"job {job_id} may run on {', '.join(map(str, sizes))} nodes, not {nodes}",
            hint="pick one of those sizes (the spec's elastic.nodes)",
        )
    ref = JobRef(job_id)
    info = ctx.backend.status([ref])[ref]
    if info.state.is_finished or info.source == "none":
        raise ResizeRefused(
            f"job {job_id} is {info.state.value}: there is nothing to resize",
            hint="submit it again with resources.nodes set to the size you want",
        )
    current = info.node_count
    if info.state.value != "RUNNING":
        if current == nodes:
            return ResizeResult(job_id, current, nodes, "unchanged")
        # Pending: nothing runs, so no restart is paid and min_interval does not apply.
        control_of(ctx.backend).update_job(job_id, node_count_update(ctx.runner, job_id, nodes))
        _log_pending_resize(ctx, record, current, nodes, why, ctx.runner.user())
        if not wait:
            return ResizeResult(job_id, current, nodes, "updated")
        return _wait_for_start(ctx, job_id, current, nodes, time.monotonic() + wait)
    if current == nodes:
        return ResizeResult(job_id, current, nodes, "unchanged")

    wait = DEFAULT_WAIT if wait is None else wait
    request = request_data(nodes, why=why, by=ctx.runner.user(), force=force)
    path = JobDir(record.job_dir).file(jobdir.in_control(jobdir.RESIZE))
    ctx.runner.put_file(path, json.dumps(request), 0o600)
    if wait <= 0:
        return ResizeResult(job_id, current, nodes, "asked")
    return _follow(ctx, record, current, nodes, request, time.monotonic() + wait)


def _log_pending_resize(
    ctx: Context, record: SubmissionRecord, current: int | None, nodes: int, why: str, by: str
) -> None:
    """Say a pending job's resize in its ledger, as the sidecar says a running one's
    (``hpclaunch events``): one line appended where the job directory is. A ledger that
    cannot be written only costs the line."""
    line = {
        "event": "resize_pending",
        "attempt": None,
        "time": time.time(),
        "from_nodes": current,
        "to_nodes": nodes,
        "why": why,
        "by": by,
    }
    path = JobDir(record.job_dir).ledger
    try:
        ctx.runner.run(["sh", "-c", 'cat >> "$1"', "sh", path], stdin=json.dumps(line) + "\n")
    except TransportError:
        return


def _wait_for_start(
    ctx: Context, job_id: str, current: int | None, nodes: int, deadline: float
) -> ResizeResult:
    """After a pending job's resize, wait until it starts (or ends): ``resize --wait``
    returns once the job runs at its new size, not while it still pends."""
    ref = JobRef(job_id)
    while time.monotonic() < deadline:
        info = ctx.backend.status([ref])[ref]
        if info.state.value != "PENDING":
            said = f"{info.state.value} on {info.node_count} nodes"
            return ResizeResult(job_id, current, nodes, "updated", why=said)
        time.sleep(_POLL)
    return ResizeResult(
        job_id,
        current,
        nodes,
        "updated",
        why=f"still pending: Slurm starts it when {nodes} nodes are free",
    )


def _follow(
    ctx: Context,
    record: SubmissionRecord,
    current: int | None,
    nodes: int,
    request: dict[str, Any],
    deadline: float,
) -> ResizeResult:
    """Follow the ledger until the sidecar took the request, then the job until it is
    released at its new size; finish a hold or update the sidecar could not."""
    job_id = record.job_id
    while time.monotonic() < deadline:
        ledger = parse_ledger(read_job_file(ctx, record, jobdir.LEDGER) or "")
        mine = _answer_to(ledger, request)
        asked = mine[0] if mine else None
        if asked is not None and asked.get("refused"):
            return ResizeResult(job_id, current, nodes, "refused", why=str(asked["refused"]))
        done = next((e for e in mine if e.get("event") == "resize_issued"), None)
        end = next((e for e in mine if e.get("event") == "attempt_end"), None)
        if done is not None and end is not None:
            finished = _finish(ctx, job_id, nodes, done)
            return ResizeResult(
                job_id,
                current,
                nodes,
                "resized",
                why=finished,
                checkpoint_step=end.get("checkpoint_step"),
            )
        failed = next((e for e in mine if e.get("event") == "resize_failed"), None)
        if failed is not None:
            raise ResizeRefused(
                f"job {job_id}: the resize failed: {failed.get('why')}",
                hint=f"the job was requeued at its old size; see 'hpclaunch events {job_id}'",
            )
        time.sleep(_POLL)
    raise WatchTimeout(
        f"job {job_id}: the sidecar did not finish the resize in time",
        hint=f"it may still: see 'hpclaunch events {job_id}' and 'hpclaunch status {job_id}'",
    )


def _answer_to(ledger: list[dict[str, Any]], request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger from the sidecar's ``resize_requested`` for ``request`` on (``[]``: not
    taken yet). Matched by its ``request_id``: a refusal of a resize asked a moment before
    (then ``--force``d) is not this request's answer. A sidecar of before the id was
    recorded: the first request logged since this one was written."""
    wanted = request.get("request_id")
    for index, event in enumerate(ledger):
        if event.get("event") != "resize_requested":
            continue
        if event.get("request_id") == wanted or (
            event.get("request_id") is None
            and float(event.get("time", 0)) >= float(request["requested_at"]) - 5
        ):
            return ledger[index:]
    return []


def _finish(ctx: Context, job_id: str, nodes: int, issued: dict[str, Any]) -> str | None:
    """Update and release here what the sidecar's commands left undone (SIGKILLed after
    the requeue, or slurmctld busy); what was done, or ``None``."""
    did = []
    if not issued.get("resized"):
        control_of(ctx.backend).update_job(job_id, node_count_update(ctx.runner, job_id, nodes))
        did.append("updated the node count")
    if not issued.get("released"):
        control_of(ctx.backend).release(job_id)
        did.append("released the job")
    return "; ".join(did) + " (the sidecar could not)" if did else None
