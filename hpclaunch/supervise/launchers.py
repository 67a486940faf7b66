"""The argv of each launcher: what the sidecar starts, and what each node then runs.

The sidecar (in the batch shell, on the first node) starts ONE job step with srun::

    srun --nodes=N --ntasks=N --ntasks-per-node=1 --kill-on-bad-exit=1 [--cpus-per-task=C]
         <python> -m hpclaunch.supervise node-exec --launcher L --nproc-per-node P
         --master-addr A --master-port PORT -- <command...>

(for the ``srun`` launcher: ``--ntasks=N*P --ntasks-per-node=P``). On every node,
``node-exec`` reads the values only that node knows (``SLURM_NODEID``, ``SLURM_PROCID``,
``SLURM_LOCALID``) and ``exec``\\ s the launcher below: no pdsh, no ssh, no shell string.

What each launcher receives (``command`` is the spec's argv, run as written):

``torchrun``
    ``torchrun --nnodes=N --nproc-per-node=P --rdzv-backend=c10d
    --rdzv-endpoint=A:PORT --rdzv-id=<jobid> --no-python <command>``. c10d assigns node
    ranks itself; the workers get RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT from torchrun.
``deepspeed``
    ``python3 -u -m deepspeed.launcher.launch --world_info=<B64> --master_addr=A
    --master_port=PORT --node_rank=<SLURM_NODEID> --no_python --no_local_rank <command>``:
    DeepSpeed's per-node launcher, which its runner (``deepspeed --no_ssh``) would start as
    a child; ``world_info`` is the runner's encoding (URL-safe base64 of the JSON
    ``{host: [0..P-1]}``, hosts in Slurm's order, which ``--node_rank`` indexes). Not the
    runner itself: in ``--no_ssh`` mode it installs no SIGTERM handler (runner.py, 0.19: only
    for pdsh), and under ``proctrack/cgroup`` slurmstepd signals only the step's tasks, not
    their children (proctrack_cgroup.c: "inherited processes will only get SIGKILL"), so at
    a requeue or cancel the runner died at once and launch.py and the workers never saw
    SIGTERM: they were SIGKILLed after ``KillWait``. launch.py forwards SIGTERM to its
    workers. ``--no_local_rank``: with ``--no_python`` DeepSpeed would otherwise put
    ``--local_rank=K`` right after the command's first word (``python --local_rank=0 ...``
    fails); LOCAL_RANK is in the environment anyway. DeepSpeed's launcher sets each
    process's CUDA_VISIBLE_DEVICES to ``0..P-1``: right where Slurm constrains devices by
    cgroup (the usual setup), not where it only sets CUDA_VISIBLE_DEVICES to other indices.
``accelerate``
    ``accelerate launch --multi_gpu --num_machines=N --machine_rank=<SLURM_NODEID>
    --main_process_ip=A --main_process_port=PORT --num_processes=N*P --no_python <command>``.
    ``--multi_gpu`` also on CPU nodes: it is accelerate's torch.distributed launcher (it
    starts the processes with torchrun's machinery), whereas ``--cpu`` takes accelerate's
    "simple" launcher, which runs ONE process per machine and ignores ``--num_machines``
    without mpirun (accelerate 1.15: two machines trained as two worlds of 1). Nodes without
    GPUs get ``ACCELERATE_USE_CPU=true`` instead, so ``Accelerator()`` picks the CPU (gloo).
``srun``
    no launcher: srun starts P tasks per node and ``node-exec`` sets RANK=SLURM_PROCID,
    WORLD_SIZE=SLURM_NTASKS, LOCAL_RANK=SLURM_LOCALID, LOCAL_WORLD_SIZE=P,
    NODE_RANK=SLURM_NODEID, MASTER_ADDR, MASTER_PORT, then execs ``command`` (what
    ``torch.distributed.init_process_group("env://")`` reads).

Every node also gets MASTER_ADDR, MASTER_PORT, NODE_RANK and NNODES in its environment.

In a container (the spec's ``container:``, :mod:`hpclaunch.planning.container`): an exec
runtime's prefix (``HPCLAUNCH_CONTAINER_EXEC``, e.g. ``apptainer exec ... IMAGE``) goes in
front of what ``node-exec`` execs, so the launcher and the command run inside while the
sidecar and node-exec stay outside; a step runtime's srun options
(``HPCLAUNCH_CONTAINER_STEP``: pyxis, oci) go on the sidecar's step, whose node-exec then runs
inside on ``HPCLAUNCH_CONTAINER_PYTHON``.
Outside Slurm (no ``SLURM_JOB_ID``: local debugging, the supervise tests) the sidecar runs
``node-exec`` directly, as a single node.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Literal

from hpclaunch.supervise.rendezvous import Rendezvous

__all__ = [
    "LAUNCHERS",
    "LauncherName",
    "container_exec",
    "container_step",
    "deepspeed_world_info",
    "node_argv",
    "node_env",
    "step_argv",
]

LauncherName = Literal["srun", "torchrun", "deepspeed", "accelerate"]
LAUNCHERS: tuple[LauncherName, ...] = ("srun", "torchrun", "deepspeed", "accelerate")


def step_argv(
    launcher: LauncherName,
    rdzv: Rendezvous,
    command: Sequence[str],
    *,
    python: str,
    cpus_per_node: int | None = None,
    container_options: Sequence[str] = (),
) -> list[str]:
    """The srun command the sidecar starts once for the whole job.

    Args:
        launcher: One of :data:`LAUNCHERS`.
        rdzv: The attempt's rendezvous.
        command: The user's argv.
        python: The interpreter that runs ``hpclaunch.supervise`` on the nodes.
        cpus_per_node: ``SLURM_CPUS_PER_TASK`` of the batch job (one task per node), if
            set. Since Slurm 22.05 srun does not inherit it, so it is passed again (split
            between the tasks of a node for the ``srun`` launcher).
        container_options: A step container runtime's srun options (pyxis, oci:
            ``HPCLAUNCH_CONTAINER_STEP``): the step, node-exec included, runs inside.
    """
    tasks = rdzv.nproc_per_node if launcher == "srun" else 1
    argv = [
        "srun",
        f"--nodes={rdzv.nnodes}",
        f"--ntasks={rdzv.nnodes * tasks}",
        f"--ntasks-per-node={tasks}",
        "--kill-on-bad-exit=1",
    ]
    if cpus_per_node:
        argv.append(f"--cpus-per-task={max(1, cpus_per_node // tasks)}")
    return argv + list(container_options) + exec_argv(launcher, rdzv, command, python=python)


def exec_argv(
    launcher: LauncherName, rdzv: Rendezvous, command: Sequence[str], *, python: str
) -> list[str]:
    """``<python> -m hpclaunch.supervise node-exec ...``: what runs on each node."""
    return [
        python,
        "-m",
        "hpclaunch.supervise",
        "node-exec",
        f"--launcher={launcher}",
        f"--nnodes={rdzv.nnodes}",
        f"--nproc-per-node={rdzv.nproc_per_node}",
        f"--master-addr={rdzv.master_addr}",
        f"--master-port={rdzv.master_port}",
        f"--job-id={rdzv.job_id}",
        "--",
        *command,
    ]


def node_argv(
    launcher: LauncherName,
    rdzv: Rendezvous,
    command: Sequence[str],
) -> list[str]:
    """The argv ``node-exec`` execs on the node whose rank is ``rdzv.node_rank``.

    Args:
        launcher: One of :data:`LAUNCHERS`.
        rdzv: The rendezvous, with this node's rank.
        command: The user's argv.
    """
    n, p, rank = rdzv.nnodes, rdzv.nproc_per_node, rdzv.node_rank
    addr, port = rdzv.master_addr, rdzv.master_port
    if launcher == "torchrun":
        return [
            "torchrun",
            f"--nnodes={n}",
            f"--nproc-per-node={p}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={addr}:{port}",
            f"--rdzv-id={rdzv.job_id}",
            "--no-python",
            *command,
        ]
    if launcher == "deepspeed":
        return [
            "python3",
            "-u",
            "-m",
            "deepspeed.launcher.launch",
            f"--world_info={deepspeed_world_info(rdzv)}",
            f"--master_addr={addr}",
            f"--master_port={port}",
            f"--node_rank={rank}",
            "--no_python",
            "--no_local_rank",
            *command,
        ]
    if launcher == "accelerate":
        return [
            "accelerate",
            "launch",
            "--multi_gpu",
            f"--num_machines={n}",
            f"--machine_rank={rank}",
            f"--main_process_ip={addr}",
            f"--main_process_port={port}",
            f"--num_processes={n * p}",
            "--no_python",
            *command,
        ]
    return list(command)


def deepspeed_world_info(rdzv: Rendezvous) -> str:
    """DeepSpeed's ``--world_info``: each node's local ranks ``[0..P-1]`` as JSON, hosts in
    the rendezvous' order, URL-safe base64 (``encode_world_info`` in DeepSpeed's runner)."""
    hosts = {host: list(range(rdzv.nproc_per_node)) for host in rdzv.nodes}
    return base64.urlsafe_b64encode(json.dumps(hosts).encode()).decode()


def node_env(launcher: LauncherName, rdzv: Rendezvous, slurm: Mapping[str, str]) -> dict[str, str]:
    """The variables ``node-exec`` adds to the environment before exec.

    Args:
        launcher: One of :data:`LAUNCHERS`.
        rdzv: The rendezvous, with this node's rank.
        slurm: The srun task's environment (``SLURM_PROCID``, ``SLURM_LOCALID``, ...).
    """
    env = {
        "MASTER_ADDR": rdzv.master_addr,
        "MASTER_PORT": str(rdzv.master_port),
        "NODE_RANK": str(rdzv.node_rank),
        "NNODES": str(rdzv.nnodes),
    }
    if launcher == "accelerate" and not rdzv.gpus:
        env["ACCELERATE_USE_CPU"] = "true"
    if launcher == "srun":
        world = rdzv.nnodes * rdzv.nproc_per_node
        env.update(
            RANK=slurm.get("SLURM_PROCID", "0"),
            WORLD_SIZE=slurm.get("SLURM_NTASKS", str(world)),
            LOCAL_RANK=slurm.get("SLURM_LOCALID", "0"),
            LOCAL_WORLD_SIZE=str(rdzv.nproc_per_node),
        )
    return env


def container_step(env: Mapping[str, str]) -> list[str]:
    """A step container runtime's srun options (``HPCLAUNCH_CONTAINER_STEP``, JSON)."""
    return _json_argv(env, "HPCLAUNCH_CONTAINER_STEP")


def container_exec(env: Mapping[str, str]) -> list[str]:
    """An exec container runtime's prefix (``HPCLAUNCH_CONTAINER_EXEC``, JSON)."""
    return _json_argv(env, "HPCLAUNCH_CONTAINER_EXEC")


def _json_argv(env: Mapping[str, str], name: str) -> list[str]:
    raw = env.get(name)
    if not raw:
        return []
    words = json.loads(raw)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"{name} is not a JSON list of strings: {raw!r}")
    return words
