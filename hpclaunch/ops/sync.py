"""``hpclaunch sync JOB|SWEEP``: upload a job's offline W&B runs from where hpclaunch runs
(the login node, or over SSH: the login node's side), for compute nodes without internet.

Each attempt of an offline job leaves a run directory (``<job dir>/wandb/offline-run-<time>-
<run id>``), all of one run id: ``wandb sync`` of them in order (oldest first) puts every
attempt's steps into the one run. W&B marks a directory it synced (``run-<id>.wandb.synced``),
so a second sync uploads only what came since. It runs W&B's own command with the job's
Python (the site's ``python``, else this one), whose login (``wandb login``, or
``WANDB_API_KEY``) it uses.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from hpclaunch.errors import HpclaunchError, TransportError
from hpclaunch.ops.context import Context
from hpclaunch.planning.plan import job_python

__all__ = ["offline_runs", "sync_offline_runs"]

#: Long enough for many runs of many steps; the uploads are W&B's own.
SYNC_TIMEOUT = 1800.0


def offline_runs(ctx: Context, job_dirs: Iterable[str]) -> list[str]:
    """The offline W&B run directories of ``job_dirs`` not synced yet, oldest first."""
    found = []
    for job_dir in job_dirs:
        where = posixpath.join(job_dir, "wandb")
        try:
            names = ctx.runner.listdir(where)
        except (FileNotFoundError, TransportError):
            continue  # no W&B run (yet): nothing to sync
        for name in sorted(n for n in names if n.startswith("offline-run-")):
            run_dir = posixpath.join(where, name)
            try:
                files = ctx.runner.listdir(run_dir)
            except (FileNotFoundError, TransportError):
                continue
            if not any(f.endswith(".wandb.synced") for f in files):
                found.append(run_dir)
    return found


def sync_offline_runs(ctx: Context, job_dirs: Iterable[str], *, dry_run: bool = False) -> list[str]:
    """Upload the offline W&B runs of ``job_dirs`` (``dry_run``: only find them); the run
    directories synced (or to sync).

    Raises:
        HpclaunchError: ``wandb sync`` failed (W&B's words: no login, no network).
    """
    runs = offline_runs(ctx, job_dirs)
    if dry_run or not runs:
        return runs
    python = job_python(ctx.site_config, ctx.home)
    result = ctx.runner.run([python, "-m", "wandb", "sync", *runs], timeout=SYNC_TIMEOUT)
    said = (result.stderr + result.stdout).strip()
    failed = [line for line in said.splitlines() if "error" in line.lower()]
    if not result.ok or failed:
        raise HpclaunchError(
            f"wandb sync of {len(runs)} offline run(s) failed: "
            f"{failed[-1] if failed else said.splitlines()[-1] if said else result.returncode}",
            hint="log in where hpclaunch runs (wandb login, or WANDB_API_KEY), check that "
            "it reaches W&B, then sync again: runs already synced are skipped",
        )
    return runs
