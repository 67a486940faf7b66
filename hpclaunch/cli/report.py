"""``hpclaunch report JOB|SWEEP``: a job's life summed up (:meth:`Job.report`), or a sweep's
tasks, parameters and metrics (:meth:`SweepRun.report`)."""

from __future__ import annotations

import json
import webbrowser
from typing import TYPE_CHECKING

import click

from hpclaunch.cli._jobargs import complete_job_ids
from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session
from hpclaunch.ops import helpers

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session
    from hpclaunch.report.job import JobReport
    from hpclaunch.report.sweep import SweepReport


@click.command("report")
@click.argument("target", metavar="JOB|SWEEP", shell_complete=complete_job_ids)
@json_option()
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write the report as one self-contained HTML page (timeline, GPU charts).",
)
@click.option("--open", "open_page", is_flag=True, help="With --html: open the page in a browser.")
@click.option(
    "--metric",
    metavar="NAME",
    help="For a sweep: the final metric drawn against each parameter (default: the first).",
)
@pass_session
def report_command(
    app: Session,
    target: str,
    as_json: bool,
    html_path: str | None,
    open_page: bool = False,
    metric: str | None = None,
) -> None:
    """Sum up JOB: its attempts, its GPUs' use and energy, and what to change; or SWEEP
    (a sweep id or a unique prefix of it): its tasks by state and its parameters against
    their final metrics.

    For a job, each attempt: how long it waited and ran, how it ended (Slurm's state and
    the sidecar's reason), the steps it reached, committed and lost, its checkpoints; each
    GPU: utilisation (mean, p10, p90), memory, power and energy from the samples the
    sidecar took (metrics.jsonl). One sacct call and a file read, like 'hpclaunch events'.
    For a sweep, what 'hpclaunch sweep status' reads, and the HTML page draws the metric
    against each parameter.
    """
    if open_page and html_path is None:
        raise click.UsageError("--open opens the page --html FILE writes: give --html too")
    if helpers.is_job_id(target) and not helpers.names_a_sweep(target):
        if metric is not None:
            raise click.UsageError("--metric is for a sweep's report: JOB is a job id")
        report: JobReport | SweepReport = app.job(target).report()
    else:
        report = app.sweeps.find(target).report(metric=metric)
    if html_path is not None:
        written = report.write_html(html_path)
        click.echo(f"report: {written}", err=True)
        if open_page and not webbrowser.open(written.as_uri()):
            click.echo("no browser found here: open the file where one is", err=True)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    click.echo("\n".join(report.lines()))
