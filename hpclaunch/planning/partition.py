"""Which partition of the site a job goes to, check by check, and its GPU option."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpclaunch.config.site import Partition, SiteConfig, TierPolicy
from hpclaunch.errors import PlanError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.planning.launch import processes_per_node

__all__ = ["choose_partition", "cpus_per_node", "gpu_option", "tasks_per_node"]


def tasks_per_node(spec: JobSpec) -> int:
    """Slurm tasks per node: the srun launcher starts one task per GPU (one per node without
    GPUs) in a job step, and a step may only use the CPUs the allocation holds, so the
    allocation must count them ("More processors requested than permitted" otherwise).
    Other launchers start one process per node, which forks the ranks itself."""
    return processes_per_node(spec) if spec.launcher == "srun" else 1


def cpus_per_node(spec: JobSpec) -> int:
    """CPUs the job holds on each node (``--cpus-per-task`` counts per task)."""
    res = spec.resources
    return res.cpus_per_node if res.cpus_per_gpu else res.cpus_per_task * tasks_per_node(spec)


@dataclass(frozen=True)
class _Check:
    """One test a partition must pass, and how to explain that none passed."""

    field: str
    fits: Callable[[Partition], bool]
    explain: Callable[[Sequence[Partition]], str]
    hint: str


def _partition_checks(spec: JobSpec) -> list[_Check]:
    res = spec.resources
    checks: list[_Check] = []
    if res.gpus_per_node:
        checks.append(
            _Check(
                "resources.gpus_per_node",
                lambda p: p.gpus_per_node > 0,
                lambda ps: "no partition has GPUs",
                "ask for gpus_per_node: 0 or use another site",
            )
        )
    if res.gpu_type:
        checks.append(_gpu_type_check(res.gpu_type))
    checks += [
        _Check(
            "resources.gpus_per_node",
            lambda p: p.gpus_per_node >= res.gpus_per_node,
            lambda ps: (
                f"{res.gpus_per_node} GPUs per node asked, but the most a node has is "
                f"{max(p.gpus_per_node for p in ps)}"
            ),
            "ask for fewer GPUs per node and more nodes",
        ),
        _Check(
            "resources.cpus_per_gpu" if res.cpus_per_gpu else "resources.cpus_per_task",
            lambda p: p.cpus_per_node >= cpus_per_node(spec),
            lambda ps: (
                f"{cpus_per_node(spec)} CPUs per node asked, but the most a node has is "
                f"{max(p.cpus_per_node for p in ps)}"
            ),
            "ask for fewer CPUs" + (" per GPU" if res.cpus_per_gpu else " per task"),
        ),
        _Check(
            "resources.mem",
            lambda p: p.mem_per_node is None or (res.mem_mb or 0) <= p.mem_per_node,
            lambda ps: (
                f"{res.mem} per node asked ({res.mem_mb:,} MB), but the most a node has is "
                f"{max(p.mem_per_node or 0 for p in ps):,} MB"
            ),
            "ask for less memory per node (a number without a unit is megabytes)",
        ),
        _Check(
            "resources.nodes",
            lambda p: p.max_nodes is None or p.max_nodes >= res.nodes,
            lambda ps: (
                f"{res.nodes} nodes asked, but the most allowed is "
                f"{max(p.max_nodes or 0 for p in ps)}"
            ),
            "ask for fewer nodes",
        ),
    ]
    if spec.elastic is not None:
        largest = max(spec.elastic.nodes)
        checks.append(
            _Check(
                "elastic.nodes",
                lambda p: p.max_nodes is None or p.max_nodes >= largest,
                lambda ps: (
                    f"the job may grow to {largest} nodes, but the most allowed is "
                    f"{max(p.max_nodes or 0 for p in ps)}"
                ),
                "drop the sizes over the limit from elastic.nodes",
            )
        )
    seconds = res.time_seconds
    if seconds is not None:
        checks.append(
            _Check(
                "resources.time",
                lambda p: p.max_time_seconds is None or p.max_time_seconds >= seconds,
                lambda ps: (
                    f"time {res.time} is over the limit of "
                    + ", ".join(f"{p.name} ({p.max_time})" for p in ps)
                ),
                "ask for less time, and checkpoint so the job can be requeued to continue",
            )
        )
    return checks


def _gpu_type_check(gpu_type: str) -> _Check:
    want = gpu_type.lower()

    def explain(parts: Sequence[Partition]) -> str:
        types = sorted({p.gpu_type for p in parts if p.gpu_type})
        close = difflib.get_close_matches(want, [t.lower() for t in types], n=1, cutoff=0.6)
        guess = next(
            (f" (did you mean {t!r}?)" for t in types if close and t.lower() == close[0]), ""
        )
        listed = ", ".join(types) or "none (untyped)"
        return f"no partition has GPU type {gpu_type!r}{guess}; GPU types here: {listed}"

    return _Check(
        "resources.gpu_type",
        lambda p: (p.gpu_type or "").lower() == want,
        explain,
        "use one of the listed types (any case), or drop gpu_type to take any GPU",
    )


def choose_partition(
    spec: JobSpec, site: SiteConfig, policy: TierPolicy, notes: list[str]
) -> Partition:
    """Filter the partitions check by check; the first check that empties the list explains
    why. Among the partitions left, the default one is preferred, else the first."""
    candidates = list(site.partitions)
    scope = f"site {site.name}"
    asked = spec.resources.partition
    if asked is not None:
        known = [p.name for p in site.partitions]
        if asked not in known:
            raise PlanError(
                f"resources.partition: {asked!r} is not a partition of site {site.name} "
                f"(partitions: {', '.join(known)})",
                hint="use one of the listed partitions, or remove partition: to let "
                "hpclaunch choose",
            )
        if policy.partition and policy.partition != asked:
            raise PlanError(
                f"resources.partition: tier {spec.tier} runs in partition {policy.partition} "
                f"on site {site.name}, not {asked}",
                hint=f"remove partition:, or choose another tier than {spec.tier}",
            )
        candidates = [site.partition(asked)]
        scope = f"partition {asked}, asked for by resources.partition"
    elif policy.partition:
        candidates = [site.partition(policy.partition)]
        scope = f"partition {policy.partition} (fixed by tier {spec.tier})"
    for check in _partition_checks(spec):
        kept = [p for p in candidates if check.fits(p)]
        if not kept:
            raise PlanError(
                f"{check.field}: {check.explain(candidates)} ({scope})", hint=check.hint
            )
        candidates = kept

    chosen = next((p for p in candidates if p.default), candidates[0])
    if asked is not None:
        why = "asked for (resources.partition); its limits fit the job"
    elif policy.partition:
        why = "the tier's partition"
    else:
        why = "the default partition" if chosen.default else "the first partition that fits"
    notes.append(f"partition {chosen.name}: {why}")
    gpu_type = spec.resources.gpu_type
    if gpu_type and chosen.gpu_type != gpu_type:
        notes.append(
            f"GPU type {gpu_type!r} is spelled {chosen.gpu_type!r} on this site (Slurm "
            "compares GRES types case-sensitively): using the site's spelling"
        )
    return chosen


def gpu_option(spec: JobSpec, site: SiteConfig, partition: Partition) -> tuple[str, str]:
    count = spec.resources.gpus_per_node
    # The partition's spelling of the type: Slurm compares GRES types case-sensitively.
    gpu_type = partition.gpu_type if spec.resources.gpu_type else None
    if site.gres_style == "gres":
        typed = f":{gpu_type}" if gpu_type else ""
        return "--gres", f"{site.gres_name}{typed}:{count}"
    return "--gpus-per-node", f"{gpu_type}:{count}" if gpu_type else str(count)
