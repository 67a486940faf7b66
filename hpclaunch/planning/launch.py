"""How a job's command is launched on its nodes: processes per node, the launcher's
prefix, and the environment the batch script exports (the sidecar's and the runtime's)."""

from __future__ import annotations

import json

from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.container import ContainerPlan

__all__ = [
    "container_env",
    "elastic_env",
    "launch_prefix",
    "processes_note",
    "processes_per_node",
]


def processes_per_node(spec: JobSpec) -> int:
    """The launcher's processes on each node: the spec's, else one per GPU (one without)."""
    return spec.processes_per_node or max(1, spec.resources.gpus_per_node)


def processes_note(spec: JobSpec) -> str:
    count = processes_per_node(spec)
    if spec.launcher == "srun":
        what = "copy of the command" if count == 1 else "copies of the command"
    else:
        what = "worker" if count == 1 else "workers"
    why = (
        "processes_per_node"
        if spec.processes_per_node is not None
        else "one per GPU; set processes_per_node to change"
    )
    return f"launcher {spec.launcher}: {count} {what} per node ({why})"


def launch_prefix(
    spec: JobSpec, python: str, container: ContainerPlan | None = None
) -> tuple[str, ...]:
    if spec.launcher == "none":
        if container is None:
            return ()
        if container.exec_prefix:
            return container.exec_prefix
        # A step runtime (pyxis, oci) applies to srun steps: the command is one task.
        return ("srun", "--nodes=1", "--ntasks=1", *container.step_options, *container.inner_prefix)
    # The sidecar starts the launcher once per node with srun (hpclaunch/supervise/
    # launchers.py: --kill-on-bad-exit=1, and --cpus-per-task again, which srun no longer
    # inherits from sbatch since Slurm 22.05), one process per GPU (or one without GPUs)
    # unless the spec says how many.
    nproc = processes_per_node(spec)
    return (
        python,
        "-m",
        "hpclaunch.supervise",
        "run",
        f"--launcher={spec.launcher}",
        f"--nproc-per-node={nproc}",
        "--",
    )


def container_env(container: ContainerPlan, launcher: str) -> tuple[tuple[str, str], ...]:
    """What the sidecar and node-exec read to put a launcher's processes in the container
    (hpclaunch/supervise/launchers.py): an exec prefix for every node's launch, or the srun
    options of the sidecar's step, whose node-exec then runs inside on the image's python3."""
    if launcher == "none":
        return ()
    if container.exec_prefix:
        return (("HPCLAUNCH_CONTAINER_EXEC", json.dumps(list(container.exec_prefix))),)
    return (
        ("HPCLAUNCH_CONTAINER_STEP", json.dumps(list(container.step_options))),
        ("HPCLAUNCH_CONTAINER_PYTHON", "python3"),
    )


def elastic_env(spec: JobSpec) -> str:
    """``HPCLAUNCH_ELASTIC``: the spec's elastic block, with the submitted size and the ranks
    per node, as JSON (read by :mod:`hpclaunch.runtime.elastic` and the sidecar)."""
    assert spec.elastic is not None
    block = spec.elastic.model_dump(mode="json")
    block |= {"base_nodes": spec.resources.nodes, "ranks_per_node": processes_per_node(spec)}
    return json.dumps(block, sort_keys=True, separators=(",", ":"))
