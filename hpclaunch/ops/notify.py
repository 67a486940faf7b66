"""The login node's part of notifications: the job's private ``notify/config.json`` written
at submission (the webhook's URL resolved from its name there), and, whenever a command looks
at a job that notifies (``status``, ``history``, ``submit --wait``), what waits in its outbox
sent from here (the node could not reach the webhook), with the job's end told from Slurm's
state when no sidecar told it (launcher ``none``; a job killed before its sidecar could).
See :mod:`hpclaunch.notify.outbox`: a notice goes out once, whoever sends it."""

from __future__ import annotations

import json
import posixpath
import socket
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from hpclaunch import jobdir
from hpclaunch.notify.message import Notice
from hpclaunch.notify.outbox import Outbox
from hpclaunch.store.webhooks import load_webhook

if TYPE_CHECKING:
    from hpclaunch.jobspec.notify import Notify
    from hpclaunch.ops.context import Context
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.slurm.jobs import JobInfo
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["describe_notify", "notify_config", "notify_from_here", "write_notify_config"]

#: Slurm's final states that are a failure of the job (CANCELLED is the user's own act).
_FAILED = frozenset(
    {"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)


def describe_notify(notify: Notify | None) -> str | None:
    """What the history keeps of ``notify:`` (names, never a URL): ``webhook lab-slack``."""
    if notify is None:
        return None
    parts = [f"webhook {notify.webhook}"] if notify.webhook else []
    parts += [f"email {notify.email}"] if notify.email else []
    return ", ".join(parts)


def notify_config(plan: SubmissionPlan) -> dict[str, object] | None:
    """The job's ``notify/config.json`` when its spec has ``notify:`` (the webhook's URL read
    from its saved file here); ``None`` without. A dry run calls it too, to refuse a missing
    webhook before anything is submitted.

    Raises:
        ConfigError: No webhook of that name is saved here, or its file is not private.
    """
    notify = plan.notify
    if notify is None:
        return None

    return {
        "webhook": load_webhook(notify.webhook) if notify.webhook else None,
        "email": notify.email,
        "smtp": notify.smtp,
        "events": list(notify.events),
    }


#: What the login node tells without a sidecar: the job's end, seen by status or history.
_WITHOUT_SIDECAR = frozenset({"completed", "failed"})


def warn_unsendable(ctx: Context, plan: SubmissionPlan) -> None:
    """Say at submit which of ``notify.events`` can never be sent: with ``launcher: none``
    no sidecar watches the job, so only its end is told (by ``status``/``history`` here)."""
    notify = plan.notify
    if notify is None or plan.launcher != "none":
        return
    lost = [event for event in notify.events if event not in _WITHOUT_SIDECAR]
    if lost:
        ctx.warn(
            f"notify: {', '.join(lost)} cannot be sent for a job with launcher: none (no "
            "sidecar watches it); only its end is, by the next hpclaunch status or history "
            "here. Use a launcher (srun, torchrun, ...) to be told the rest"
        )


def write_notify_config(ctx: Context, plan: SubmissionPlan, config: Mapping[str, object]) -> None:
    """Write ``config`` (:func:`notify_config`) as the job's ``notify/config.json``: 0600, in
    its private directory, the one place the URL goes.

    Raises:
        TransportError: The file cannot be written.
    """
    ctx.runner.put_file(
        posixpath.join(plan.job_dir, jobdir.NOTIFY_CONFIG), json.dumps(config), 0o600
    )


def notify_from_here(
    ctx: Context,
    infos: Iterable[JobInfo],
    records: Mapping[str, SubmissionRecord],
    ended: Collection[str] = (),
) -> None:
    """Send what waits in the outboxes of the jobs of ``infos`` that notify, and tell the end
    of those in ``ended`` (first seen finished now) unless their sidecar did. Never raises."""
    where = f"{socket.gethostname()} (hpclaunch)"
    for info in infos:
        record = records.get(info.ref.job_id)
        if record is None or not record.notify:
            continue
        try:
            box = Outbox.of_job(ctx.runner, posixpath.join(record.job_dir, jobdir.NOTIFY_CONFIG))
            if box is None:
                continue
            if info.ref.job_id in ended:
                notice = _end_notice(info, record)
                if notice is not None and notice.event in box.config.events:
                    box.queue(notice)
            box.flush(where)
        except Exception:
            continue


def _end_notice(info: JobInfo, record: SubmissionRecord) -> Notice | None:
    """The job's end as Slurm tells it (the sidecar's own, richer, one wins when it made it)."""
    state = info.state.value
    code = info.exit_code
    if state == "COMPLETED":
        return Notice("end", "completed", info.ref.job_id, record.name, "completed (Slurm's state)")
    if state in _FAILED:
        return Notice(
            "end",
            "failed",
            info.ref.job_id,
            record.name,
            f"failed: Slurm says {state}, exit code {code}",
            (f"logs: {record.logs}/attempt-N.log",),
            {"state": state, "exit_code": code},
        )
    return None
