"""Whether a task of an adaptive sweep is gone for good, leaving its trial running in the
study with nobody to tell its end (the standard library only).

Optuna finds such trials by heartbeat, which only its RDB storage has. A sweep task has a
sturdier sign: the exclusive lock it holds on ``tasks/<index>/.running`` for as long as it
runs (:func:`hpclaunch.supervise.sweep_task.hold_point`; the kernel, or the NFS server,
drops it when the last process holding it dies, even by SIGKILL or an OOM kill). A task
whose lock is free and whose sidecar did not end its last attempt with a requeue (or a
preemption, which Slurm requeues) will not come back to its trial: the sidecar died with
its node or was killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch.supervise.ledger import SLURM_MAY_REQUEUE, parse_ledger

__all__ = ["sweep_lock", "task_is_gone"]

#: The running task's lock, in its directory (``sweep_task.hold_point``).
RUNNING_LOCK = ".running"


def task_is_gone(task_dir: Path) -> bool:
    """Whether no process of the task holds its lock and its ledger does not say it was
    requeued or preempted (then Slurm starts it again and it resumes its trial)."""
    try:
        fd = os.open(task_dir / RUNNING_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # it runs (in this process too: another descriptor's lock conflicts)
    finally:
        os.close(fd)
    try:
        events = parse_ledger((task_dir / jobdir.LEDGER).read_text(encoding="utf-8"))
    except OSError:
        return True
    ends = [e for e in events if e.get("event") == "attempt_end"]
    last = ends[-1] if ends else {}
    return not (last.get("requeued") or last.get("reason") in SLURM_MAY_REQUEUE)


@contextlib.contextmanager
def sweep_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (the sweep's ``study.lock``), so that two tasks
    starting at once do not both retry the same dead trial."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
