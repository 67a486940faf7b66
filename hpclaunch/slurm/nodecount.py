"""The fields a job's node count change needs, from ``scontrol show job``.

``scontrol update JobId=J NumNodes=K`` alone is not enough everywhere. Slurm 25.11 scales
the task and CPU counts with it; 22.05 sets the node count (its log says "setting min_nodes
from 4 to 2") but keeps ``NumTasks`` and ``NumCPUs`` (the job's minimum CPUs), and a job
asking 4 CPUs and 4 tasks on 2 nodes of one task each is then "never runnable" (measured on
the test cluster, a job requeued held with ``--ntasks-per-node=1``). So the update names all
three, scaled from what the job holds now, and the node count as ``K-K`` (22.05 took a bare
``NumNodes=2`` as the minimum only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpclaunch.slurm.live_job import ShownJob, parse_show_job, show_job_argv

if TYPE_CHECKING:
    from hpclaunch.transport.base import Runner

__all__ = ["node_count_fields", "node_count_update"]


def node_count_fields(shown: ShownJob, nodes: int) -> dict[str, str]:
    """``scontrol update`` fields that give the job ``shown`` (its ``scontrol show job``)
    ``nodes`` nodes, tasks and CPUs scaled with the node count."""
    fields = {"NumNodes": f"{nodes}-{nodes}"}
    current = shown.nodes
    if not current:
        return fields
    for name, count in (("NumTasks", shown.tasks), ("NumCPUs", shown.cpus)):
        if count and count % current == 0:  # per node, as the launchers ask
            fields[name] = str(count // current * nodes)
    return fields


def node_count_update(runner: Runner, job_id: str, nodes: int) -> dict[str, str]:
    """The update that gives job ``job_id`` ``nodes`` nodes, from its ``scontrol show job``
    where ``runner`` runs Slurm's commands (without it: the node count alone)."""
    shown = runner.run(show_job_argv(job_id), timeout=30)
    return node_count_fields(parse_show_job(shown.stdout if shown.ok else ""), nodes)
