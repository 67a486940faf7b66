"""What ``submit`` and the multi-job submit share: the dry-run print and ``--sync``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hpclaunch.cli._app import App

if TYPE_CHECKING:
    from hpclaunch.render import RenderedJob
    from hpclaunch.sync import Tree

__all__ = ["print_dry_run", "scan_tree", "send_tree", "snapshot_cwd"]


def print_dry_run(job: RenderedJob) -> None:
    import shlex

    from hpclaunch.plan import describe

    click.echo(f"# sbatch argv: {shlex.join(job.sbatch_argv)}")
    click.echo("# plan:")
    click.echo("\n".join(f"#   {line}" for line in describe(job.plan).splitlines()))
    click.echo(f"# script ({job.script_path}):")
    click.echo(job.script, nl=False)


def scan_tree() -> Tree:
    from pathlib import Path

    from hpclaunch.sync import find_root, scan

    return scan(find_root(Path.cwd()))


def snapshot_cwd(app: App, tree: Tree) -> str:
    """The submit directory's place inside the snapshot (the tree root is its top)."""
    import os
    import posixpath
    from pathlib import Path

    from hpclaunch.sync import snapshot_dir, store_dir

    snapshot = snapshot_dir(store_dir(app.site.job_root, app.home), tree)
    inside = os.path.relpath(Path.cwd(), tree.root).replace(os.sep, "/")
    return snapshot if inside == "." else posixpath.join(snapshot, inside)


def send_tree(app: App, tree: Tree) -> None:
    """Upload what the cluster lacks of ``tree`` (a progress bar on a terminal)."""
    import sys

    from hpclaunch.sync import store_dir, upload

    store = store_dir(app.site.job_root, app.home)
    if not sys.stderr.isatty():
        stats = upload(app.runner, tree, store)
    else:
        from rich.console import Console
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("sync", total=tree.size)
            stats = upload(app.runner, tree, store, progress=lambda n: bar.advance(task, n))
    click.echo(
        f"sync: {stats.files} files, {stats.sent} sent ({stats.bytes_sent} bytes); "
        f"snapshot {stats.snapshot}",
        err=True,
    )
