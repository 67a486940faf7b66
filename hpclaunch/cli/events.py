"""``hpclaunch events JOB``: what is known about a job's life so far
(:func:`hpclaunch.ops.events.job_events`), merged by attempt."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session

if TYPE_CHECKING:
    from hpclaunch.ops.events import JobEvents
    from hpclaunch.ops.session import Session


@click.command("events")
@job_argument
@json_option()
@pass_session
def events_command(app: Session, job_id: str, as_json: bool) -> None:
    """Show what is known about JOB: its submission and each attempt Slurm accounted."""
    events = app.job(job_id).events()
    if as_json:
        click.echo(json.dumps(events.to_dict(), indent=2))
        return
    _print(events)


def local_iso(stamp: str) -> str:
    """An ISO time with a zone (the history's UTC) as this machine's local time, like
    sacct's times (the cluster's local time, no zone)."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if when.tzinfo is None:
        return stamp
    return when.astimezone().replace(tzinfo=None).isoformat(timespec="seconds")


#: Attempt states Slurm gives an attempt it ended itself.
_ENDED_BY_SLURM = frozenset({"PREEMPTED", "REQUEUED", "NODE_FAIL"})


def _print(events: JobEvents) -> None:
    job_id, record, attempts = events.job_id, events.submission, events.attempts
    problem, note = events.accounting_problem, events.note
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
        click.echo(events.accounting_line())
    by_attempt = events.ledger_lines()
    accounted = {a.index for a in attempts}
    for a in attempts:
        # Slurm records 0:0 for an attempt it ended itself (preempted, requeued): not the
        # launch's end, which the ledger's attempt_end has (launch_exit).
        ended_by_slurm = a.state in _ENDED_BY_SLURM and not a.exit_code and not a.exit_signal
        code = "" if a.exit_code is None or ended_by_slurm else f" exit {a.exit_code}"
        signal = "" if a.exit_signal is None else f" signal {a.exit_signal}"
        click.echo(
            f"  attempt {a.index}: {a.state}{code}{signal}  start {a.start or '-'}  "
            f"end {a.end or '-'}  elapsed {a.elapsed or '-'}  on {a.nodes or '-'}"
            + (f"  ({a.reason})" if a.reason else "")
        )
        for line in by_attempt.get(a.index, []):
            click.echo(f"    {line}")
    for index in sorted(set(by_attempt) - accounted):
        click.echo(f"  attempt {index}: (not in Slurm's accounting)")
        for line in by_attempt[index]:
            click.echo(f"    {line}")
    if note is not None:
        click.echo(f"Note: {note}.")
