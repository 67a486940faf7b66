"""The arbiter's least-attained-service pass (``hpclaunch arbiter --policy las``): the
simulator's ``elastic`` policy, :func:`hpclaunch.scheduling.las.plan`, applied to the
live cluster, with what the arbiter sees of each job (nothing the simulator's policy does
not see either).

A pass runs when no job of a preempting tier waits and nothing is under way (a
preemption, a shrink or a growth: :func:`~.decide.decide` and the follow-up own the
cluster then). Every GPU job that runs or that Slurm holds for GPUs
(``Resources``/``Priority``), or that ran before and waits out Slurm's requeue delay
(``BeginTime``), is a :class:`~hpclaunch.scheduling.las.Contender`:

* its sizes: an elastic job's node counts (its script's ``elastic.nodes``) times its GPUs
  per node; a rigid job's one size;
* its attained service: the node-seconds its ledger's ended attempts held, plus its
  current run, times its GPUs per node (a job without a ledger: its current run);
* its tier: 0 for the tiers that are not preemptible, 1 for the preemptible ones and
  over-quota work (the TE and BE classes of the simulator's synthetic workload);
* preemptible: of a preemptible QOS, and not protected (its current run shorter than
  ``min_run``, or preempted ``max_preemptions`` times already);
* may grow: pending, or it has run its ``elastic.min_interval``;
* its speed-up between two sizes: a throughput model
  (:mod:`hpclaunch.scheduling.throughput`) fitted to the samples/s its ledger measured
  at each node count (``runtime.report_progress(samples=...)``), its global batch as its
  ``elastic.batch`` makes it; linear before it measured anything.

The plan, against what runs now: a running job given nothing is evicted (asked to
checkpoint, as a preemption), one given less is shrunk and one given more grown (a resize
request, as ``hpclaunch resize``), a pending one given less than it asked starts smaller
(``scontrol update NumNodes``). Evictions and shrinks are made only for a job that waits
for GPUs and that the plan starts; a pass that makes them grows nobody (the room is that
job's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hpclaunch.scheduling.adaptive_batch import Adaptive
from hpclaunch.scheduling.arbiter.decide import (
    Growth,
    InFlight,
    Preemption,
    Roles,
    SmallStart,
    Snapshot,
    victim_and_preemption,
    waits_for_gpus,
    waits_to_preempt,
)
from hpclaunch.scheduling.arbiter.progress import JobProgress
from hpclaunch.scheduling.las import QUANTUM, Contender, order_key, plan
from hpclaunch.scheduling.throughput import Shape, Throughput
from hpclaunch.scheduling.victims import MIN_RUN
from hpclaunch.slurm.cluster import ClusterJob

__all__ = ["LasDecisions", "contender_of", "decide_las"]


@dataclass
class LasDecisions:
    """What one LAS pass asks for."""

    preemptions: list[Preemption] = field(default_factory=list)
    growths: list[Growth] = field(default_factory=list)
    small_starts: list[SmallStart] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.preemptions or self.growths or self.small_starts)


def decide_las(
    snapshot: Snapshot,
    roles: Roles,
    progress: Mapping[str, JobProgress],
    in_flight: Sequence[InFlight],
    *,
    min_run: float = MIN_RUN,
    max_preemptions: int | None = None,
    restart_cost: float = 30.0,
    threshold: float = 0.05,
    quantum: float = QUANTUM,
) -> LasDecisions:
    """One pass (see the module docstring)."""
    out = LasDecisions()
    if in_flight or any(waits_to_preempt(j, roles) for j in snapshot.jobs):
        return out
    jobs = [
        j
        for j in snapshot.jobs
        if j.gpus_per_node
        and (j.running or waits_for_gpus(j) or _requeued(j, progress.get(j.job_id)))
    ]
    contenders = {
        j.job_id: contender_of(
            j, roles, progress.get(j.job_id), snapshot.taken, min_run, max_preemptions
        )
        for j in jobs
    }
    capacity = sum(n.total for n in snapshot.nodes if n.usable)
    sizes = plan(list(contenders.values()), capacity, threshold=threshold, quantum=quantum)
    order = sorted(
        (j for j in jobs if waits_for_gpus(j) and sizes.get(j.job_id)),
        key=lambda j: order_key(contenders[j.job_id], quantum),
    )
    starts = order[0] if order else None
    for job in jobs:
        prog = progress.get(job.job_id, JobProgress())
        per_node = job.gpus_per_node
        target = sizes.get(job.job_id, 0) // per_node
        if job.pending:
            if 0 < target < job.nodes:
                out.small_starts.append(SmallStart(job.job_id, job.nodes, target))
            continue
        held = job.nodes
        if target < held and starts is not None and contenders[job.job_id].preemptible:
            shrink = target if target and prog.elastic_nodes and prog.directory else None
            out.preemptions.append(
                victim_and_preemption(
                    job, starts, prog, snapshot.taken, roles, restart_cost, resize_to=shrink
                )
            )
    if out.preemptions:
        return out
    for job in jobs:
        target = sizes.get(job.job_id, 0) // job.gpus_per_node
        if job.running and target > job.nodes and job.start is not None:
            placement = dict.fromkeys(job.hosts, job.gpus_per_node)
            out.growths.append(Growth(job.job_id, job.nodes, target, placement, job.start))
    return out


def contender_of(
    job: ClusterJob,
    roles: Roles,
    prog: JobProgress | None,
    now: float,
    min_run: float = MIN_RUN,
    max_preemptions: int | None = None,
) -> Contender:
    """The job as :func:`~hpclaunch.scheduling.las.plan` sees it (module docstring)."""
    prog = prog or JobProgress()
    per_node = job.gpus_per_node
    nodes = sorted({*prog.elastic_nodes, job.nodes}) if prog.elastic_nodes else [job.nodes]
    ran = now - job.start if job.running and job.start is not None else 0.0
    attained = (prog.served + ran * job.nodes) * per_node
    preemptible = (job.qos or "") in roles.grace
    # Every run makes progress before the plan takes its GPUs: a run younger than
    # min_run is kept (the simulator's rounds of 60 s, a 30 s restart, do the same; on the
    # cluster a job preempted 4 s into its first run for a newcomer was seen).
    protected = job.running and ran < min_run
    if max_preemptions is not None and prog.preemptions >= max_preemptions:
        protected = True
    speedup = _speedup(prog, per_node, nodes[0])
    return Contender(
        job.job_id,
        tuple(n * per_node for n in nodes),
        held=job.nodes * per_node if job.running else 0,
        attained=attained,
        submitted=float(job.unique_id.split("_")[0]) if job.unique_id[:1].isdigit() else 0.0,
        tier=1 if preemptible else 0,
        preemptible=preemptible and not protected,
        may_grow=not job.running or (bool(prog.elastic_nodes) and ran >= prog.elastic_interval),
        speedup=speedup,
    )


def _requeued(job: ClusterJob, prog: JobProgress | None) -> bool:
    """A job that ran before and waits out Slurm's requeue delay (``BeginTime``): its GPUs
    are spoken for. Left out, they looked idle, and the plan grew another job into them."""
    return (
        job.pending
        and job.reason == "BeginTime"
        and prog is not None
        and (prog.served > 0 or prog.preemptions > 0)
    )


def _batch(policy: str, gpus: int, base: int) -> float:
    """The job's global batch at ``gpus`` relative to its smallest size's ``base``
    (:mod:`hpclaunch.jobspec.batchplan`: fixed, linear, sqrt; caps aside)."""
    if policy == "linear":
        return gpus / base
    if policy == "sqrt":
        return math.sqrt(gpus / base)
    return 1.0


def _speedup(prog: JobProgress, per_node: int, smallest: int) -> Callable[[int, int], float] | None:
    """How much faster the job predicts it runs on more GPUs (``None``: it measured
    nothing): an adaptive batch's goodput with its best plan at each size, else samples/s
    by the throughput model of its speeds."""
    adaptive = prog.adaptive
    if adaptive is not None and adaptive.goodput(prog.ranks_per_node, 1) is not None:
        return _AdaptiveSpeedup(adaptive, per_node, prog.ranks_per_node)
    model = _model(prog, per_node, smallest)
    return None if model is None else _Speedup(model, prog.batch, per_node, smallest)


@dataclass(frozen=True)
class _AdaptiveSpeedup:
    """``speedup(a, b)``: predicted goodput on ``a`` GPUs over on ``b``, each with the
    batch its next attempt would choose there."""

    adaptive: Adaptive
    per_node: int
    ranks_per_node: int

    def __call__(self, a: int, b: int) -> float:
        return self._goodput(a) / self._goodput(b)

    def _goodput(self, gpus: int) -> float:
        nodes = max(1, gpus // self.per_node)
        found = self.adaptive.goodput(nodes * self.ranks_per_node, nodes)
        return found if found is not None else float(gpus)


def _model(prog: JobProgress, per_node: int, smallest: int) -> Throughput | None:
    """The throughput model fitted to the job's samples/s per node count (``None``: it
    measured none)."""
    if not prog.speeds:
        return None
    model = Throughput()
    for nodes, speed in prog.speeds.items():
        gpus = nodes * per_node
        batch = _batch(prog.batch, gpus, smallest * per_node)
        model.measure(Shape(gpus, nodes, batch / gpus), batch / speed)
    return model


@dataclass(frozen=True)
class _Speedup:
    """``speedup(a, b)``: predicted samples/s on ``a`` GPUs over on ``b``."""

    model: Throughput
    policy: str
    per_node: int
    smallest: int

    def __call__(self, a: int, b: int) -> float:
        return self._speed(a) / self._speed(b)

    def _speed(self, gpus: int) -> float:
        nodes = max(1, gpus // self.per_node)
        batch = _batch(self.policy, gpus, self.smallest * self.per_node)
        speed = self.model.samples_per_second(Shape(gpus, nodes, batch / gpus))
        return speed if speed is not None else float(gpus)
