"""Where a training process's files are: its job directory (or, outside a job, its own
local run's), control directory and checkpoint directory, and which attempt it is."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch.runtime import _dist

__all__ = ["LOCAL_RUNS", "attempt", "checkpoint_dir", "control_dir", "job_dir", "local_run_dir"]


#: Outside an hpclaunch job, each run's files go under this directory of the current one.
LOCAL_RUNS = "hpclaunch-local"


def job_dir() -> Path:
    """``$HPCLAUNCH_JOB_DIR``; outside an hpclaunch job, a new directory of this run
    (:func:`local_run_dir`), so that a run on a laptop never resumes another's checkpoints
    unless asked (``HPCLAUNCH_JOB_DIR`` or ``HPCLAUNCH_CHECKPOINT_DIR`` set to it)."""
    value = os.environ.get("HPCLAUNCH_JOB_DIR")
    return Path(value) if value else local_run_dir()


def local_run_dir() -> Path:
    """This local run's directory, ``./hpclaunch-local/<run>``, made on first use and put
    in ``HPCLAUNCH_JOB_DIR`` so that the processes it starts agree; said once on stderr.

    The ranks of one launch (torchrun, accelerate, deepspeed: each sets ``LOCAL_RANK``) are
    siblings that cannot share an environment change, so they name the run alike:
    torchrun's ``TORCHELASTIC_RUN_ID`` when it has one, else their launcher's pid and
    ``MASTER_PORT``. A plain process names it by the time and its own pid.
    """
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if "LOCAL_RANK" in os.environ and run_id not in ("", "none"):
        name = f"torchrun-{run_id}"
    elif "LOCAL_RANK" in os.environ:
        name = f"launch-{os.getppid()}-{os.environ.get('MASTER_PORT', '0')}"
    else:
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    path = Path.cwd() / LOCAL_RUNS / name
    os.environ["HPCLAUNCH_JOB_DIR"] = str(path)
    if _dist.rank() == 0:
        print(
            f"hpclaunch.runtime: not in an hpclaunch job: this run's checkpoints, control "
            f"files and metrics go to {path}; nothing is resumed from an earlier run unless "
            "HPCLAUNCH_JOB_DIR (or HPCLAUNCH_CHECKPOINT_DIR) names its directory",
            file=sys.stderr,
            flush=True,
        )
    return path


def control_dir() -> Path:
    """``$HPCLAUNCH_CONTROL_DIR``, default ``<job dir>/control``."""
    value = os.environ.get("HPCLAUNCH_CONTROL_DIR")
    return Path(value) if value else job_dir() / jobdir.CONTROL


def checkpoint_dir() -> Path:
    """``$HPCLAUNCH_CHECKPOINT_DIR``, default ``<job dir>/checkpoints``."""
    value = os.environ.get("HPCLAUNCH_CHECKPOINT_DIR")
    return Path(value) if value else job_dir() / jobdir.CHECKPOINTS


def attempt() -> int:
    """``$HPCLAUNCH_ATTEMPT`` (Slurm's ``SLURM_RESTART_COUNT``), else 0."""
    for name in ("HPCLAUNCH_ATTEMPT", "SLURM_RESTART_COUNT"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0
