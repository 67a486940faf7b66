"""Each job's state from the backend that ran it: one history holds the jobs of every
backend (``Session(backend="local")`` records ``local-3`` beside Slurm's ``123``), and a
Slurm backend must never be asked about a local job (squeue refuses the whole ``--jobs``
list for one id it cannot read)."""

from __future__ import annotations

from collections.abc import Sequence

from hpclaunch.backends.base import Backend, JobRef
from hpclaunch.backends.local import LocalBackend
from hpclaunch.slurm.job_ids import is_local_job_id
from hpclaunch.slurm.jobs import JobInfo
from hpclaunch.transport.local import LocalRunner

__all__ = ["backend_of", "status_anywhere"]


def status_anywhere(backend: Backend, refs: Sequence[JobRef]) -> dict[JobRef, JobInfo]:
    """``backend.status(refs)``, with the local backend's jobs asked of the local backend
    (a file read each, on this machine, where they ran)."""
    local = [ref for ref in refs if is_local_job_id(ref.job_id)]
    if not local or backend.name == "local":
        return dict(backend.status(refs))
    others = [ref for ref in refs if not is_local_job_id(ref.job_id)]
    infos = dict(backend.status(others)) if others else {}
    infos.update(_local(backend).status(local))
    return {ref: infos[ref] for ref in refs}


def backend_of(backend: Backend, ref: JobRef) -> Backend:
    """The backend that knows ``ref``: ``backend``, or the local one for a local job."""
    if backend.name == "local" or not is_local_job_id(ref.job_id):
        return backend
    return _local(backend)


def _local(backend: Backend) -> Backend:
    return LocalBackend(LocalRunner(), backend.site)
