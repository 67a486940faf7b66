"""Old function calls and results removed, so that they never pile up (submitit #1592:
thousands of leftover pickles).

A function's job keeps its call and result in ``<job dir>/call/`` (``call.pkl``,
``result.pkl``), a map's in ``<job dir>/call/`` and ``<job dir>/tasks/<i>/call/``. They stay
:data:`KEEP` after submission: the first function submitted each day (:func:`clean_daily`)
removes those of finished jobs submitted before that, and :func:`clean_calls`
(``session.clean(older_than=...)``) does it at once. Only the pickles go: logs, the ledger
and checkpoints stay in the job directory. A job still queued or running keeps its files
whatever its age.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from hpclaunch import jobdir
from hpclaunch._private import make_private_dirs
from hpclaunch.backends.base import JobRef
from hpclaunch.backends.route import status_anywhere
from hpclaunch.config.paths import user_dir
from hpclaunch.errors import HpclaunchError
from hpclaunch.slurm.job_ids import is_local_job_id
from hpclaunch.slurm.jobs import JobState, parse_state
from hpclaunch.store.history import query_submissions

if TYPE_CHECKING:
    from hpclaunch.ops.context import Context
    from hpclaunch.store.history import SubmissionRecord

__all__ = ["KEEP", "Cleaned", "clean_calls", "clean_daily"]

#: How long a function's call and result stay after it was submitted.
KEEP = timedelta(days=30)
#: How often :func:`clean_daily` looks.
_EVERY = 24 * 3600.0


@dataclass(frozen=True)
class Cleaned:
    """What :func:`clean_calls` removed (or, in a dry run, would remove).

    Attributes:
        files: The pickles, as paths where Slurm runs.
        kept_running: Old jobs whose files stay because they have not ended.
    """

    files: tuple[str, ...]
    kept_running: tuple[str, ...]


def clean_calls(
    context: Context,
    older_than: timedelta = KEEP,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> Cleaned:
    """Remove the call and result pickles of the finished jobs submitted more than
    ``older_than`` ago (one status call for the jobs whose end the history lacks; one
    ``find`` where Slurm runs).

    Raises:
        HpclaunchError: The history, Slurm or the job directories could not be read.
    """

    cutoff = (now or datetime.now(timezone.utc)) - older_than
    old = [r for r in query_submissions(until=cutoff) if r.job_dir and _ours(context, r)]
    unsure = [r for r in old if r.state is None or not parse_state(r.state).is_finished]
    refs = {r.job_id: JobRef(r.job_id, r.cluster) for r in unsure}
    infos = status_anywhere(context.backend, list(refs.values())) if refs else {}
    # UNKNOWN: a job Slurm forgot (its records outlived MinJobAge and accounting): ended.
    running = {
        job_id
        for job_id, ref in refs.items()
        if not infos[ref].state.is_finished and infos[ref].state is not JobState.UNKNOWN
    }
    # A directory stays whole while any of its jobs runs (a map's other array).
    kept = {r.job_dir for r in old if r.job_id in running}
    dirs = sorted({r.job_dir for r in old} - kept)
    files = _pickles(context, dirs, delete=not dry_run)
    return Cleaned(tuple(files), tuple(sorted(running)))


def clean_daily(context: Context) -> None:
    """:func:`clean_calls` with :data:`KEEP`, at most once a day (a stamp file in the state
    directory); a failure is a warning, never an error of the submission."""
    stamp = user_dir("state", context.env) / "calls-cleaned"
    now = time.time()
    try:
        if now - stamp.stat().st_mtime < _EVERY:
            return
    except OSError:
        pass  # never cleaned here
    try:
        make_private_dirs(stamp.parent)
        stamp.touch()
        # Stamped with the clock it is compared with: a home on NFS stamps files with the
        # server's clock, which may be hours off this machine's.
        os.utime(stamp, (now, now))
        clean_calls(context, KEEP)
    except (HpclaunchError, OSError) as exc:
        text = exc.message if isinstance(exc, HpclaunchError) else str(exc)
        context.warn(f"old function results not cleaned: {text.splitlines()[0]}")


def _ours(context: Context, record: SubmissionRecord) -> bool:
    """Whether this session's backend can tell whether ``record``'s job ended: the same
    site, and a local job for the local backend, a Slurm job for the others (asked about
    the other kind's id, a backend answers UNKNOWN, which would read as "ended")."""
    local = is_local_job_id(record.job_id)
    return record.site == context.site_config.name and local == (not context.backend.has_cluster)


def _pickles(context: Context, dirs: list[str], *, delete: bool) -> list[str]:
    """The ``*/call/*.pkl`` files under ``dirs`` (a job's own, a map's tasks'), removed
    unless not ``delete``: one ``find`` for all of them."""
    if not dirs:
        return []
    argv = ["find", *dirs, "-maxdepth", "4", "-path", f"*/{jobdir.CALL_DIR}/*.pkl", "-type", "f"]
    argv += ["-print", "-delete"] if delete else ["-print"]
    result = context.runner.run(argv, timeout=120)
    # find exits 1 when a directory is gone (removed by hand): what it printed still counts.
    return sorted(result.stdout.splitlines())
