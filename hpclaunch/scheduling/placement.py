"""Where a job of ``nodes`` x ``gpus_per_node`` GPUs fits: best fit over the free GPUs per
node, as the simulator places jobs and as the victim choice checks a cover."""

from __future__ import annotations

__all__ = ["Placement", "best_fit"]

#: Node index -> GPUs a job holds (or would hold) there.
Placement = dict[int, int]


def best_fit(
    free: list[int], gpus_per_node: int, nodes: int, buckets: list[set[int]] | None = None
) -> Placement | None:
    """Best-fit placement of ``nodes`` x ``gpus_per_node`` GPUs on ``free`` (per node)."""
    if buckets is None:
        top = max(free, default=0)
        buckets = [set() for _ in range(max(top, gpus_per_node) + 1)]
        for node, f in enumerate(free):
            buckets[f].add(node)
    chosen: list[int] = []
    for f in range(gpus_per_node, len(buckets)):
        if buckets[f]:
            chosen.extend(sorted(buckets[f])[: nodes - len(chosen)])
            if len(chosen) == nodes:
                return dict.fromkeys(chosen, gpus_per_node)
    return None
