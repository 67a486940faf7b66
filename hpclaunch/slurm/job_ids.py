"""What a job id looks like: Slurm's (``123``, an array task's ``123_4``) or the local
backend's (``local-3``, ``local-3_4``). Checked before any backend is asked: squeue refuses
a whole ``--jobs`` list for one id it cannot read (``Invalid job id specified``)."""

from __future__ import annotations

import re

__all__ = ["JOB_ID_FORMS", "LOCAL_PREFIX", "is_job_id", "is_local_job_id", "is_slurm_job_id"]

#: The local backend's ids start so (:mod:`hpclaunch.backends.local`): never a Slurm id.
LOCAL_PREFIX = "local-"

#: The forms, as error messages name them.
JOB_ID_FORMS = "123, 123_4 or local-3"

# Slurm never gives id 0 (FirstJobId is at least 1); squeue refuses it (src/squeue/opts.c).
_JOB_ID = re.compile(rf"^(?:{LOCAL_PREFIX})?[1-9]\d*(?:_\d+)?$")


def is_job_id(value: str) -> bool:
    """Whether ``value`` reads as a job id (``123``, ``123_4``, ``local-3``)."""
    return bool(_JOB_ID.match(value))


def is_local_job_id(value: str) -> bool:
    """Whether ``value`` is the local backend's (``local-3``): Slurm never sees it."""
    return value.startswith(LOCAL_PREFIX)


def is_slurm_job_id(value: str) -> bool:
    """Whether Slurm could know ``value`` (``123``, ``123_4``): squeue and sacct take it."""
    return is_job_id(value) and not is_local_job_id(value)
