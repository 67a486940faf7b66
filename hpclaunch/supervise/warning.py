"""What a warning signal (USR1/USR2 from ``--signal``) means: the time limit when it comes
within the lead (and Slurm's slack) of the job's end, a preemption otherwise; and the time
the trainer then has to checkpoint."""

from __future__ import annotations

import time
from collections.abc import Mapping

from hpclaunch.errors import TransportError
from hpclaunch.slurm.live_job import parse_time_left, time_left_argv
from hpclaunch.transport.base import Runner

__all__ = ["TIME_LIMIT_SLACK", "classify_warning", "time_left"]

#: Slurm may send the --signal up to 60 s early (sbatch(1)); a warning this close to the end
#: (lead + slack) is read as the time limit, anything earlier as preemption.
TIME_LIMIT_SLACK = 60


def classify_warning(left: float | None, *, lead: float, grace: float) -> tuple[str, float]:
    """(``time_limit`` or ``preempted``, seconds the trainer has to checkpoint), given
    the seconds ``left`` until the time limit (``None``: unknown).

    Before the time limit the trainer has all the time there is, less 8 s for the
    requeue and the stop, not only the lead it asked for: Slurm warns up to lead + 30 s
    early (at its 30-s check, job_mgr.c), and a trainer still starting then (seen on a
    loaded machine: no step 23 s after the start) would otherwise be stopped with no
    checkpoint and not requeued. A trainer that answers at once is requeued at once.
    """
    if left is not None and left <= lead + TIME_LIMIT_SLACK:
        return "time_limit", max(1.0, left - 8.0)
    return "preempted", grace


def time_left(runner: Runner, env: Mapping[str, str]) -> float | None:
    """Seconds until the job's time limit, or ``None`` when nothing says.

    ``squeue -o %L`` first: it follows a ``scontrol update TimeLimit``. When it fails
    (slurmctld busy or restarting) ``SLURM_JOB_END_TIME``, which slurmd sets in the
    batch environment of each attempt (sbatch(1) of 24.11 and 25.11); without either a
    warning is read as preemption.
    """
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        return parse_time_left(runner.run(time_left_argv(job), timeout=10).stdout)
    except (TransportError, ValueError, IndexError):
        pass
    try:
        return float(env["SLURM_JOB_END_TIME"]) - time.time()
    except (KeyError, ValueError):
        return None
