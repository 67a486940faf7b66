"""``hpclaunch report JOB``: a job's life summed up (:meth:`Job.report`)."""

from __future__ import annotations

import json

import click

from hpclaunch.cli._jobargs import check_job_id, complete_job_ids
from hpclaunch.ops.session import Session


@click.command("report")
@click.argument("job_id", callback=check_job_id, shell_complete=complete_job_ids)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Also write the report as one self-contained HTML page (timeline, GPU charts).",
)
@click.option("--open", "open_page", is_flag=True, help="With --html: open the page in a browser.")
@click.pass_obj
def report_command(
    app: Session, job_id: str, as_json: bool, html_path: str | None, open_page: bool = False
) -> None:
    """Sum up JOB: its attempts, its GPUs' use and energy, and what to change.

    Each attempt: how long it waited and ran, how it ended (Slurm's state and the
    sidecar's reason), the steps it reached, committed and lost, its checkpoints. Each
    GPU: utilisation (mean, p10, p90), memory, power and energy from the samples the
    sidecar took (metrics.jsonl). One sacct call and a file read, like 'hpclaunch events'.
    """
    if open_page and html_path is None:
        raise click.UsageError("--open opens the page --html FILE writes: give --html too")
    report = app.job(job_id).report()
    if html_path is not None:
        _write_page(html_path, report.html(), open_page)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    click.echo("\n".join(report.lines()))


def _write_page(path: str, page: str, open_page: bool) -> None:
    """Write ``page`` to ``path`` (readable by you only: it names your jobs and paths)."""
    import os
    from pathlib import Path

    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(page)
    click.echo(f"report: {target.resolve()}", err=True)
    if open_page:
        import webbrowser

        if not webbrowser.open(target.resolve().as_uri()):
            click.echo("no browser found here: open the file where one is", err=True)
