"""The memory Slurm enforces on this node of the job: its cgroup's limit, the peak it held,
and the kernel's OOM kills in it, read from the job's own cgroup (``task/cgroup``).

Slurm's ``task/cgroup`` puts every step of a job under one job cgroup per node,
``.../slurm/uid_<uid>/job_<id>/step_<step>/...`` (cgroup v1: one hierarchy per controller,
``/sys/fs/cgroup/memory/...``; v2: one tree, ``/sys/fs/cgroup/...``), whose limit is the job's
``--mem``. The sidecar runs in the batch step, the work in a step of its own: the job cgroup
holds both. Its files (kernel cgroup docs, v1 memory.txt, v2 cgroup-v2.rst):

=========================  ==============================  ===========================
                           v1                              v2
=========================  ==============================  ===========================
limit                      ``memory.limit_in_bytes``       ``memory.max`` (``max``)
peak                       ``memory.max_usage_in_bytes``   ``memory.peak`` (5.19+)
OOM kills                  ``memory.oom_control``          ``memory.events``
                           ``oom_kill N`` (4.13+), each    ``oom_kill N``
                           cgroup its own                  (its subtree's)
=========================  ==============================  ===========================

A node without ``task/cgroup`` (``TaskPlugin=task/none``, or ``ConstrainRAMSpace=no``) has no
such cgroup or no limit in it: :func:`job_memory` says ``None``, or a limit of ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CGROUP_ROOT", "JobMemory", "job_cgroup", "job_memory"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: v1 reports "no limit" as the largest page-aligned 64-bit count.
_V1_UNLIMITED = 1 << 62
_JOB_DIR = re.compile(r"^(.*/job_\d+)(?:/|$)")


@dataclass(frozen=True)
class JobMemory:
    """This node's share of the job's memory, in bytes (``None``: not known here).

    Attributes:
        limit: The job cgroup's limit (``None``: unlimited, or not enforced).
        peak: The most the job held at once on this node (sidecar included).
        oom_kills: Processes the kernel killed in the job cgroup for memory, so far.
    """

    limit: int | None
    peak: int | None
    oom_kills: int | None

    def to_fields(self) -> dict[str, int]:
        """The ledger's fields of what is known: ``mem_limit``, ``mem_peak``, ``oom_kills``."""
        fields = {"mem_limit": self.limit, "mem_peak": self.peak, "oom_kills": self.oom_kills}
        return {k: v for k, v in fields.items() if v is not None}


def job_cgroup(proc_cgroup: str, root: Path = CGROUP_ROOT) -> Path | None:
    """The directory of the job's memory cgroup from ``/proc/self/cgroup``'s text: v1's
    ``memory`` line, else v2's ``0::`` line; ``None`` outside a Slurm job cgroup."""
    v1: str | None = None
    v2: str | None = None
    for line in proc_cgroup.splitlines():
        _, _, rest = line.partition(":")
        controllers, _, where = rest.partition(":")
        if "memory" in controllers.split(","):
            v1 = where
        elif controllers == "" and line.startswith("0::"):
            v2 = where
    for base, path in ((root / "memory", v1), (root, v2)):
        match = _JOB_DIR.match(path or "")
        if match and (base / match.group(1).lstrip("/")).is_dir():
            return base / match.group(1).lstrip("/")
    return None


def job_memory(proc_cgroup: str | None = None, root: Path = CGROUP_ROOT) -> JobMemory | None:
    """The job cgroup's limit, peak and OOM kills on this node, or ``None`` when this
    process is in no Slurm job cgroup (see the module docstring). Never raises."""
    try:
        text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
        where = job_cgroup(text, root)
    except OSError:
        return None
    if where is None:
        return None
    if (where / "memory.limit_in_bytes").exists():  # v1
        limit = _number(where / "memory.limit_in_bytes")
        return JobMemory(
            limit=None if limit is None or limit >= _V1_UNLIMITED else limit,
            peak=_number(where / "memory.max_usage_in_bytes"),
            oom_kills=_v1_kills(where),
        )
    return JobMemory(
        limit=_number(where / "memory.max"),  # "max": None
        peak=_number(where / "memory.peak"),
        oom_kills=_counter(where / "memory.events", "oom_kill"),
    )


def _v1_kills(job: Path) -> int | None:
    """The OOM kills in the job cgroup and every cgroup under it (steps, tasks): v1 counts
    a kill only in the cgroup whose limit was hit (the kernel's memcg_memory_event
    propagates to the parents on v2 alone), and Slurm limits the job's and each step's."""
    counts = [_counter(d / "memory.oom_control", "oom_kill") for d in (job, *_subdirs(job))]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.rglob("*") if p.is_dir()]
    except OSError:  # a step's cgroup removed while walked
        return []


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _counter(path: Path, name: str) -> int | None:
    """``name N`` in a flat-keyed cgroup file (``memory.events``, ``memory.oom_control``)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None
