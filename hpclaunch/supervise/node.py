"""``node-exec``: runs on every node as the srun task, fills in what only the node knows,
and ``exec``\\ s the launcher (see :mod:`hpclaunch.supervise.launchers`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

import hostlist  # type: ignore[import-untyped]  # python-hostlist ships no types

from hpclaunch.supervise.gpumon import start_detached
from hpclaunch.supervise.launchers import (
    LauncherName,
    container_exec,
    node_argv,
    node_env,
)
from hpclaunch.supervise.rendezvous import Rendezvous, gpus_on_node

__all__ = ["node_command", "step_nodes"]


def node_command(
    launcher: LauncherName,
    *,
    nnodes: int,
    nproc_per_node: int,
    master_addr: str,
    master_port: int,
    job_id: str,
    command: Sequence[str],
    env: Mapping[str, str],
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) to exec on this node, from the srun task's environment."""
    rank = int(env.get("SLURM_NODEID", "0") or 0)
    rdzv = Rendezvous(
        job_id=job_id,
        master_addr=master_addr,
        master_port=master_port,
        nodes=step_nodes(env, nnodes),
        node_rank=rank,
        nproc_per_node=nproc_per_node,
        gpus=gpus_on_node(env) > 0,
    )
    new_env = dict(env)
    new_env.update(node_env(launcher, rdzv, env))
    # An exec container runtime wraps the launcher and the command: they run inside.
    argv = container_exec(env) + node_argv(launcher, rdzv, command)
    return argv, new_env


def step_nodes(env: Mapping[str, str], nnodes: int) -> tuple[str, ...]:
    """The step's hosts in ``SLURM_NODEID`` order (``SLURM_STEP_NODELIST``, else
    ``SLURM_JOB_NODELIST``); ``node0..`` when neither lists ``nnodes`` hosts (outside Slurm)."""
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"):
        listed = env.get(name)
        if listed:
            hosts = tuple(hostlist.expand_hostlist(listed))
            if len(hosts) == nnodes:
                return hosts
    return tuple(f"node{i}" for i in range(nnodes))


def exec_node(argv: list[str], env: dict[str, str]) -> None:
    """Replace this process with ``argv`` (never returns); 127 if it cannot be found.

    The node's GPU sampler (:mod:`hpclaunch.supervise.gpumon`) is forked first: a thread
    would not survive the ``exec``.
    """

    start_detached(env)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        print(f"hpclaunch node-exec: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        raise SystemExit(127) from exc
