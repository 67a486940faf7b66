"""Jobs and the cluster they run on: GPUs per node, whole-GPU placement, progress.

Times are seconds (floats). A job's ``duration`` is its uninterrupted run time, periodic
checkpoint writes included: a job that is never preempted runs exactly ``duration``.
Periodic checkpoints commit the work done at every multiple of ``ckpt_interval`` (measured
in work seconds from the job's beginning); they are computed in closed form, not scheduled
as events. A restarted job first pays ``restart_cost`` (loading the checkpoint, warming up)
before its work advances again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hpclaunch.scheduling.placement import Placement, best_fit

__all__ = ["BE", "TE", "Cluster", "Job", "Placement"]

#: The two job classes of the paper: small trial-and-error jobs and best-effort jobs.
TE = "TE"
BE = "BE"


@dataclass(eq=False)
class Job:
    """One job of a workload and its state during a simulation.

    Attributes:
        id: Unique id; ties in every order are broken by it.
        submit: Submission time.
        gpus: GPUs in total; a multi-node job holds ``gpus // nodes`` on each node.
        nodes: Number of nodes.
        duration: Uninterrupted run time.
        cls: ``TE`` or ``BE``; BE jobs are preemptible.
        tier: hpclaunch tier (TE: ``critical``/``high``; BE: ``medium``/``low``).
        ckpt_interval: Work seconds between periodic checkpoints (``inf``: none).
        ckpt_write: Seconds to write a checkpoint on request.
        ckpt_notice: Seconds a job asked to checkpoint keeps computing before it starts
            writing (it sees the request at its next step; on a live cluster also the
            arbiter's reaction time): that work is committed, not lost, but the GPUs come
            free only after notice + write.
        restart_cost: Extra run time of every restart after a preemption.
        limit: The time limit the scheduler plans with (``inf``: it knows the run time
            exactly, the optimistic backfill of the default model). Slurm's backfill
            plans with limits: a running job is expected to end at its start + limit, and
            a job may backfill only if start + limit falls before the reservation.
        sizes: GPU totals an elastic policy may run it at, ascending, ``gpus`` the
            largest (``()``: rigid). At ``g`` of its ``full_gpus`` it does ``g / full_gpus``
            of a full-size second of work per second (linear speed-up); ``duration`` is
            its run time at full size. ``gpus``, ``nodes`` and ``gpus_per_node`` are the
            size of the current (or next) run.
    """

    id: int
    submit: float
    gpus: int
    nodes: int
    duration: float
    cls: str
    tier: str
    ckpt_interval: float = math.inf
    ckpt_write: float = 0.0
    ckpt_notice: float = 0.0
    restart_cost: float = 0.0
    limit: float = math.inf
    sizes: tuple[int, ...] = ()
    # --- simulation state ---
    committed: float = 0.0  # work seconds saved by the last committed checkpoint
    run_start: float = -1.0  # start of the current run (-1: not running)
    compute_start: float = -1.0  # run_start + restart overhead of this run
    placement: Placement = field(default_factory=dict)
    epoch: int = 0  # bumped at every start: stale finish events are ignored
    preemptions: int = 0
    draining: bool = False  # signalled, GPUs not released yet
    awaiting_until: float = -1.0  # TE job: victims release their GPUs by then
    queued_run: float = 0.0  # planned_run() when it (re-)arrived: fixed while it waits
    first_start: float = -1.0
    finish: float = -1.0
    busy_gpu_seconds: float = 0.0  # GPU time held, useful or not
    resized_at: float = -math.inf  # when an elastic policy last resized it
    gpus_per_node: int = field(init=False)
    full_gpus: int = field(init=False)  # the submitted size
    full_nodes: int = field(init=False)
    end_key: tuple[float, int] = field(init=False)  # (planned end, id) while running

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.nodes < 1 or self.gpus % self.nodes:
            raise ValueError(f"job {self.id}: {self.gpus} GPUs do not split over {self.nodes}")
        if self.duration <= 0:
            raise ValueError(f"job {self.id}: duration must be > 0")
        self.gpus_per_node = self.gpus // self.nodes
        self.full_gpus, self.full_nodes = self.gpus, self.nodes
        if self.sizes and (self.sizes[-1] != self.gpus or list(self.sizes) != sorted(self.sizes)):
            raise ValueError(f"job {self.id}: sizes must ascend to its {self.gpus} GPUs")
        self.end_key = (math.inf, self.id)

    def shape(self, gpus: int) -> tuple[int, int]:
        """(GPUs per node, nodes) at ``gpus`` GPUs: one node while they fit the submitted
        per-node share, else whole shares of it."""
        share = self.full_gpus // self.full_nodes
        if gpus <= share:
            return gpus, 1
        return share, gpus // share

    def resize(self, gpus: int) -> None:
        """Make ``gpus`` the size of the next run."""
        self.gpus = gpus
        self.gpus_per_node, self.nodes = self.shape(gpus)

    @property
    def rate(self) -> float:
        """Full-size seconds of work per second at the current size."""
        return self.gpus / self.full_gpus

    @property
    def preemptible(self) -> bool:
        return self.cls == BE

    @property
    def running(self) -> bool:
        return self.run_start >= 0

    def overhead(self) -> float:
        """The restart cost this run pays before its work advances (0 on a first run)."""
        return self.restart_cost if self.preemptions else 0.0

    def progress(self, now: float) -> float:
        """Work seconds done at ``now`` (committed plus this run's), for a running job."""
        return min(self.duration, self.committed + max(0.0, now - self.compute_start) * self.rate)

    def periodic_commit(self, now: float) -> float:
        """Work committed by periodic checkpoints by ``now`` (never below ``committed``)."""
        done = self.progress(now)
        if math.isinf(self.ckpt_interval):
            return self.committed
        return max(self.committed, math.floor(done / self.ckpt_interval) * self.ckpt_interval)

    def since_commit(self, now: float) -> float:
        """Seconds of this run that a kill at ``now`` would throw away (restart included)."""
        committed = self.periodic_commit(now)
        if committed > self.committed:  # a periodic commit in this run
            return (self.progress(now) - committed) / self.rate
        return now - self.run_start

    def expected_end(self) -> float:
        """When the current run ends if nothing interrupts it."""
        return self.compute_start + (self.duration - self.committed) / self.rate

    def planned_run(self) -> float:
        """How long the scheduler expects a run started now to take (its limit if set)."""
        if math.isinf(self.limit):
            return self.overhead() + (self.duration - self.committed) / self.rate
        return self.limit

    def planned_end(self) -> float:
        """When the scheduler expects the current run to end (see ``limit``)."""
        if math.isinf(self.limit):
            return self.expected_end()
        return self.run_start + self.limit

    def slowdown(self) -> float:
        """(finish - submit) / uninterrupted run time."""
        return (self.finish - self.submit) / self.duration

    def wait(self) -> float:
        """Time from submission to the first start."""
        return self.first_start - self.submit


class Cluster:
    """``nodes`` nodes of ``gpus_per_node`` GPUs; jobs get whole GPUs on whole nodes.

    Free GPUs are kept in buckets by count, so best-fit placement is O(GPUs per node).
    """

    def __init__(self, nodes: int, gpus_per_node: int) -> None:
        if nodes < 1 or gpus_per_node < 1:
            raise ValueError("a cluster needs at least one node with one GPU")
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.free = [gpus_per_node] * nodes
        self.total_free = nodes * gpus_per_node
        self._bucket: list[set[int]] = [set() for _ in range(gpus_per_node + 1)]
        self._bucket[gpus_per_node] = set(range(nodes))

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def fits(self, gpus_per_node: int, nodes: int) -> bool:
        """Whether a job could be placed now (without placing it)."""
        if gpus_per_node * nodes > self.total_free or gpus_per_node > self.gpus_per_node:
            return False
        count = 0
        for f in range(gpus_per_node, self.gpus_per_node + 1):
            count += len(self._bucket[f])
            if count >= nodes:
                return True
        return False

    def find(self, gpus_per_node: int, nodes: int) -> Placement | None:
        """Best fit: the nodes with the fewest free GPUs that still hold the job's share
        (an exact fit first), lowest node index first among equals; ``None`` if none."""
        return best_fit(self.free, gpus_per_node, nodes, self._bucket)

    def allocate(self, placement: Placement) -> None:
        for node, g in placement.items():
            self._move(node, self.free[node] - g)
            self.total_free -= g

    def release(self, placement: Placement) -> None:
        for node, g in placement.items():
            self._move(node, self.free[node] + g)
            self.total_free += g

    def _move(self, node: int, new_free: int) -> None:
        if not 0 <= new_free <= self.gpus_per_node:
            raise ValueError(f"node {node}: {new_free} free GPUs is impossible")
        self._bucket[self.free[node]].discard(node)
        self._bucket[new_free].add(node)
        self.free[node] = new_free
