"""``hpclaunch top JOB [--json]``: the newest GPU sample of each of the job's GPUs
(:func:`hpclaunch.ops.events.gpu_samples`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli._jobargs import job_argument
from hpclaunch.cli._options import json_option
from hpclaunch.cli._session import pass_session
from hpclaunch.cli._table import print_table

if TYPE_CHECKING:
    from hpclaunch.ops.session import Session

_COLUMNS = ("node", "attempt", "gpu", "util", "mem_used", "mem_total", "temp_c", "power_w")
_HEADERS = ("NODE", "ATT", "GPU", "UTIL%", "MEM MiB", "OF MiB", "TEMP C", "POWER W")


@click.command("top")
@job_argument
@json_option()
@pass_session
def top_command(app: Session, job_id: str, as_json: bool) -> None:
    """Show the latest GPU sample of each GPU of JOB, per node (from its metrics.jsonl)."""
    found = app.job(job_id).gpus()
    if as_json:
        data = {"job_id": job_id, "samples": found.samples, "off": found.off}
        click.echo(json.dumps(data, indent=2))
    elif found.why_none is not None:
        click.echo(f"no GPU samples: {found.why_none}")
    else:
        _table(found.samples)


def _table(samples: list[dict[str, Any]]) -> None:
    rows = [tuple("-" if s.get(c) is None else str(s.get(c)) for c in _COLUMNS) for s in samples]
    print_table(_HEADERS, rows)
