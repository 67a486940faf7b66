"""The pyslurm backend: Slurm's own library (libslurm, through pyslurm) in this process.

No command is started per call: ``status`` of any number of jobs is one slurmctld RPC (the
job list) and, for the jobs it no longer knows or saw end, one slurmdbd query; ``submit``
and ``cancel`` are one RPC each. Answers become the same :class:`~hpclaunch.slurm.jobs.JobInfo`
as the cli backend's and are merged the same way (:mod:`hpclaunch.backends.merge`).

A login-node library: pyslurm is built against one Slurm release (its major.minor must be
the cluster's; ``pip install`` refuses any other) and needs that release's libslurm on this
machine. Over SSH hpclaunch uses the cli backend.

Where pyslurm 25.11 cannot do a step, the cli backend does it, and the method says why:
``attempts`` and ``usage`` (``sacct --duplicates``), ``hold`` (``scontrol uhold``), and the
steps that name an array task not yet started or change an array (``cancel``,
``update_job``, ``requeue``, ``release``, ``signal`` of ``123_4``).
"""

from __future__ import annotations

from hpclaunch.backends.pyslurm.backend import PyslurmBackend
from hpclaunch.backends.pyslurm.library import INSTALL_HINT, load_pyslurm, pyslurm_release

__all__ = ["INSTALL_HINT", "PyslurmBackend", "load_pyslurm", "pyslurm_release"]
