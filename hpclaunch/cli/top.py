"""``hpclaunch top JOB [--json]``: the newest GPU sample of each of the job's GPUs.

Read from ``<job dir>/metrics.jsonl`` (written on each node by
:mod:`hpclaunch.supervise.gpumon`) through the runner, like ``events`` reads the ledger.
When there is none, the ledger's ``gpu_monitor_off`` events say why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from hpclaunch.cli._app import App
from hpclaunch.cli._jobargs import check_job_id, complete_job_ids
from hpclaunch.ops.records import runs_sidecar, submission_record

if TYPE_CHECKING:
    pass

_COLUMNS = ("node", "attempt", "gpu", "util", "mem_used", "mem_total", "temp_c", "power_w")
_HEADERS = ("NODE", "ATT", "GPU", "UTIL%", "MEM MiB", "OF MiB", "TEMP C", "POWER W")


@click.command("top")
@click.argument("job_id", callback=check_job_id, shell_complete=complete_job_ids)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def top_command(app: App, job_id: str, as_json: bool) -> None:
    """Show the latest GPU sample of each GPU of JOB, per node (from its metrics.jsonl)."""
    import posixpath

    from hpclaunch.supervise.gpumon import METRICS_NAME, latest_samples, read_metrics
    from hpclaunch.supervise.ledger import LEDGER_NAME, parse_ledger

    record = submission_record(job_id, "top")
    samples = latest_samples(read_metrics(_read(app, posixpath.join(record.job_dir, METRICS_NAME))))
    reasons: list[str] = []
    if not samples:
        ledger = parse_ledger(_read(app, posixpath.join(record.job_dir, LEDGER_NAME)))
        for event in ledger:
            if event.get("event") == "gpu_monitor_off":
                line = f"{event.get('node', '?')}: {event.get('reason', '?')}"
                if line not in reasons:
                    reasons.append(line)
    if as_json:
        import json

        click.echo(json.dumps({"job_id": job_id, "samples": samples, "off": reasons}, indent=2))
        return
    if not samples:
        why = "; ".join(reasons)
        if not why and runs_sidecar(app.runner.read_file, record) is False:
            why = (
                f"job {job_id} runs without the sidecar (launcher: none), which samples the "
                "GPUs: GPU monitoring needs a launcher (srun, torchrun, deepspeed or accelerate)"
            )
        click.echo(f"no GPU samples: {why or 'the job has not started, or no sample is due yet'}")
        return
    _table(samples)


def _read(app: App, path: str) -> str:
    from hpclaunch.errors import TransportError

    try:
        return app.runner.read_file(path)
    except TransportError:
        return ""


def _table(samples: list[dict[str, Any]]) -> None:
    rows = [_HEADERS] + [
        tuple("-" if s.get(c) is None else str(s.get(c)) for c in _COLUMNS) for s in samples
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
