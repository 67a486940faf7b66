"""Job-id arguments shared by the commands: validation and shell completion."""

from __future__ import annotations

import re
from collections.abc import Sequence

import click
from click.shell_completion import CompletionItem

_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")


def check_job_ids(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> list[str]:
    """A click callback: every value is a Slurm job id (``123`` or ``123_4``)."""
    bad = [v for v in value if not _JOB_ID.match(v)]
    if bad:
        raise click.BadParameter(f"not a Slurm job id: {', '.join(bad)}")
    return list(value)


def check_job_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A click callback for one job id."""
    return check_job_ids(ctx, param, [value])[0]


def complete_job_ids(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion: the job ids of the submission history, newest first (no Slurm
    call: completion must be instant)."""
    from hpclaunch.history import recent_submissions

    records = reversed(recent_submissions(limit=200))
    seen: dict[str, str] = {}
    for record in records:
        if record.job_id.startswith(incomplete) and record.job_id not in seen:
            seen[record.job_id] = record.name
    return [CompletionItem(job_id, help=name) for job_id, name in seen.items()]
