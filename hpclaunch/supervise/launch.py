"""The launch of one attempt: its argv (srun steps inside Slurm, one local process
outside), its rendezvous, and the environment it inherits."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from hpclaunch import jobdir
from hpclaunch.supervise.launchers import container_step, exec_argv, step_argv
from hpclaunch.supervise.on_oom import OOM_KILL_STEP_ENV
from hpclaunch.supervise.rendezvous import Rendezvous, derive_port, port_in_use
from hpclaunch.supervise.sidecar_config import SidecarConfig
from hpclaunch.supervise.tracker_env import tracker_env

__all__ = ["EARLY_SIGNAL_ENV", "child_env", "launch_argv"]

#: The warning the batch script's trap caught before the sidecar ran (templates/sbatch.sh.j2).
EARLY_SIGNAL_ENV = "HPCLAUNCH_EARLY_SIGNAL"


def launch_argv(cfg: SidecarConfig, env: Mapping[str, str]) -> tuple[Rendezvous, list[str]]:
    """The rendezvous and argv of the launch: srun steps inside a Slurm job, else one
    process on this host."""
    if "SLURM_JOB_ID" in env and "SLURM_JOB_NODELIST" in env:
        rdzv = Rendezvous.from_env(env, nproc_per_node=cfg.nproc_per_node)
        cpus = env.get("SLURM_CPUS_PER_TASK")
        step = container_step(env)
        argv = step_argv(
            cfg.launcher,
            rdzv,
            cfg.command,
            # In a step container node-exec runs inside, on the image's interpreter.
            python=env.get("HPCLAUNCH_CONTAINER_PYTHON", cfg.python) if step else cfg.python,
            cpus_per_node=int(cpus) if cpus and cpus.isdigit() else None,
            container_options=step,
        )
        return rdzv, argv
    # Outside Slurm: one node, this host, no srun.
    host = socket.gethostname()
    port = derive_port(str(os.getpid()), port_in_use)
    rdzv = Rendezvous("local", "127.0.0.1", port, (host,), 0, cfg.nproc_per_node or 1)
    return rdzv, exec_argv(cfg.launcher, rdzv, cfg.command, python=cfg.python)


def child_env(
    cfg: SidecarConfig, env: Mapping[str, str], *, oom_kill_step: bool = False
) -> dict[str, str]:
    """The launch's environment: the job's, with its directories, the attempt and the
    tracker runs to continue; with ``oom_kill_step`` (a multi-rank launch), srun's
    ``--oom-kill-step`` (on_oom.py)."""
    out = dict(env)
    if oom_kill_step:
        out[OOM_KILL_STEP_ENV] = "1"
    out.pop(EARLY_SIGNAL_ENV, None)
    out["HPCLAUNCH_JOB_DIR"] = str(cfg.job_dir)
    out["HPCLAUNCH_CONTROL_DIR"] = str(cfg.control_dir)
    out["HPCLAUNCH_ATTEMPT"] = str(cfg.attempt)
    out.setdefault("HPCLAUNCH_CHECKPOINT_DIR", str(cfg.job_dir / jobdir.CHECKPOINTS))
    out.update(tracker_env(out, cfg.attempt))
    return out
