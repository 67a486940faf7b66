"""One pass of the arbiter's policy over a snapshot: which running jobs to preempt, for whom.

Pure: :func:`decide` sees the cluster (:class:`Snapshot`),
what each running preemptible job has at stake
(:class:`~hpclaunch.scheduling.arbiter.progress.JobProgress`) and the preemptions already
under way, and returns new :class:`Preemption` s. The victim choice is the simulator's
:func:`hpclaunch.scheduling.victims.choose_victims`, the same function the simulated
``ours`` policy uses, called with the live cluster's state.

Who may preempt whom comes from the site config, as for Slurm's own preemption
(``hpclaunch site plan``): a pending job whose QOS is a preempting tier's (``may_preempt``)
may take GPUs from running jobs whose QOS is a preemptible tier's or the over-quota QOS.

The pass goes through the pending preempting jobs in Slurm's order (priority, then submit
time) on a copy of the free GPUs per node:

1. a job whose victims are still stopping gets their GPUs as they come free (nothing new is
   chosen for it);
2. a job that fits in what is free is left to Slurm (it starts on the next scheduling pass);
   its GPUs are taken off the copy, so a later job does not count on them;
3. otherwise :func:`choose_victims` picks the cheapest set among the candidates not chosen
   already; the freed GPUs go to this job on the copy.

Only jobs Slurm holds for ``Resources`` or ``Priority`` are considered: one waiting for its
quota (``AssocGrpGRES``), a dependency or a begin time would not start if GPUs came free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpclaunch.config.site import SiteConfig
from hpclaunch.scheduling.arbiter.progress import JobProgress
from hpclaunch.scheduling.elastic import growth_saving
from hpclaunch.scheduling.placement import best_fit
from hpclaunch.scheduling.victims import (
    MIN_RUN,
    Candidate,
    Request,
    capped,
    choose_victims,
    too_young,
)
from hpclaunch.slurm.cluster import ClusterJob, NodeGpus

__all__ = [
    "Growth",
    "InFlight",
    "Preemption",
    "Roles",
    "SmallStart",
    "Snapshot",
    "decide",
    "decide_growth",
    "decide_small_start",
    "roles_of",
    "victim_and_preemption",
    "waits_for_gpus",
    "waits_to_preempt",
]

#: squeue reasons of a job that would start if GPUs were free.
WAITS_FOR_GPUS = frozenset({"Resources", "Priority"})


@dataclass(frozen=True)
class Snapshot:
    """The cluster at one instant (``taken``: epoch seconds)."""

    jobs: tuple[ClusterJob, ...]
    nodes: tuple[NodeGpus, ...]
    taken: float

    def job(self, job_id: str) -> ClusterJob | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)


@dataclass(frozen=True)
class Roles:
    """Which QOS preempt, which are preemptible, and the grace time of each preemptible."""

    preempting: frozenset[str]
    grace: Mapping[str, float]  # preemptible QOS -> seconds

    @property
    def preemptible(self) -> frozenset[str]:
        return frozenset(self.grace)


def roles_of(site: SiteConfig) -> Roles:
    """The QOS roles the site config gives (the same ones ``site plan`` makes in Slurm)."""
    preempting = frozenset(p.qos for p in site.tiers.values() if p.may_preempt)
    grace = {p.qos: float(p.grace) for p in site.tiers.values() if p.preemptible}
    if site.quotas:
        grace[site.overquota.qos] = float(site.overquota.grace)
    return Roles(preempting=preempting, grace=grace)


@dataclass(frozen=True)
class InFlight:
    """A victim signalled earlier and not yet gone.

    Attributes:
        victim: Its job id.
        for_job: The pending job it makes room for.
        signalled_at: When it was asked to checkpoint (or requeued).
        deadline: When its grace ends: still running then, it is requeued by force.
        run_start: Its run's start when signalled (a new start means it was requeued).
        placement: Node name -> GPUs it holds.
    """

    victim: str
    for_job: str
    signalled_at: float
    deadline: float
    run_start: float | None
    placement: Mapping[str, int]


@dataclass(frozen=True)
class Preemption:
    """A decision: preempt ``victim`` so that ``for_job`` can start.

    Attributes:
        checkpoint_first: The victim runs under the sidecar: ask it to checkpoint (it
            requeues itself once committed); else requeue it at once.
        cost: GPU-seconds its preemption wastes, as :func:`choose_victims` counted them.
        since_commit: Seconds of work since its last committed checkpoint.
        grace: Seconds it has before it is requeued by force.
        resize_to: An elastic victim keeps running at this many nodes (``hpclaunch
            resize``'s restart) instead of being evicted; ``None``: evicted.
    """

    victim: str
    for_job: str
    checkpoint_first: bool
    gpus: int
    cost: float
    since_commit: float
    ckpt_write: float
    preemptions: int
    grace: float
    placement: Mapping[str, int]
    run_start: float | None
    resize_to: int | None = None

    def why(self) -> str:
        lost = (
            f"checkpoint on request (~{self.ckpt_write:.0f} s)"
            if self.checkpoint_first
            else f"loses {self.since_commit:.0f} s since its last checkpoint"
        )
        kept = f", shrunk to {self.resize_to} node(s)" if self.resize_to else ""
        return (
            f"{self.victim} ({self.gpus} GPU, {lost}, preempted {self.preemptions}x{kept}) "
            f"for {self.for_job}: cost {self.cost:.0f} GPU-s"
        )


def decide(
    snapshot: Snapshot,
    roles: Roles,
    progress: Mapping[str, JobProgress],
    in_flight: Sequence[InFlight],
    *,
    min_run: float = MIN_RUN,
    max_preemptions: int | None = None,
    restart_cost: float = 30.0,
) -> list[Preemption]:
    """The new preemptions for this pass (see the module docstring)."""
    busy = {f.victim for f in in_flight}
    coming: dict[str, list[InFlight]] = {}
    for f in in_flight:
        coming.setdefault(f.for_job, []).append(f)
    pending = sorted(
        (j for j in snapshot.jobs if waits_to_preempt(j, roles)),
        key=lambda j: (-j.priority, j.unique_id.zfill(12)),
    )
    free = {n.name: n.free for n in snapshot.nodes}
    chosen: list[Preemption] = []
    for job in pending:
        nodes = [n for n in snapshot.nodes if n.usable and _serves(n, job)]
        if not nodes:
            continue
        names = [n.name for n in nodes]
        avail = [free[name] for name in names]
        if job.job_id in coming:
            for f in coming[job.job_id]:
                for host, gpus in f.placement.items():
                    if host in names:
                        avail[names.index(host)] += gpus
            _take(free, names, avail, job)
            continue
        if best_fit(list(avail), job.gpus_per_node, job.nodes) is not None:
            _take(free, names, avail, job)
            continue
        candidates = _candidates(snapshot, roles, progress, names, busy)
        request = Request(gpus_per_node=job.gpus_per_node, nodes=job.nodes)
        by_index = dict(enumerate(candidates))
        alone = _one_shrink(job, candidates, names, avail, min_run, max_preemptions, roles)
        if alone is not None:  # shrink before evicting anyone
            victim, size = alone
            busy.add(victim.job.job_id)
            _give_back(victim, names, avail)
            _take(free, names, avail, job)
            _take_nodes(free, names, avail, victim.job.gpus_per_node, size)
            chosen.append(_preemption(victim, job, roles, restart_cost, size))
            continue
        victims = choose_victims(
            request,
            [_as_candidate(i, c, names, roles, restart_cost) for i, c in by_index.items()],
            avail,
            min_run=min_run,
            max_preemptions=max_preemptions,
        )
        if not victims:
            continue  # () cannot happen here (it did not fit); None: nobody to preempt
        for index in victims:
            victim = by_index[index]
            busy.add(victim.job.job_id)
            _give_back(victim, names, avail)
        _take(free, names, avail, job)
        left = avail  # the victims' GPUs and the free ones, less the waiting job's share
        for index in victims:
            kept = shrink_to(by_index[index], left)  # elastic: keep running smaller
            if kept is not None:
                _take_nodes(free, names, left, by_index[index].job.gpus_per_node, kept)
            chosen.append(_preemption(by_index[index], job, roles, restart_cost, kept))
    return chosen


def victim_and_preemption(
    victim: ClusterJob,
    for_job: ClusterJob,
    prog: JobProgress,
    now: float,
    roles: Roles,
    restart_cost: float,
    resize_to: int | None = None,
) -> Preemption:
    """The decision to preempt (or, ``resize_to``, shrink) running ``victim`` for
    ``for_job``, its cost counted as :func:`decide` counts it (the LAS pass's victims)."""
    return _preemption(_victim_of(victim, prog, now), for_job, roles, restart_cost, resize_to)


def _one_shrink(
    job: ClusterJob,
    candidates: Sequence[_Victim],
    names: Sequence[str],
    avail: Sequence[int],
    min_run: float,
    max_preemptions: int | None,
    roles: Roles,
) -> tuple[_Victim, int] | None:
    """The cheapest elastic candidate whose restart at a smaller size, alone, makes room
    for ``job`` (and still fits beside it); ``None``: there is none."""
    options = []
    for victim in candidates:
        if not victim.progress.elastic_nodes:
            continue
        c = _as_candidate(0, victim, names, roles, 0.0)
        if too_young(c, min_run) or capped(c, max_preemptions):
            continue
        trial = list(avail)
        _give_back(victim, names, trial)
        placement = best_fit(list(trial), job.gpus_per_node, job.nodes)
        if placement is None:
            continue
        for index, gpus in placement.items():
            trial[index] -= gpus
        size = shrink_to(victim, trial)
        if size is not None:
            options.append(
                (
                    c.gpus * (c.ckpt_write if c.honours_request else c.since_commit),
                    victim.job.unique_id.zfill(12),
                    victim,
                    size,
                )
            )
    if not options:
        return None
    _, _, victim, size = min(options, key=lambda o: (o[0], o[1]))
    return victim, size


def _give_back(victim: _Victim, names: Sequence[str], avail: list[int]) -> None:
    """Add the victim's GPUs to ``avail`` (its restart frees them all)."""
    for host, gpus in victim.placement.items():
        if host in names:
            avail[names.index(host)] += gpus


def shrink_to(victim: _Victim, free: list[int]) -> int | None:
    """The largest of an elastic victim's smaller sizes that fits in ``free`` (GPUs per
    node once the waiting job has its share); ``None``: evict it (not elastic, or no
    smaller size fits). Slurm decides where the restart runs; a size that fits by
    placement here is one it can start at once, the waiting job's GPUs left alone (that
    job's priority is higher: it is scheduled first)."""
    nodes = len(victim.job.hosts)
    for size in sorted(victim.progress.elastic_nodes, reverse=True):
        if size < nodes and best_fit(list(free), victim.job.gpus_per_node, size) is not None:
            return size
    return None


@dataclass(frozen=True)
class Growth:
    """A decision: restart elastic job ``job_id`` at ``to_nodes`` nodes, into idle GPUs."""

    job_id: str
    from_nodes: int
    to_nodes: int
    placement: Mapping[str, int]
    run_start: float | None

    def why(self) -> str:
        return (
            f"{self.job_id} grows from {self.from_nodes} to {self.to_nodes} node(s): "
            "the GPUs are idle and no job waits for them"
        )


def decide_growth(
    snapshot: Snapshot,
    progress: Mapping[str, JobProgress],
    in_flight: Sequence[InFlight],
    *,
    restart_cost: float = 30.0,
) -> Growth | None:
    """At most one elastic job to grow this pass: none while any job waits for GPUs (it
    would take them, or a growth would hold them off) or a preemption or resize is under
    way; else the running elastic job that has run ``elastic.min_interval`` since its
    start and gains most nodes from the largest of its sizes that fits in the idle GPUs
    and its own (its restart frees them), where that saves more time than the resize
    costs (:func:`~hpclaunch.scheduling.elastic.growth_saving`, the simulator's rule: the
    time left to its limit at its size against at the larger one, at the speeds its ledger
    measured at both sizes or else linear ones, plus its checkpoint write and
    ``restart_cost``; a job without a known limit always gains)."""
    if in_flight or any(waits_for_gpus(j) for j in snapshot.jobs):
        return None
    free = {n.name: n.free for n in snapshot.nodes if n.usable}
    best: Growth | None = None
    for job in snapshot.jobs:
        prog = progress.get(job.job_id)
        if prog is None or not prog.elastic_nodes or not job.running or job.start is None:
            continue
        ran = snapshot.taken - job.start
        if ran < prog.elastic_interval:
            continue
        nodes = [n for n in snapshot.nodes if n.usable and _serves(n, job)]
        names = [n.name for n in nodes]
        avail = [
            free.get(name, 0) + (job.gpus_per_node if name in job.hosts else 0) for name in names
        ]
        now_nodes = len(job.hosts)
        for size in sorted(prog.elastic_nodes, reverse=True):
            if size <= now_nodes:
                break
            if best_fit(list(avail), job.gpus_per_node, size) is not None:
                if prog.time_limit is not None:
                    # Speeds: the job's measured samples/s at both sizes where its ledger
                    # has them, else linear in the node count.
                    here, there = prog.speeds.get(now_nodes), prog.speeds.get(size)
                    if not (here and there):
                        here, there = float(now_nodes), float(size)
                    saving = growth_saving(
                        left=max(0.0, prog.time_limit - ran),  # work left, in seconds now
                        gpus=here,
                        target=there,
                        full_gpus=here,
                        restart=prog.ckpt_write + restart_cost,
                    )
                    if saving <= 0:
                        break
                if best is None or size - now_nodes > best.to_nodes - best.from_nodes:
                    placement = dict.fromkeys(job.hosts, job.gpus_per_node)
                    best = Growth(job.job_id, now_nodes, size, placement, job.start)
                break
    return best


@dataclass(frozen=True)
class SmallStart:
    """A decision: pending elastic job ``job_id`` asks for ``to_nodes`` nodes instead of
    ``from_nodes`` (``scontrol update NumNodes``), a size that fits in the idle GPUs now."""

    job_id: str
    from_nodes: int
    to_nodes: int

    def why(self) -> str:
        return (
            f"{self.job_id} starts on {self.to_nodes} of its {self.from_nodes} node(s): "
            "that many are idle now; it grows when more come free"
        )


def decide_small_start(
    snapshot: Snapshot,
    roles: Roles,
    progress: Mapping[str, JobProgress],
    in_flight: Sequence[InFlight],
) -> SmallStart | None:
    """At most one pending elastic job to start smaller this pass (the simulator's
    ``ours-elastic`` starts an elastic job at the largest of its sizes that fits, whenever
    it fits: BE jobs' median slowdown -42 %, docs/simulator.md): in Slurm's order, the first
    one that waits for GPUs (``Resources``/``Priority``) and has a smaller size that fits
    in the idle GPUs, at the largest such size. None while a preemption or resize is under
    way or a job waits to preempt (the idle GPUs are that job's). Whether it may start
    before a job ahead of it stays Slurm's call (its backfill), as for any pending job."""
    if in_flight or any(waits_to_preempt(j, roles) for j in snapshot.jobs):
        return None
    free = {n.name: n.free for n in snapshot.nodes if n.usable}
    waiting = [j for j in snapshot.jobs if waits_for_gpus(j)]
    for job in sorted(waiting, key=lambda j: -j.priority):
        prog = progress.get(job.job_id)
        smaller = sorted(n for n in (prog.elastic_nodes if prog else ()) if n < job.nodes)
        if not smaller:
            continue
        avail = [free.get(n.name, 0) for n in snapshot.nodes if n.usable and _serves(n, job)]
        for size in reversed(smaller):
            if best_fit(list(avail), job.gpus_per_node, size) is not None:
                return SmallStart(job.job_id, job.nodes, size)
    return None


def waits_for_gpus(job: ClusterJob) -> bool:
    """A pending job that Slurm holds for GPUs (``Resources``/``Priority``): one that GPUs
    coming free would start."""
    return job.pending and job.gpus_per_node > 0 and job.reason in WAITS_FOR_GPUS


def waits_to_preempt(job: ClusterJob, roles: Roles) -> bool:
    """A pending job of a preempting QOS that Slurm holds for GPUs (a decision is due)."""
    return job.qos in roles.preempting and waits_for_gpus(job)


@dataclass(frozen=True)
class _Victim:
    job: ClusterJob
    progress: JobProgress
    since_commit: float
    ran: float  # seconds its current run has lasted
    placement: Mapping[str, int]


def _candidates(
    snapshot: Snapshot,
    roles: Roles,
    progress: Mapping[str, JobProgress],
    names: Sequence[str],
    busy: set[str],
) -> list[_Victim]:
    """The running preemptible jobs on ``names`` not chosen already (the per-job caps are
    :func:`choose_victims`'s)."""
    out = []
    for job in snapshot.jobs:
        if not job.running or job.qos not in roles.preemptible or job.job_id in busy:
            continue
        if job.gpus_per_node == 0 or not set(job.hosts) & set(names):
            continue
        out.append(_victim_of(job, progress.get(job.job_id, JobProgress()), snapshot.taken))
    out.sort(key=lambda v: v.job.unique_id.zfill(12))
    return out


def _victim_of(job: ClusterJob, prog: JobProgress, now: float) -> _Victim:
    """Running ``job`` as a victim at ``now``: what a kill loses, how long it ran, where."""
    ran = now - job.start if job.start is not None else math.inf
    placement = dict.fromkeys(job.hosts, job.gpus_per_node)
    return _Victim(job, prog, prog.since_commit(now, job.start), ran, placement)


def _as_candidate(
    index: int, victim: _Victim, names: Sequence[str], roles: Roles, restart_cost: float
) -> Candidate:
    prog = victim.progress
    return Candidate(
        job_id=index,
        placement={names.index(h): g for h, g in victim.placement.items() if h in names},
        since_commit=victim.since_commit,
        ckpt_write=prog.ckpt_write,
        restart_cost=restart_cost,
        preemptions=prog.preemptions,
        honours_request=_honours(victim, roles),
        ran=victim.ran,
    )


def _preemption(
    victim: _Victim, job: ClusterJob, roles: Roles, restart: float, resize_to: int | None = None
) -> Preemption:
    prog = victim.progress
    grace = roles.grace.get(victim.job.qos or "", 0.0)
    honours = _honours(victim, roles)
    lost = prog.ckpt_write if honours else victim.since_commit
    gpus = sum(victim.placement.values())
    return Preemption(
        victim=victim.job.job_id,
        for_job=job.job_id,
        checkpoint_first=honours,
        gpus=gpus,
        cost=gpus * (lost + restart),
        since_commit=victim.since_commit,
        ckpt_write=prog.ckpt_write,
        preemptions=prog.preemptions,
        grace=grace,
        placement=dict(victim.placement),
        run_start=victim.job.start,
        resize_to=resize_to,
    )


def _honours(victim: _Victim, roles: Roles) -> bool:
    """Whether the victim can answer a checkpoint request within its grace time: it runs
    under the sidecar, and its last write (when it made one) took no longer than the grace.

    A job that has not committed yet is asked too (its cost still counts the default write
    time): requeued at once it would lose its whole run, and one preempted again and again
    before its first periodic checkpoint would never make progress (seen on the cluster,
    2026-11-24: a 16-GPU job requeued 4 times, 3-22 s into each run, always from step 0).
    If it cannot write in time, it is requeued by force when its grace ends."""
    grace = roles.grace.get(victim.job.qos or "", 0.0)
    prog = victim.progress
    return prog.supervised and (not prog.write_measured or prog.ckpt_write <= grace)


def _serves(node: NodeGpus, job: ClusterJob) -> bool:
    """Whether ``job`` may run on ``node`` (one of its partitions; any when unknown)."""
    return not job.partitions or bool(node.partitions & job.partitions)


def _take(free: dict[str, int], names: Sequence[str], avail: list[int], job: ClusterJob) -> None:
    """Give ``job`` its GPUs out of ``avail`` (best fit) and write what is left to ``free``."""
    _take_nodes(free, names, avail, job.gpus_per_node, job.nodes)


def _take_nodes(
    free: dict[str, int], names: Sequence[str], avail: list[int], per_node: int, nodes: int
) -> None:
    """Take ``nodes`` x ``per_node`` GPUs out of ``avail`` (best fit; updated in place) and
    write what is left to ``free``."""
    placement = best_fit(list(avail), per_node, nodes)
    if placement is None:
        return
    for index, gpus in placement.items():
        avail[index] = max(0, avail[index] - gpus)
        free[names[index]] = avail[index]
