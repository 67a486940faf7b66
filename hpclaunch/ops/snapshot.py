"""``--sync`` / ``Session.submit(sync=True)``: run the job in a snapshot of your code.

The tree around the current directory (its git top level, else the directory) is sent to
the cluster's content store, only what the store lacks, and the job starts in the
snapshot's copy of the current directory, so edits made after submitting never reach a
job that is still pending (see :mod:`hpclaunch.transport.sync`).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpclaunch.errors import TransportError
from hpclaunch.transport.sync import find_root, scan, snapshot_dir, store_dir, upload

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.transport.sync import SyncStats, Tree

__all__ = ["Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """The code tree of the current directory, to be sent before the job is submitted.

    Attributes:
        ctx: The session (its runner sends, its site's job root holds the store).
        tree: Every file of the tree, hashed.
        cwd: This directory as seen by the job: its place inside the snapshot.
    """

    ctx: Context
    tree: Tree
    cwd: str

    @classmethod
    def of_cwd(cls, ctx: Context) -> Snapshot:
        """Scan the tree around the current directory (nothing is sent yet)."""

        tree = scan(find_root(Path.cwd()))
        snapshot = snapshot_dir(store_dir(ctx.site_config.job_root, ctx.home), tree)
        inside = os.path.relpath(Path.cwd(), tree.root).replace(os.sep, "/")
        return cls(ctx, tree, snapshot if inside == "." else posixpath.join(snapshot, inside))

    def send(self, progress: Callable[[int], None] | None = None) -> SyncStats:
        """Upload what the cluster's store lacks and build the snapshot there.

        Args:
            progress: Called with the bytes of each object sent.

        Raises:
            TransportError: It could not be finished (nothing is submitted then).
        """

        store = store_dir(self.ctx.site_config.job_root, self.ctx.home)
        try:
            return upload(self.ctx.runner, self.tree, store, progress=progress)
        except TransportError as exc:  # e.g. the link dropped: sbatch was not asked yet
            raise TransportError(
                "the code snapshot was not finished, so nothing was submitted: "
                + exc.message.splitlines()[0],
                hint="run the same command again: the files already sent stay on the "
                "cluster and are not sent twice (a file cut off in transit never counts)",
            ) from exc
