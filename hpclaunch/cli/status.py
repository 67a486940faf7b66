"""``hpclaunch status [IDS...]`` (alias ``ls``): jobs' state, in one squeue (+ one sacct) call."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App
from hpclaunch.cli._jobargs import check_job_ids, complete_job_ids

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.config.site import SiteConfig
    from hpclaunch.history import SubmissionRecord
    from hpclaunch.observe import JobInfo

_STATE_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "PENDING": "yellow"}
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--limit", default=20, show_default=True, help="Recent jobs to show without IDS.")
@click.pass_obj
def status_command(app: App, job_ids: list[str], as_json: bool, limit: int) -> None:
    """Show the state of jobs IDS, or of your recent hpclaunch jobs.

    One squeue call for all jobs, and one sacct call for the jobs squeue no longer
    knows (it forgets finished jobs after MinJobAge).
    """
    from hpclaunch.backends.base import JobRef
    from hpclaunch.history import recent_submissions

    records = {r.job_id: r for r in recent_submissions(limit=10_000)}
    if not job_ids:
        job_ids = list(records)[-limit:] if limit > 0 else []
        if not job_ids:
            click.echo("No hpclaunch jobs recorded yet; submit one with 'hpclaunch submit'.")
            return
    refs = [JobRef(job_id) for job_id in dict.fromkeys(job_ids)]
    # The jobs they wait for ride along in the same squeue/sacct calls, to say why they wait.
    waited_for = [JobRef(i) for i in dependency_ids(refs, records) if i not in job_ids]
    infos = app.backend.status([*refs, *waited_for])
    remember_finished(infos.values(), records)
    rows = [
        explain_dependency(annotate(infos[ref], records.get(ref.job_id), app.site), infos, records)
        for ref in refs
    ]
    if as_json:
        import json

        click.echo(json.dumps([info.to_dict() for info in rows], indent=2))
    else:
        print_table(rows)
    from hpclaunch.observe import JobState

    unknown = [i for i in rows if i.state is JobState.UNKNOWN]
    if unknown:  # like cancel, logs and events: an id Slurm does not know is an error
        for info in unknown:
            click.echo(f"Error: job {info.ref.job_id}: {info.reason or 'unknown'}", err=True)
        raise click.exceptions.Exit(1)


def annotate(info: JobInfo, record: SubmissionRecord | None, site: SiteConfig) -> JobInfo:
    """Add what Slurm does not know: the tier, in-quota or over-quota (and the name of a
    job Slurm forgot)."""
    from hpclaunch.quota import classify

    tier = record.tier if record is not None else None
    quota = record.quota if record is not None and record.quota != "none" else None
    return dataclasses.replace(
        info,
        name=info.name or (record.name if record is not None else None),
        tier=tier or tier_of_qos(info.qos, site),
        quota=quota or classify(site, None, info.qos),
    )


def remember_finished(infos: Iterable[JobInfo], records: Mapping[str, SubmissionRecord]) -> None:
    """Store the final state, attempts and exit code of the recorded jobs that Slurm's
    answer shows finished, once per job (no extra Slurm call; a failure only warns)."""
    from hpclaunch.history import record_state

    for info in infos:
        record = records.get(info.ref.job_id)
        if record is None or not info.state.is_finished:
            continue
        if info.name and info.name != record.name:
            continue  # the id is another job's now (a reset cluster reuses ids)
        attempts = None if info.restarts is None else info.restarts + 1
        seen = (info.state.value, attempts, info.exit_code)
        if (record.state, record.attempts, record.exit_code) == seen:
            continue
        try:
            record_state(
                record.job_id, state=info.state.value, attempts=attempts, exit_code=info.exit_code
            )
        except OSError as exc:  # the history is a convenience: the answer is still shown
            click.echo(f"Warning: could not update the history: {exc}", err=True)
            return


def dependency_ids(refs: Sequence[JobRef], records: Mapping[str, SubmissionRecord]) -> list[str]:
    """The ids of the jobs that ``refs`` were submitted to wait for (from the history)."""
    found: list[str] = []
    for ref in refs:
        record = records.get(ref.job_id)
        if record is not None and record.dependency:
            from hpclaunch.pipeline import parse_dependency

            found += [job_id for _, job_id in parse_dependency(record.dependency)]
    return list(dict.fromkeys(found))


def explain_dependency(
    info: JobInfo, infos: Mapping[JobRef, JobInfo], records: Mapping[str, SubmissionRecord]
) -> JobInfo:
    """``info`` with a REASON in words when it waits for, or never ran because of, the
    jobs it depends on ("never ran: train (job 123) FAILED" rather than Slurm's bare
    DependencyNeverSatisfied)."""
    record = records.get(info.ref.job_id)
    if record is None or not record.dependency:
        return info
    from hpclaunch.pipeline import explain_wait

    states = {ref.job_id: found for ref, found in infos.items()}
    names = {job_id: rec.name for job_id, rec in records.items()}
    why = explain_wait(info, record.dependency, states, names)
    return info if why is None else dataclasses.replace(info, reason=why)


def tier_of_qos(qos: str | None, site: SiteConfig) -> str | None:
    """The site's tier whose QOS is ``qos``, if exactly one has it."""
    if qos is None:
        return None
    found = [str(name) for name, policy in site.tiers.items() if policy.qos == qos]
    return found[0] if len(found) == 1 else None


def print_table(rows: Sequence[JobInfo]) -> None:
    """The status table (rich; wide enough not to fold when piped)."""
    import sys

    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for info in rows:
        state = info.state.value
        style = _STATE_STYLE.get(state, "red" if info.state.is_finished else "")
        table.add_row(
            info.ref.job_id,
            info.name or "",
            info.tier or "",
            info.quota or "",
            info.qos or "",
            f"[{style}]{state}[/]" if style else state,
            info.reason or "",
            info.nodes or (f"({info.node_count})" if info.node_count else ""),
            _text(info.gpus),
            info.elapsed or "",
            _text(info.restarts),
            exit_text(info),
        )
    Console(width=None if sys.stdout.isatty() else 250).print(table)


def exit_text(info: JobInfo) -> str:
    """The EXIT column: ``0``, ``3``, ``SIGTERM`` (killed by a signal: Slurm's TIMEOUT or
    scancel), ``never ran`` for a job ended before it started, empty while unknown."""
    if info.exit_signal:
        import signal

        try:
            return signal.Signals(info.exit_signal).name
        except ValueError:
            return f"signal {info.exit_signal}"
    if info.exit_code is None and info.state.is_finished and not info.nodes:
        return "never ran"
    return _text(info.exit_code)


def _text(value: int | None) -> str:
    return "" if value is None else str(value)
