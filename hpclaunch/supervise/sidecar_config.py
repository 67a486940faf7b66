"""What one attempt of the sidecar needs, read from the ``HPCLAUNCH_*`` variables the batch
script exports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpclaunch import jobdir
from hpclaunch.supervise.launchers import LauncherName

__all__ = ["SidecarConfig"]


@dataclass(frozen=True)
class SidecarConfig:
    """What one attempt of the sidecar needs; see :meth:`from_env`.

    Attributes:
        launcher: One of :data:`~hpclaunch.supervise.launchers.LAUNCHERS`.
        command: The user's argv.
        python: The interpreter that runs ``hpclaunch.supervise`` on the nodes.
        job_dir: ``HPCLAUNCH_JOB_DIR`` (ledger, control directory).
        attempt: ``SLURM_RESTART_COUNT``.
        max_requeues: ``HPCLAUNCH_MAX_REQUEUES``.
        grace: Seconds a preempted job has (``HPCLAUNCH_GRACE``; 30 when unknown).
        preemptible: The job's tier may be preempted (the plan sets ``HPCLAUNCH_GRACE``
            only then).
        lead: The ``--signal`` lead time (``HPCLAUNCH_SIGNAL_LEAD``).
        kill_wait: Seconds between SIGTERM and SIGKILL from Slurm (``HPCLAUNCH_KILL_WAIT``).
        stop_timeout: Seconds between our SIGTERM and SIGKILL to the launch.
        nproc_per_node: Processes per node; ``None``: from the GPUs.
        log_path: This attempt's log (its tail explains a user error).
        env: The environment the launch inherits.
        resize_wait: Seconds the trainer has to checkpoint before a resize
            (``HPCLAUNCH_RESIZE_WAIT``).
    """

    launcher: LauncherName
    command: tuple[str, ...]
    python: str
    job_dir: Path
    attempt: int = 0
    max_requeues: int = 5
    grace: float = 30.0
    preemptible: bool = True
    lead: float = 120.0
    kill_wait: float = 5.0
    stop_timeout: float = 3.0
    nproc_per_node: int | None = None
    log_path: Path | None = None
    env: Mapping[str, str] | None = None
    resize_wait: float = 120.0

    @property
    def control_dir(self) -> Path:
        """``HPCLAUNCH_CONTROL_DIR``."""
        return self.job_dir / jobdir.CONTROL

    @classmethod
    def from_env(
        cls,
        launcher: LauncherName,
        command: Sequence[str],
        *,
        python: str,
        env: Mapping[str, str],
        nproc_per_node: int | None = None,
    ) -> SidecarConfig:
        """Read the ``HPCLAUNCH_*`` variables the batch script exports."""

        def num(name: str, default: float) -> float:
            try:
                return float(env.get(name, "") or default)
            except ValueError:
                return default

        job_dir = Path(env.get("HPCLAUNCH_JOB_DIR") or Path.cwd())
        attempt = int(env.get("HPCLAUNCH_ATTEMPT") or env.get("SLURM_RESTART_COUNT") or 0)
        log_dir = env.get("HPCLAUNCH_LOG_DIR")
        grace = num("HPCLAUNCH_GRACE", 0) or 30.0
        return cls(
            launcher=launcher,
            command=tuple(command),
            python=python,
            job_dir=job_dir,
            attempt=attempt,
            max_requeues=int(num("HPCLAUNCH_MAX_REQUEUES", 5)),
            grace=grace,
            preemptible=bool(env.get("HPCLAUNCH_GRACE")),
            lead=num("HPCLAUNCH_SIGNAL_LEAD", 120),
            kill_wait=num("HPCLAUNCH_KILL_WAIT", 5),
            stop_timeout=num("HPCLAUNCH_STOP_TIMEOUT", 3),
            nproc_per_node=nproc_per_node,
            log_path=Path(log_dir) / f"attempt-{attempt}.log" if log_dir else None,
            env=dict(env),
            resize_wait=num("HPCLAUNCH_RESIZE_WAIT", 120),
        )
