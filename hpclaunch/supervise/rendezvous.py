"""Where the ranks of a job meet: master address and port, node rank, sizes.

Everything comes from the environment Slurm gives the batch shell (sbatch(1) "OUTPUT
ENVIRONMENT VARIABLES", Slurm 22.05): the first host of ``SLURM_JOB_NODELIST`` is the
master, expanded with python-hostlist (the compressed form ``n[1-3,7]`` has rules of its
own; never parse it by hand). The port is derived from the job id so that two jobs sharing a
node pick different ports, and ports already bound on this host are skipped (the batch
shell runs on the first node, where the master listens).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import hostlist  # type: ignore[import-untyped]  # python-hostlist ships no types

__all__ = [
    "PORT_BASE",
    "PORT_BLOCK",
    "PORT_SPAN",
    "Rendezvous",
    "derive_port",
    "gpus_on_node",
    "port_in_use",
]

PORT_BASE = 20000
PORT_SPAN = 20000
#: Each job owns a block of this many ports; a taken port is skipped only within the block,
#: so a job never moves onto the port that the next job id derives (a requeued attempt
#: often finds its first port still held by the previous attempt's socket).
PORT_BLOCK = 8


@dataclass(frozen=True)
class Rendezvous:
    """The agreed meeting point of one attempt.

    Attributes:
        job_id: ``SLURM_JOB_ID`` (the torchrun ``--rdzv-id``).
        master_addr: First host of the job's node list.
        master_port: See :func:`derive_port`.
        nodes: Every host of the job, in Slurm's order.
        node_rank: This node's index (``SLURM_NODEID``; 0 in the batch shell).
        nproc_per_node: Processes to start on each node.
        gpus: Whether the node has GPUs for the job (accelerate: ``--multi_gpu``/``--cpu``).
    """

    job_id: str
    master_addr: str
    master_port: int
    nodes: tuple[str, ...]
    node_rank: int
    nproc_per_node: int
    gpus: bool = False

    @property
    def nnodes(self) -> int:
        """How many nodes take part."""
        return len(self.nodes)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        nproc_per_node: int | None = None,
        in_use: Callable[[int], bool] | None = None,
    ) -> Rendezvous:
        """Build the rendezvous from Slurm's variables.

        Args:
            env: The environment (``os.environ`` inside a job).
            nproc_per_node: Processes per node; ``None``: one per GPU of the node
                (:func:`gpus_on_node`), or 1 without GPUs.
            in_use: Tells whether a port is taken (default :func:`port_in_use`).

        Raises:
            KeyError: ``SLURM_JOB_ID`` or ``SLURM_JOB_NODELIST`` is not set.
        """
        job_id = env["SLURM_JOB_ID"]
        nodes: tuple[str, ...] = tuple(hostlist.expand_hostlist(env["SLURM_JOB_NODELIST"]))
        # SLURM_NODEID is the node's index in the allocation; in the batch shell it is 0.
        rank = int(env.get("SLURM_NODEID", "0") or 0)
        gpus = gpus_on_node(env)
        nproc = nproc_per_node if nproc_per_node else max(1, gpus)
        port = derive_port(job_id, in_use or port_in_use)
        return cls(job_id, nodes[0], port, nodes, rank, nproc, gpus > 0)


def gpus_on_node(env: Mapping[str, str]) -> int:
    """GPUs this node gives the job: ``CUDA_VISIBLE_DEVICES`` (set by Slurm's GRES plugin),
    else ``SLURM_GPUS_ON_NODE``, else 0."""
    visible = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    # Slurm sets "NoDevFiles" when the GRES has no device files.
    if visible and visible != "NoDevFiles":
        return len([d for d in visible.split(",") if d.strip()])
    try:
        return int(env.get("SLURM_GPUS_ON_NODE", "0") or 0)
    except ValueError:
        return 0


def derive_port(job_id: str, in_use: Callable[[int], bool]) -> int:
    """The first free port of the job's block: ``PORT_BASE + (job_id % blocks) * PORT_BLOCK``.

    Jobs whose ids differ by less than ``PORT_SPAN // PORT_BLOCK`` (2,500) never share a
    block. Array tasks have ids of their own (``SLURM_JOB_ID``), so they get blocks too.
    When the whole block is taken, its first port is returned (and the launch will say so).
    """
    digits = "".join(ch for ch in job_id if ch.isdigit()) or "0"
    first = PORT_BASE + (int(digits) % (PORT_SPAN // PORT_BLOCK)) * PORT_BLOCK
    for port in range(first, first + PORT_BLOCK):
        if not in_use(port):
            return port
    return first


def port_in_use(port: int) -> bool:
    """Whether binding ``port`` on all addresses of this host fails."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False
