"""``hpclaunch events JOB``: what is known about a job's life so far.

The submission record, Slurm's accounting of each attempt (``sacct -D``), and the sidecar's
ledger (``<job dir>/events.jsonl``: signals, checkpoint requests and commits, requeue
decisions, why each attempt ended, steps lost), merged by attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli._app import App
from hpclaunch.cli._jobargs import check_job_id, complete_job_ids
from hpclaunch.ops.records import find_job_record, runs_sidecar

if TYPE_CHECKING:
    from hpclaunch.history import SubmissionRecord
    from hpclaunch.observe import Attempt

LEDGER_NOTE = "no sidecar ledger (events.jsonl) yet: the job has not started"
NO_SIDECAR_NOTE = (
    "the job runs without the sidecar (launcher: none): Slurm's accounting above is all "
    "there is; a launcher (srun, torchrun, ...) adds signals, checkpoints and requeues here"
)


@click.command("events")
@click.argument("job_id", callback=check_job_id, shell_complete=complete_job_ids)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def events_command(app: App, job_id: str, as_json: bool) -> None:
    """Show what is known about JOB: its submission and each attempt Slurm accounted."""
    from dataclasses import asdict

    from hpclaunch.backends.base import JobRef
    from hpclaunch.errors import BackendError

    record = find_job_record(job_id)
    problem = None
    try:
        attempts = app.backend.attempts(JobRef(job_id))
    except BackendError as exc:
        attempts, problem = [], exc.message.splitlines()[0]
    if record is None and not attempts and problem is None:
        from hpclaunch.errors import JobNotFound

        raise JobNotFound(
            f"job {job_id} is neither in the hpclaunch history nor in Slurm's accounting",
            hint="check the id with 'hpclaunch status'",
        )
    ledger = _ledger(app, record)
    note = None
    if ledger is None:
        plain = record is not None and runs_sidecar(app.runner.read_file, record) is False
        note = NO_SIDECAR_NOTE if plain else LEDGER_NOTE
    if as_json:
        import json

        data = {
            "job_id": job_id,
            "submission": asdict(record) if record is not None else None,
            "attempts": [a.to_dict() for a in attempts],
            "accounting_problem": problem,
            "ledger": ledger,
            "note": note,
        }
        click.echo(json.dumps(data, indent=2))
        return
    _print(job_id, record, attempts, problem, ledger, note)


def _ledger(app: App, record: SubmissionRecord | None) -> list[dict[str, Any]] | None:
    """The sidecar's events, read where the job directory is (through the runner)."""
    if record is None:
        return None
    import posixpath

    from hpclaunch.errors import TransportError
    from hpclaunch.supervise.ledger import LEDGER_NAME, parse_ledger

    try:
        text = app.runner.read_file(posixpath.join(record.job_dir, LEDGER_NAME))
    except TransportError:
        return None
    return parse_ledger(text)


def local_iso(stamp: str) -> str:
    """An ISO time with a zone (the history's UTC) as this machine's local time, like
    sacct's times (the cluster's local time, no zone)."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if when.tzinfo is None:
        return stamp
    return when.astimezone().replace(tzinfo=None).isoformat(timespec="seconds")


def _print(
    job_id: str,
    record: SubmissionRecord | None,
    attempts: list[Attempt],
    problem: str | None,
    ledger: list[dict[str, Any]] | None,
    note: str | None,
) -> None:
    from hpclaunch.supervise.ledger import describe_event

    if record is None:
        click.echo(f"job {job_id}: not submitted through hpclaunch here (no history record)")
    else:
        click.echo(
            f"job {job_id} {record.name!r}: submitted {local_iso(record.submitted_at)} to site "
            f"{record.site} (submission {record.submission_id}, tier {record.tier or '?'}, "
            f"QOS {record.qos or '?'})"
        )
        click.echo(f"  logs: {record.logs}/attempt-N.log")
    if problem is not None:
        click.echo(f"Slurm's accounting is not available: {problem}")
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for event in ledger or []:
        index = event.get("attempt")
        by_attempt.setdefault(index if isinstance(index, int) else -1, []).append(event)
    accounted = {a.index for a in attempts}
    for a in attempts:
        code = "" if a.exit_code is None else f" exit {a.exit_code}"
        signal = "" if a.exit_signal is None else f" signal {a.exit_signal}"
        click.echo(
            f"  attempt {a.index}: {a.state}{code}{signal}  start {a.start or '-'}  "
            f"end {a.end or '-'}  elapsed {a.elapsed or '-'}  on {a.nodes or '-'}"
            + (f"  ({a.reason})" if a.reason else "")
        )
        for event in by_attempt.get(a.index, []):
            click.echo(f"    {describe_event(event)}")
    for index in sorted(set(by_attempt) - accounted):
        click.echo(f"  attempt {index}: (not in Slurm's accounting)")
        for event in by_attempt[index]:
            click.echo(f"    {describe_event(event)}")
    if note is not None:
        click.echo(f"Note: {note}.")
