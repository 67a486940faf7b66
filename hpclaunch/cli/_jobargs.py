"""Job-id arguments shared by the commands: validation, shell completion, and how a
followed job's end is reported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

from hpclaunch.ops.helpers import JOB_ID_FORMS, is_job_id, recent_submissions

if TYPE_CHECKING:
    from hpclaunch.slurm.jobs import JobInfo

#: ``--quota`` of the commands that place jobs (submit, sweep): the ``quota`` setting.
quota_option = click.option(
    "--quota",
    type=click.Choice(["allow", "strict"]),
    default=None,
    help="On a site with quotas, a job beyond its project's free guaranteed GPUs: 'allow' "
    "runs it over-quota (on idle GPUs, preemptible; the default), 'strict' keeps it "
    "in-quota, waiting for the project's GPUs. Also HPCLAUNCH_QUOTA, 'quota:' in the "
    "user config or the site's defaults.",
)


def check_job_ids(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> list[str]:
    """A click callback: every value is a job id (``123``, ``123_4``; ``local-3`` of the
    local backend)."""
    bad = [v for v in value if not is_job_id(v)]
    if bad:
        raise click.BadParameter(f"not a job id ({JOB_ID_FORMS}): {', '.join(bad)}")
    return list(value)


def check_job_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A click callback for one job id."""
    return check_job_ids(ctx, param, [value])[0]


def complete_job_ids(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion: the job ids of the submission history, newest first (no Slurm
    call: completion must be instant)."""
    records = reversed(recent_submissions(limit=200))
    seen: dict[str, str] = {}
    for record in records:
        if record.job_id.startswith(incomplete) and record.job_id not in seen:
            seen[record.job_id] = record.name
    return [CompletionItem(job_id, help=name) for job_id, name in seen.items()]


def exit_unless_completed(final: JobInfo) -> None:
    """After following a job: say how it ended and exit 1 unless it COMPLETED."""
    if not final.state.is_success:
        code = f", exit code {final.exit_code}" if final.exit_code is not None else ""
        click.echo(f"job {final.ref.job_id} ended {final.state}{code}", err=True)
        raise click.exceptions.Exit(1)


#: The JOB argument of the commands about one job (``123``, ``123_4``, ``local-3``).
job_argument = click.argument(
    "job_id", metavar="JOB", callback=check_job_id, shell_complete=complete_job_ids
)
