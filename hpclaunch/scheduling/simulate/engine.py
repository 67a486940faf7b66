"""The event-driven simulator: one heap of timed events, one scheduling pass per instant.

Events: ``ARRIVE`` (submission, or re-arrival after the requeue delay), ``FINISH`` (a run
ends; stale ones of preempted runs are skipped by epoch), ``RELEASE`` (a preempted job
gives its GPUs back: after its on-request checkpoint write, or at the end of the grace
time). A preemption: the victim is signalled at ``t``; with a checkpoint request it honours
(notice + write time <= grace time) it computes on for its ``ckpt_notice``, commits its
progress at ``t + notice`` and releases at ``t + notice + write`` (one that ends during the
notice simply finishes);
otherwise it keeps its last periodic checkpoint and is killed at ``t + grace``. It arrives
again at release + ``requeue_delay``, keeps its place in the queue order (its submission
time), and pays ``restart_cost`` when it starts again. ``WAKE`` changes nothing: it makes a
scheduling pass happen when a victim the policy protects (:meth:`Policy.eligible_at`)
becomes eligible, which no other event marks.

After all events of one instant, the scheduler passes over the queue in the policy's order:
start what fits; for a TE job that does not fit, a preempting policy may pick victims; with
backfill, the first blocked job gets a reservation (EASY: its shadow time from the running
jobs' expected ends, which the simulator knows exactly unless jobs carry a time ``limit``,
which Slurm plans with instead) and later jobs start if they fit now
and end by then or only use GPUs it will not need. The backfill pass looks at no more than
``bf_max_job_test`` queued jobs, like Slurm's parameter of that name.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from hpclaunch.scheduling import las
from hpclaunch.scheduling.elastic import growth_saving
from hpclaunch.scheduling.simulate.model import TE, Cluster, Job
from hpclaunch.scheduling.simulate.policies import Policy
from hpclaunch.scheduling.victims import MIN_RUN, Candidate, Request, VictimChoice

__all__ = ["SimConfig", "SimResult", "simulate"]

# Same instant: arrivals, then releases, then finishes, then wake-ups.
ARRIVE, RELEASE, FINISH, WAKE = 0, 1, 2, 3


@dataclass(frozen=True)
class SimConfig:
    """Cluster shape and the preemption mechanics.

    Attributes:
        nodes: Number of nodes.
        gpus_per_node: GPUs per node.
        grace_time: Seconds between the preemption signal and the kill (QOS GraceTime).
        requeue_delay: Seconds a requeued job waits before it may start again.
        bf_max_job_test: Queued jobs the backfill pass looks at, at most.
    """

    nodes: int = 32
    gpus_per_node: int = 8
    grace_time: float = 60.0
    requeue_delay: float = 120.0
    bf_max_job_test: int = 100


@dataclass
class SimResult:
    """Finished jobs and counters of one run."""

    policy: str
    jobs: list[Job]
    gpus: int
    events: int = 0
    wall_seconds: float = 0.0
    preemptions: int = 0
    lost_gpu_seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


class _Sim:
    def __init__(self, jobs: list[Job], policy: Policy, config: SimConfig) -> None:
        self.policy = policy
        self.config = config
        self.cluster = Cluster(config.nodes, config.gpus_per_node)
        self.jobs = jobs
        self.heap: list[tuple[float, int, int, int, Job]] = []
        self.seq = 0
        self.queue: list[tuple[tuple[int, float, int], Job]] = []
        self.running: dict[int, Job] = {}
        self.ends: list[tuple[float, int]] = []  # (expected end, id) of running jobs, sorted
        self.events = 0
        self.preemptions = 0
        self.resizes = 0  # growths of elastic jobs (a shrink is a preemption's restart)
        self.wakes: set[float] = set()  # WAKE times in the heap
        self.requeued: dict[int, Job] = {}  # released, waiting out the requeue delay
        for job in jobs:
            if job.gpus_per_node > config.gpus_per_node:
                raise ValueError(
                    f"job {job.id} needs {job.gpus_per_node} GPUs per node; nodes have "
                    f"{config.gpus_per_node}"
                )
            self._push(job.submit, ARRIVE, job)

    def _push(self, at: float, kind: int, job: Job, epoch: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, kind, self.seq, epoch, job))

    def _key(self, job: Job) -> tuple[int, float, int]:
        rank = 0 if (self.policy.order == "priority" and job.cls == TE) else 1
        return (rank, job.submit, job.id)

    def run(self) -> None:
        heap = self.heap
        while heap:
            now, kind, _, epoch, job = heapq.heappop(heap)
            self.events += 1
            self._handle(now, kind, epoch, job)
            # The pass runs after the instant's last event, even a stale one: skipping it
            # there would strand what an earlier event of the same instant freed.
            if not heap or heap[0][0] > now:
                self._schedule(now)

    def _handle(self, now: float, kind: int, epoch: int, job: Job) -> None:
        if kind == ARRIVE:
            self.requeued.pop(job.id, None)
            if job.sizes and self.policy.elastic:
                job.resize(job.full_gpus)  # it asks for its full size, takes what fits
            # Computed once per wait, not at every pass (the passes' hottest call).
            job.queued_run = job.planned_run()
            bisect.insort(self.queue, (self._key(job), job), key=lambda e: e[0])
        elif kind == FINISH:
            # A victim killed at the end of its grace time may still finish within it.
            if epoch != job.epoch or not job.running:
                return
            self._stop(job, now)
            job.draining = False
            job.committed = job.duration
            job.finish = now
        elif kind == RELEASE:
            if epoch != job.epoch or not job.draining:
                return
            self._stop(job, now)
            job.draining = False
            self.requeued[job.id] = job
            self._push(now + self.config.requeue_delay, ARRIVE, job)
        else:  # WAKE
            self.wakes.discard(now)

    def _stop(self, job: Job, now: float) -> None:
        job.busy_gpu_seconds += job.gpus * (now - job.run_start)
        self.cluster.release(job.placement)
        del self.running[job.id]
        del self.ends[bisect.bisect_left(self.ends, job.end_key)]
        job.placement = {}
        job.run_start = job.compute_start = -1.0

    def _start(self, job: Job, placement: dict[int, int], now: float) -> None:
        self.cluster.allocate(placement)
        job.placement = placement
        job.run_start = now
        job.compute_start = now + job.overhead()
        job.epoch += 1
        job.awaiting_until = -1.0
        job.resized_at = now  # an elastic job grows no sooner than min_interval after
        if job.first_start < 0:
            job.first_start = now
        self.running[job.id] = job
        job.end_key = (job.planned_end(), job.id)
        bisect.insort(self.ends, job.end_key)
        self._push(job.expected_end(), FINISH, job, job.epoch)

    def _schedule(self, now: float) -> None:
        if self.policy.las:
            self._las(now)
            return
        cluster = self.cluster
        policy = self.policy
        queue = self.queue
        started: list[int] = []
        shadow = -1.0  # shadow time of the first blocked job (-1: none yet)
        extra = 0
        looked = 0
        smallest_failed = cluster.gpus_per_node + 1  # per-node share that found no place
        for i, (_, job) in enumerate(queue):
            te = job.cls == TE
            if cluster.total_free == 0 and not (policy.preempts and te):
                break
            looked += 1
            if shadow >= 0 and looked > self.config.bf_max_job_test:
                break
            placement = None
            share = job.gpus_per_node
            late = False  # would run past the shadow time: only on GPUs beyond the reservation
            if cluster.total_free >= job.gpus and share < smallest_failed:
                if shadow >= 0:
                    late = now + job.queued_run > shadow
                if not late or job.gpus <= extra:
                    placement = cluster.find(share, job.nodes)
                    if placement is None and job.nodes == 1:
                        smallest_failed = share
            if placement is None and job.sizes and policy.elastic:
                placement, late = self._smaller(job, now, shadow, extra)
            if placement is not None:
                if late:
                    extra -= job.gpus
                self._start(job, placement, now)
                started.append(i)
                continue
            if policy.preempts and te and job.awaiting_until < now and self._preempt_for(job, now):
                continue
            if job.awaiting_until >= now:
                continue  # its GPUs are being freed; it reserves nothing else
            if shadow < 0:
                if not policy.backfill:
                    break
                shadow, extra = self._shadow(job, now)
        for i in reversed(started):
            del queue[i]
        if policy.elastic and not queue and cluster.total_free:
            self._grow(now)

    def _smaller(
        self, job: Job, now: float, shadow: float, extra: int
    ) -> tuple[dict[int, int] | None, bool]:
        """An elastic job that does not fit at its size starts at the largest of its
        smaller sizes that fits, leaves the policy's headroom and keeps out of the
        reservation (as any backfill): whenever it fits, not only where that is predicted
        to end it sooner than waiting for its full size. That prediction (from the running
        jobs' planned ends) held BE jobs back: BE p50 -0.4 % against ``ours`` with it,
        -42 % without (10 seeds, load 1.0; docs/simulator.md)."""
        cluster = self.cluster
        spare = cluster.total_free - int(cluster.gpus * self.policy.headroom)
        for gpus in reversed(job.sizes):
            if gpus >= job.full_gpus or gpus > spare:
                continue
            share, nodes = job.shape(gpus)
            run = job.overhead() + (job.duration - job.committed) * job.full_gpus / gpus
            late = shadow >= 0 and now + run > shadow
            if late and gpus > extra:
                continue
            placement = cluster.find(share, nodes)
            if placement is not None:
                job.resize(gpus)
                return placement, late
        return None, False

    def _grow(self, now: float) -> None:
        """Nobody waits and GPUs are idle: the running elastic job that saves most by
        growing (its remaining time at its size, against at the largest size that would
        fit, plus a checkpoint and a restart) is stopped to restart larger, at most one per
        instant and no sooner than ``min_interval`` after its last start."""
        cluster = self.cluster
        best: tuple[float, Job] | None = None
        for r in self.running.values():
            if not r.sizes or r.draining or r.gpus >= r.full_gpus:
                continue
            at = r.resized_at + self.policy.min_interval
            # `now < at`, not `now - resized_at < min_interval`: at the WAKE itself (now ==
            # at) the difference can round below the interval, and the job would push the
            # same WAKE again, forever (seen: load 0.7 seed 0, 1.9 million WAKEs at one time).
            if now < at:
                if at not in self.wakes:  # look again when it may grow
                    self.wakes.add(at)
                    self._push(at, WAKE, r)
                continue
            cluster.release(r.placement)  # the restart gives its own GPUs back first
            spare = cluster.total_free - int(cluster.gpus * self.policy.headroom)
            target = next(
                (g for g in reversed(r.sizes) if r.gpus < g <= spare and cluster.fits(*r.shape(g))),
                0,
            )
            cluster.allocate(r.placement)
            if not target:
                continue
            saving = self._growth_saving(r, target, now)
            if saving > 0 and (best is None or saving > best[0]):
                best = (saving, r)
        if best is not None:
            self.resizes += 1
            self._signal(best[1], now, VictimChoice((best[1].id,), True), resize=True)

    def _las(self, now: float) -> None:
        """The ``ours-las`` pass: :func:`hpclaunch.scheduling.las.plan` (the live
        arbiter's ``--policy las``) decides who holds how many GPUs; this applies it as the
        arbiter does. Queued jobs the plan gives GPUs start where their shape fits; if one
        does not, the running jobs the plan gives less than they hold are stopped (a
        checkpoint on request; an elastic one comes back after the requeue delay at the
        size the plan then gives it); with nobody waiting, an elastic job the plan grows
        restarts larger where that saves time (:func:`growth_saving`, as ``_grow``). While
        a job drains, nothing new is decided (the arbiter waits for a decision under way
        to finish), but queued jobs still start."""
        cluster = self.cluster
        quantum = self.policy.quantum
        draining = sum(r.gpus for r in self.running.values() if r.draining)
        live = [r for r in self.running.values() if not r.draining]
        queued = [job for _, job in self.queue]
        # A job waiting out its requeue delay contends too (the arbiter's BeginTime job):
        # left out, the GPUs it gave back looked idle and went to a growth, and it took
        # them back at its return (5,000 jobs: 6,824 preemptions against 292).
        contenders = {
            j.id: self._contender(j, now) for j in (*live, *queued, *self.requeued.values())
        }
        sizes = las.plan(list(contenders.values()), cluster.gpus - draining, quantum=quantum)
        started, waiting = set(), False
        for job in sorted(queued, key=lambda j: las.order_key(contenders[j.id], quantum)):
            size = sizes.get(str(job.id), 0)
            if not size:
                continue
            if job.sizes:
                job.resize(size)
            placement = cluster.find(job.gpus_per_node, job.nodes)
            if placement is None:
                waiting = True
                continue
            self._start(job, placement, now)
            started.add(job.id)
        if started:
            self.queue = [(k, j) for k, j in self.queue if j.id not in started]
        if draining:
            return
        if waiting:
            for r in live:
                if sizes.get(str(r.id), 0) < r.gpus and r.preemptible:
                    self._signal(r, now, VictimChoice((r.id,), True))
            return
        for r in live:
            target = sizes.get(str(r.id), 0)
            if r.sizes and target > r.gpus and self._growth_saving(r, target, now) > 0:
                self.resizes += 1
                self._signal(r, now, VictimChoice((r.id,), True), resize=True)

    def _contender(self, job: Job, now: float) -> las.Contender:
        """``job`` as the plan sees it: its sizes, what it holds and has held, its tier (TE
        before BE), whether it may be preempted (BE, past ``min_run``) or grow (past its
        interval); its speed-up is the model's linear one."""
        running = job.running and not job.draining
        ran = now - job.run_start if running else 0.0
        grown_ago = now - job.resized_at if running else math.inf
        return las.Contender(
            str(job.id),
            job.sizes if (job.sizes and self.policy.elastic) else (job.full_gpus,),
            held=job.gpus if running else 0,
            attained=job.busy_gpu_seconds + ran * (job.gpus if running else 0),
            submitted=job.submit,
            tier=0 if job.cls == TE else 1,
            preemptible=job.preemptible and ran >= MIN_RUN,
            may_grow=grown_ago >= self.policy.min_interval,
        )

    def _growth_saving(self, job: Job, target: int, now: float) -> float:
        """Seconds ``job`` saves by restarting at ``target`` GPUs now (:func:`growth_saving`
        with its checkpoint, the requeue delay and its restart)."""
        return growth_saving(
            left=job.duration - job.progress(now),
            gpus=job.gpus,
            target=target,
            full_gpus=job.full_gpus,
            restart=self._resize_cost(job),
        )

    def _resize_cost(self, job: Job) -> float:
        """Seconds without work that a resize costs ``job``: a checkpoint on request,
        the requeue delay and the restart."""
        return job.ckpt_notice + job.ckpt_write + self.config.requeue_delay + job.restart_cost

    def _shadow(self, job: Job, now: float) -> tuple[float, int]:
        """EASY: when enough GPUs will be free for ``job``, and how many beyond its need."""
        free = self.cluster.total_free
        if free >= job.gpus:  # fits by count, not by shape: wait for the next end
            return (self.ends[0][0] if self.ends else now), 0
        running = self.running
        for end, job_id in self.ends:
            free += running[job_id].gpus
            if free >= job.gpus:
                return end, free - job.gpus
        return float("inf"), 0

    def _preempt_for(self, job: Job, now: float) -> bool:
        candidates = [
            Candidate(
                job_id=r.id,
                placement=r.placement,
                since_commit=r.since_commit(now),
                ckpt_write=r.ckpt_write,
                restart_cost=r.restart_cost,
                preemptions=r.preemptions,
                tier=r.tier,
                start=r.run_start,
                honours_request=r.ckpt_notice + r.ckpt_write <= self.config.grace_time,
                ran=now - r.run_start,
            )
            for r in self.running.values()
            if r.preemptible and not r.draining
        ]
        if not candidates:
            return False
        decision = self.policy.victims(
            Request(job.gpus_per_node, job.nodes), candidates, self.cluster.free
        )
        if decision is None or not decision.victims:
            at = self.policy.eligible_at(candidates, now)
            if at is not None and at > now and at not in self.wakes:
                self.wakes.add(at)
                self._push(at, WAKE, job)
            return False
        until = now
        for victim_id in decision.victims:
            until = max(until, self._signal(self.running[victim_id], now, decision))
        job.awaiting_until = until
        return True

    def _signal(
        self, victim: Job, now: float, decision: VictimChoice, *, resize: bool = False
    ) -> float:
        """Preempt ``victim`` at ``now`` (or stop it to restart larger: ``resize``);
        returns when it releases its GPUs."""
        grace = self.config.grace_time
        victim.draining = True
        victim.preemptions += 1  # both pay a restart, and protect it for min_run
        if not resize:
            self.preemptions += 1
        if decision.checkpoint_request and victim.ckpt_notice + victim.ckpt_write <= grace:
            stop = now + victim.ckpt_notice  # it computes until it sees the request
            if victim.expected_end() <= stop:
                return victim.expected_end()  # it ends first: its FINISH stands
            # It stops computing to write: its progress then is committed, it cannot finish.
            victim.committed = victim.progress(stop)
            victim.epoch += 1
            release = stop + victim.ckpt_write
        else:
            release = now + grace
            victim.committed = victim.periodic_commit(release)
        self._push(release, RELEASE, victim, victim.epoch)
        return release


def simulate(jobs: Iterable[Job], policy: Policy, config: SimConfig | None = None) -> SimResult:
    """Run ``jobs`` (fresh copies are not made: pass new Job objects) under ``policy``.

    Returns:
        The jobs with their finish times, the event count and wall time, preemptions and
        the lost GPU time (GPU time held beyond each job's ``gpus x duration``).
    """
    config = config or SimConfig()
    sim = _Sim(list(jobs), policy, config)
    t0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - t0
    unfinished = [j.id for j in sim.jobs if j.finish < 0]
    if unfinished:
        raise RuntimeError(f"simulation ended with unfinished jobs: {unfinished[:10]}")
    lost = sum(j.busy_gpu_seconds - j.full_gpus * j.duration for j in sim.jobs)
    lost = 0.0 if abs(lost) < 1e-6 * max(1, len(sim.jobs)) else lost  # float noise
    return SimResult(
        policy=policy.name,
        jobs=sim.jobs,
        gpus=sim.cluster.gpus,
        events=sim.events,
        wall_seconds=wall,
        preemptions=sim.preemptions,
        lost_gpu_seconds=lost,
        extra={"resizes": float(sim.resizes)} if policy.elastic else {},
    )
