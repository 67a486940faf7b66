"""``hpclaunch status [IDS...]`` (alias ``ls``): jobs' state, in one squeue (+ one sacct) call."""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import check_job_ids, complete_job_ids
from hpclaunch.cli._options import json_option, limit_option
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._table import print_table as print_rows
from hpclaunch.cli._table import state_colour
from hpclaunch.errors import ACCOUNTING_UNAVAILABLE

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session
    from hpclaunch.slurm.jobs import JobInfo

COLUMNS = (
    "ID",
    "NAME",
    "TIER",
    "QUOTA",
    "QOS",
    "STATE",
    "REASON",
    "NODES",
    "GPUS",
    "ELAPSED",
    "RESTARTS",
    "EXIT",
)


@click.command("status")
@click.argument(
    "job_ids",
    nargs=-1,
    callback=check_job_ids,
    metavar="[IDS]...",
    shell_complete=complete_job_ids,
)
@json_option("Print JSON instead of a table.")
@limit_option(20, "Recent jobs to show without IDS.")
@pass_session
def status_command(app: Session, job_ids: list[str], as_json: bool, limit: int) -> None:
    """Show the state of jobs IDS, or of your recent hpclaunch jobs.

    One squeue call for all jobs, and one sacct call for the jobs squeue no longer
    knows (it forgets finished jobs after MinJobAge).
    """
    rows = app.status(job_ids, limit=limit)
    if not rows:  # only without IDS: each id given gets a row
        click.echo("No hpclaunch jobs recorded yet; submit one with 'hpclaunch submit'.")
        return
    notes = app.notes(rows)
    if as_json:
        shown = []
        for info in rows:
            note = notes.get(info.ref.job_id)
            shown.append({**info.to_dict(), **(note.to_dict() if note else {})})
        click.echo(json.dumps(shown, indent=2))
    else:
        print_table(rows)
        for info in rows:
            if info.expected_start_text:
                expected = info.expected_start_text
                click.echo(f"job {info.ref.job_id}: Slurm expects it to start at {expected}")
        for job_id, note in notes.items():
            if note.eta is not None:
                click.echo(f"job {job_id}: {note.eta.line()}")
            if note.retry is not None:
                click.echo(f"job {job_id}: {note.retry.line()}")
            if note.out_of_memory is not None:
                click.echo(f"job {job_id}: {note.out_of_memory}")
            if note.idle_guard_off is not None:
                why = note.idle_guard_off
                click.echo(
                    f"job {job_id}: the idle guard cannot stop it, no GPU is sampled ({why})"
                )
    unknown = [i for i in rows if i.state == "UNKNOWN"]  # JobState is a str enum
    if unknown:  # like cancel, logs and events: an id Slurm does not know is an error
        by_reason: dict[str, list[str]] = {}
        for info in unknown:
            by_reason.setdefault(info.reason or "unknown", []).append(info.ref.job_id)
        for reason, ids in by_reason.items():
            jobs = f"job {ids[0]}" if len(ids) == 1 else f"jobs {', '.join(ids)}"
            click.echo(f"Error: {jobs}: {reason}", err=True)
            if reason.startswith(ACCOUNTING_UNAVAILABLE):
                click.echo(
                    "Hint: slurmdbd is down or unreachable: jobs still in the queue are "
                    "shown from squeue; finished ones come back when accounting does",
                    err=True,
                )
        raise click.exceptions.Exit(1)


def print_table(rows: Sequence[JobInfo]) -> None:
    """The status table (the state coloured on a terminal)."""
    cells = [
        (
            info.ref.job_id,
            info.name or "",
            info.tier or "",
            info.quota or "",
            info.qos or "",
            info.state.value,
            info.reason or "",
            info.nodes or (f"({info.node_count})" if info.node_count else ""),
            _text(info.gpus),
            info.elapsed or "",
            _text(info.restarts),
            exit_text(info),
        )
        for info in rows
    ]
    state = COLUMNS.index("STATE")
    colours = [state_colour(info.state.value, info.state.is_finished) for info in rows]
    print_rows(COLUMNS, cells, colours={state: colours})


def exit_text(info: JobInfo) -> str:
    """The EXIT column: ``0``, ``3``, ``SIGTERM`` (killed by a signal: Slurm's TIMEOUT or
    scancel), ``never ran`` for a job ended before it started, empty while unknown."""
    if info.exit_signal:
        try:
            return signal.Signals(info.exit_signal).name
        except ValueError:
            return f"signal {info.exit_signal}"
    if info.exit_code is None and info.state.is_finished and not info.nodes:
        return "never ran"
    return _text(info.exit_code)


def _text(value: int | None) -> str:
    return "" if value is None else str(value)
