"""Counting GPUs (and other resources) in Slurm's resource strings, and Slurm's integers.

Slurm prints resources in two shapes:

* TRES (trackable resources: sacct ``AllocTRES``, scontrol ``AllocTRES=``, sacctmgr
  ``GrpTRES``): ``cpu=4,mem=8G,gres/gpu=2,gres/gpu:a100=2``. A typed entry repeats the
  untyped total (slurm.conf(5) ``AccountingStorageTRES``), so the total is the untyped one.
* GRES (generic resources: sinfo/scontrol ``Gres=``, squeue ``%b``): ``gpu:4``,
  ``gpu:a100:4(S:0-1)``, ``gpu:a100:2,gpu:v100:2``; squeue's ``%b`` (tres-per-node) spells
  them ``gres/gpu:4`` (24.11+) or ``gres:gpu:4`` (22.05).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "gpus_per_node",
    "gres_count",
    "parse_size",
    "to_int",
    "tres_gpus",
    "tres_text",
    "tres_value",
]

#: sacct's size suffixes (``2508K``, ``1.50G``): powers of 1024 (sacct(1), "--units").
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$")
_SIZE_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def to_int(text: str) -> int | None:
    """``text`` as an integer (surrounding blanks allowed, a sign too: a nice may be
    negative), or ``None`` (Slurm's ``N/A``, ``(null)``, empty)."""
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_size(text: str | None) -> int | None:
    """A size as sacct prints it (``2508K``, ``100M``, ``1.50G``, ``0``) in bytes; ``None``
    when empty or unreadable."""
    match = _SIZE.match((text or "").strip().upper())
    if match is None:
        return None
    number, unit = match.groups()
    return round(float(number) * _SIZE_UNIT[unit])


def tres_text(tres: str, key: str) -> str | None:
    """The raw value of ``key`` in a TRES string (``mem`` → ``2508K``), or ``None``."""
    for item in tres.split(","):
        name, _, value = item.partition("=")
        if name.strip() == key:
            return value.strip()
    return None


def tres_value(tres: str, key: str) -> int | None:
    """The count of ``key`` (``gres/gpu``, ``cpu``) in a TRES string; ``None`` when absent
    or not a number."""
    value = tres_text(tres, key)
    return None if value is None else to_int(value)


def tres_gpus(tres: str, gres: str = "gpu") -> tuple[int, dict[str, int]]:
    """GPUs in a TRES string: the total and the count per type (``{"a100": 2}``). Without an
    untyped entry the typed ones are summed."""
    total: int | None = None
    typed: dict[str, int] = {}
    for item in tres.split(","):
        name, _, value = item.strip().partition("=")
        if not value.isdigit():
            continue
        count = int(value)
        if name == f"gres/{gres}":
            total = count
        elif name.startswith(f"gres/{gres}:"):
            typed[name.split(":", 1)[1]] = count
    return (sum(typed.values()) if total is None else total), typed


def gres_count(text: str, gres: str = "gpu") -> int:
    """``gpu:4``, ``gpu:a100:4(S:0-1)``, ``gpu:a100:2,gpu:v100:2`` → the count of ``gres``."""
    total = 0
    for item in text.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == gres and parts[-1].isdigit() and len(parts) > 1:
            total += int(parts[-1])
    return total


#: A GPU entry of squeue's ``%b``: ``gres/gpu:4``, ``gres:gpu:a100:2``, ``gpu=1``.
_GPU_PER_NODE = re.compile(r"(?:^|,)(?:gres[:/])?gpu(?::[A-Za-z0-9_.-]+)?[:=](\d+)")


def gpus_per_node(tres_per_node: str) -> int:
    """GPUs per node in a squeue ``%b`` value (0 when it asks for none)."""
    return sum(int(m.group(1)) for m in _GPU_PER_NODE.finditer(tres_per_node.strip()))


def requested(tres_per: str, gres: str = "gpu") -> int:
    """GPUs in one of squeue's ``tres-per-job``/``-node``/``-task`` values (``gres/gpu:2``,
    ``gres:gpu:a100:2``; 0 for ``N/A`` or no GPU)."""
    if gres == "gpu":
        return gpus_per_node(tres_per)
    entry = re.compile(rf"(?:^|,)(?:gres[:/])?{re.escape(gres)}(?::[A-Za-z0-9_.-]+)?[:=](\d+)")
    return sum(int(m.group(1)) for m in entry.finditer(tres_per.strip()))


#: The squeue ``--Format`` fields a job's GPUs are counted from, in :func:`job_gpus`'s
#: argument order. A job asks for GPUs in one of three ways, and squeue prints each in its
#: own field (``%b`` is only the first): ``--gres=gpu:N``/``--gpus-per-node=N`` in
#: tres-per-node, ``--gpus=N`` in tres-per-job, ``--gpus-per-task=N`` in tres-per-task
#: (22.05 to 26.05, recorded in tests/unit/data/slurm-*/commands.json). ``tres-alloc`` is
#: the allocation of a running job and the request of a pending one (squeue's print.c falls
#: back to the request), with a ``gres/gpu`` entry when the site tracks it
#: (``AccountingStorageTRES=gres/gpu``).
GPU_FIELDS = ("NumTasks", "tres-alloc", "tres-per-job", "tres-per-node", "tres-per-task")


def gpus_of_fields(fields: Sequence[str], *, nodes: int, gres: str = "gpu") -> int:
    """:func:`job_gpus` of a squeue line's :data:`GPU_FIELDS` columns, in that order."""
    tasks, tres, per_job, per_node, per_task = fields
    return job_gpus(
        tres, per_job, per_node, per_task, nodes=nodes, tasks=to_int(tasks) or 1, gres=gres
    )


def job_gpus(
    tres: str,
    per_job: str,
    per_node: str,
    per_task: str,
    *,
    nodes: int,
    tasks: int,
    gres: str = "gpu",
) -> int:
    """The GPUs a job holds (running) or asks for (pending), however it asked for them.

    Args:
        tres: ``tres-alloc``: trusted when it has a ``gres/<gres>`` entry.
        per_job: ``tres-per-job`` (``--gpus``).
        per_node: ``tres-per-node`` (``--gres``, ``--gpus-per-node``), times ``nodes``.
        per_task: ``tres-per-task`` (``--gpus-per-task``), times ``tasks``.
        nodes: The job's node count.
        tasks: The job's task count (``NumTasks``).
        gres: The GRES name of GPUs on the site.
    """
    total, typed = tres_gpus(tres, gres)
    if typed or tres_value(tres, f"gres/{gres}") is not None:
        return total
    return (
        requested(per_job, gres)
        + requested(per_node, gres) * nodes
        + requested(per_task, gres) * tasks
    )
