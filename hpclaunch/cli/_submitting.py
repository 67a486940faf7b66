"""What ``submit`` and the multi-job submit share: the dry-run print and ``--sync``."""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from hpclaunch.ops.snapshot import Snapshot
    from hpclaunch.planning.render import RenderedJob

__all__ = ["print_dry_run", "send_tree"]


def print_dry_run(job: RenderedJob) -> None:
    click.echo(f"# sbatch argv: {shlex.join(job.sbatch_argv)}")
    click.echo("# plan:")
    click.echo("\n".join(f"#   {line}" for line in job.plan.describe().splitlines()))
    click.echo(f"# script ({job.script_path}):")
    click.echo(job.script, nl=False)


def send_tree(snapshot: Snapshot) -> None:
    """Upload what the cluster lacks of the snapshot (a progress bar on a terminal)."""
    if not sys.stderr.isatty():
        stats = snapshot.send()
    else:
        from rich.console import Console  # noqa: PLC0415 (rich)
        from rich.progress import Progress  # noqa: PLC0415 (rich)

        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("sync", total=snapshot.tree.size)
            stats = snapshot.send(progress=lambda n: bar.advance(task, n))
    click.echo(
        f"sync: {stats.files} files, {stats.sent} sent ({stats.bytes_sent} bytes); "
        f"snapshot {stats.snapshot}",
        err=True,
    )
