"""``hpclaunch report JOB``: a job's life summed up (:meth:`Job.report`)."""

from __future__ import annotations

import json

import click

from hpclaunch.cli._jobargs import check_job_id, complete_job_ids
from hpclaunch.ops.session import Session


@click.command("report")
@click.argument("job_id", callback=check_job_id, shell_complete=complete_job_ids)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def report_command(app: Session, job_id: str, as_json: bool) -> None:
    """Sum up JOB: its attempts, its GPUs' use and energy, and what to change.

    Each attempt: how long it waited and ran, how it ended (Slurm's state and the
    sidecar's reason), the steps it reached, committed and lost, its checkpoints. Each
    GPU: utilisation (mean, p10, p90), memory, power and energy from the samples the
    sidecar took (metrics.jsonl). One sacct call and a file read, like 'hpclaunch events'.
    """
    report = app.job(job_id).report()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    click.echo("\n".join(report.lines()))
