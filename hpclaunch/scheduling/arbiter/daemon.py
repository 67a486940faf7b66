"""The arbiter's loop: read the cluster, decide, act, follow up, and record every step.

Each pass (:meth:`Arbiter.step`) costs slurmctld two RPCs (the job list and the node list:
one ``squeue`` and one ``scontrol show nodes`` with the cli backend, two library calls with
pyslurm), a third (``squeue -O RestartCnt``; the job list again with pyslurm) only when a
job waits for GPUs it may take by preemption, plus one per action, and reads the job
directories of the running preemptible jobs on the shared filesystem. Actions:

* a victim under the sidecar gets the preemption signal on its batch step (``scancel
  --batch --signal=USR1``): the sidecar asks the trainer for a checkpoint, waits for the
  commit, runs ``scontrol requeue`` itself and records it all in the job's ledger, exactly
  as at a Slurm preemption with ``--signal=B:USR1``;
* an elastic victim (its script's ``elastic:`` block) that still fits at a smaller size once
  the waiting job has its GPUs is shrunk instead: a resize request in its control directory
  (as ``hpclaunch resize``), and its sidecar checkpoints and restarts it at that size;
* when no job waits for GPUs and none is being preempted, the elastic job that gains most
  nodes from the idle GPUs (and has run its ``elastic.min_interval``) is asked to grow, the
  same way: one per pass;
* a victim without one (or whose checkpoint takes longer than its grace) is requeued at once
  (``scontrol requeue``: SIGTERM, then SIGKILL after ``KillWait``), as Slurm would;
* a victim still running with the same start time ``slack`` seconds after its grace ended is
  requeued by force.

Every decision and action is appended to the decision log (JSON lines, one object per
event, with the reason in words); ``dry_run`` records decisions and acts on nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch._private import make_private_dirs
from hpclaunch.backends.abilities import ArbiterView, ControlsJobs, arbiter_view_of, control_of
from hpclaunch.backends.base import Backend
from hpclaunch.config.paths import user_dir
from hpclaunch.config.site import SiteConfig
from hpclaunch.errors import BackendError, TransportError
from hpclaunch.scheduling.arbiter.decide import (
    Growth,
    InFlight,
    Preemption,
    Roles,
    SmallStart,
    Snapshot,
    decide,
    decide_growth,
    decide_small_start,
    roles_of,
    waits_for_gpus,
    waits_to_preempt,
)
from hpclaunch.scheduling.arbiter.las_pass import decide_las
from hpclaunch.scheduling.arbiter.progress import JobProgress, job_dir_of, read_progress
from hpclaunch.scheduling.las import QUANTUM
from hpclaunch.scheduling.victims import MIN_RUN
from hpclaunch.slurm.nodecount import node_count_update
from hpclaunch.supervise.ledger import parse_ledger
from hpclaunch.supervise.resize import write_request

__all__ = ["Arbiter", "ArbiterOptions", "default_log_path", "describe", "read_log"]


@dataclass(frozen=True)
class ArbiterOptions:
    """How the arbiter behaves.

    Attributes:
        dry_run: Record decisions, act on nothing.
        min_run: Seconds a job preempted before runs again before it may be chosen again.
        max_preemptions: Jobs preempted this often already are never chosen again
            (``None``: no cap by count).
        restart_cost: Seconds a victim's restart costs (loading, warm-up), in every cost.
        slack: Seconds after a victim's grace before it is requeued by force.
        signal: The signal that asks a sidecar to checkpoint (it handles USR1 and USR2).
        policy: ``slurm-order``: Slurm orders the queue, the arbiter preempts across
            tiers, shrinks before evicting, grows into idle GPUs and starts elastic jobs
            small; ``las``: besides the preemption across tiers, each pass applies the
            simulator's least-attained-service plan (:mod:`.las_pass`).
        service_quantum: ``las``: GPU-seconds of service of the first level
            (:func:`hpclaunch.scheduling.las.level`).
    """

    dry_run: bool = False
    min_run: float = MIN_RUN
    max_preemptions: int | None = None
    restart_cost: float = 30.0
    slack: float = 2.0
    signal: str = "USR1"
    policy: str = "slurm-order"
    service_quantum: float = QUANTUM


def default_log_path() -> Path:
    """``$XDG_STATE_HOME/hpclaunch/arbiter.jsonl`` (``~/.local/state``)."""

    return user_dir("state") / "arbiter.jsonl"


@dataclass
class Arbiter:
    """Applies the preemption policy on the live cluster (see the module docstring).

    Args:
        backend: How Slurm is asked and told (the arbiter needs operator rights to
            signal and requeue other users' jobs).
        site: The site config: who may preempt whom, and the grace times.
        log_path: The decision log.
        options: See :class:`ArbiterOptions`.
        clock: Epoch seconds (tests pass a fake).
        on_event: Called with every event as it is logged (the CLI prints it).
    """

    backend: Backend
    site: SiteConfig
    log_path: Path
    options: ArbiterOptions = field(default_factory=ArbiterOptions)
    clock: Callable[[], float] = time.time
    on_event: Callable[[dict[str, Any]], None] | None = None
    in_flight: dict[str, InFlight] = field(default_factory=dict)
    #: Victim -> preemptions this daemon made. A job without the sidecar has no ledger to
    #: say it was preempted before; Slurm's restart count (read when a decision is due)
    #: says so too, and survives a restart of the daemon, but counts a requeue only once
    #: Slurm has made it.
    preempted: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.roles: Roles = roles_of(self.site)
        # Refused here, before the first round, by a backend without a cluster (local).
        self.view: ArbiterView = arbiter_view_of(self.backend)
        self.control: ControlsJobs = control_of(self.backend)

    # -- one pass ---------------------------------------------------------------------

    def step(self) -> list[Preemption]:
        """One pass: follow the preemptions under way, then decide and act on new ones."""
        snapshot = self.snapshot()
        self._follow(snapshot)
        progress = self._progress(snapshot)
        chosen = decide(
            snapshot,
            self.roles,
            progress,
            list(self.in_flight.values()),
            min_run=self.options.min_run,
            max_preemptions=self.options.max_preemptions,
            restart_cost=self.options.restart_cost,
        )
        for preemption in chosen:
            self._act(preemption, snapshot.taken, progress)
        if not chosen and self.options.policy == "las":
            return self._las(snapshot, progress)
        if not chosen:
            in_flight = list(self.in_flight.values())
            growth = decide_growth(
                snapshot, progress, in_flight, restart_cost=self.options.restart_cost
            )
            if growth is not None:
                self._grow(growth, snapshot.taken, progress)
            small = decide_small_start(snapshot, self.roles, progress, in_flight)
            if small is not None:
                self._start_small(small)
        return chosen

    def _las(self, snapshot: Snapshot, progress: Mapping[str, JobProgress]) -> list[Preemption]:
        """The least-attained-service pass: plan, then evict, shrink, grow, start small."""
        decisions = decide_las(
            snapshot,
            self.roles,
            progress,
            list(self.in_flight.values()),
            min_run=self.options.min_run,
            max_preemptions=self.options.max_preemptions,
            restart_cost=self.options.restart_cost,
            quantum=self.options.service_quantum,
        )
        if not decisions:
            return []
        self.log(
            "las_plan",
            evict=[p.victim for p in decisions.preemptions if p.resize_to is None],
            shrink={p.victim: p.resize_to for p in decisions.preemptions if p.resize_to},
            grow={g.job_id: g.to_nodes for g in decisions.growths},
            start_small={s.job_id: s.to_nodes for s in decisions.small_starts},
            why="least attained service first; elastic jobs shrink before anyone waits "
            "and grow into idle GPUs by their measured speed-up",
        )
        for preemption in decisions.preemptions:
            self._act(preemption, snapshot.taken, progress)
        for growth in decisions.growths:
            self._grow(growth, snapshot.taken, progress)
        for small in decisions.small_starts:
            self._start_small(small)
        return decisions.preemptions

    def snapshot(self) -> Snapshot:
        """The cluster now: one squeue and one scontrol call (two RPCs with pyslurm)."""
        return Snapshot(
            jobs=tuple(self.view.cluster_jobs()),
            nodes=tuple(self.view.node_gpus()),
            taken=self.clock(),
        )

    def run(self, interval: float, *, should_stop: Callable[[], bool]) -> None:
        """Pass after pass, ``interval`` seconds apart, until ``should_stop()``."""
        while not should_stop():
            started = time.monotonic()
            try:
                self.step()
            except (BackendError, TransportError) as exc:  # Slurm busy or restarting: next pass
                self.log("pass_failed", why=exc.message)
            left = interval - (time.monotonic() - started)
            end = time.monotonic() + max(0.0, left)
            while not should_stop() and time.monotonic() < end:
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))

    # -- what each pass does ----------------------------------------------------------

    def _progress(self, snapshot: Snapshot) -> dict[str, JobProgress]:
        """What each running preemptible job has at stake; how often it was preempted is
        the most of its ledger's count, this daemon's and Slurm's restart count (any
        requeue: a job that has just restarted is protected for ``min_run`` all the same).
        Pending preemptible jobs that wait for GPUs too (their elastic sizes), and, for
        ``las``, those that wait out a requeue's delay (their service)."""
        las = self.options.policy == "las"
        jobs = [
            j
            for j in snapshot.jobs
            if j.qos in self.roles.preemptible
            and (
                (j.running and j.gpus_per_node)
                or waits_for_gpus(j)
                or (las and j.pending and j.reason == "BeginTime" and j.gpus_per_node)
            )
        ]
        running = any(j.running for j in jobs)
        restarts = self._restarts() if running and self._someone_waits(snapshot) else {}
        out = {}
        for job in jobs:
            prog = read_progress(job_dir_of(job.command, job.job_id), job.start)
            count = max(
                prog.preemptions,
                self.preempted.get(job.job_id, 0),
                restarts.get(job.job_id, 0) - prog.growths,  # a growth is a requeue too
            )
            out[job.job_id] = replace(prog, preemptions=count)
        return out

    def _someone_waits(self, snapshot: Snapshot) -> bool:
        """A job waits for GPUs it may take by preemption (a decision is due)."""
        return any(waits_to_preempt(j, self.roles) for j in snapshot.jobs)

    def _restarts(self) -> dict[str, int]:
        """Slurm's restart count per running job ({} if squeue fails: the pass goes on
        with the ledgers' and this daemon's counts)."""
        try:
            return self.view.restart_counts()
        except (BackendError, TransportError) as exc:
            self.log("restart_count_failed", why=str(exc))
            return {}

    def _act(self, p: Preemption, now: float, progress: Mapping[str, JobProgress]) -> None:
        directory = progress.get(p.victim, JobProgress()).directory
        if p.resize_to is not None and directory is None:
            p = replace(p, resize_to=None)  # nowhere to ask: evict it
        action = "checkpoint" if p.checkpoint_first else "requeue"
        if p.resize_to is not None:
            action = f"shrink to {p.resize_to} node(s)"
        self.log(
            "shrink" if p.resize_to is not None else "preempt",
            victim=p.victim,
            for_job=p.for_job,
            action=action,
            gpus=p.gpus,
            cost_gpu_s=round(p.cost, 1),
            since_commit=round(p.since_commit, 1),
            ckpt_write=round(p.ckpt_write, 3),
            preemptions=p.preemptions,
            grace=p.grace,
            why=p.why(),
        )
        deadline = now + (p.grace if p.checkpoint_first else 0.0)
        self.in_flight[p.victim] = InFlight(
            victim=p.victim,
            for_job=p.for_job,
            signalled_at=now,
            deadline=deadline,
            run_start=p.run_start,
            placement=p.placement,
        )
        if self.options.dry_run:
            return
        self.preempted[p.victim] = self.preempted.get(p.victim, 0) + 1
        if p.resize_to is not None and directory is not None:
            # The sidecar checkpoints, requeues it held, sets the size and releases it.
            write_request(
                Path(directory) / jobdir.CONTROL,
                p.resize_to,
                why=f"arbiter: room for job {p.for_job}",
                by="arbiter",
                force=True,
            )
        elif p.checkpoint_first:
            self._command(p.victim, signal=self.options.signal)
        else:
            self._command(p.victim)

    def _grow(self, g: Growth, now: float, progress: Mapping[str, JobProgress]) -> None:
        directory = progress[g.job_id].directory
        if directory is None:
            return
        self._log_size("grow", g)
        # Followed as a preemption is (for_job: itself): no other decision meanwhile.
        self.in_flight[g.job_id] = InFlight(
            victim=g.job_id,
            for_job=g.job_id,
            signalled_at=now,
            deadline=float("inf"),  # never requeued by force: it is not in anyone's way
            run_start=g.run_start,
            placement=g.placement,
        )
        if self.options.dry_run:
            return
        write_request(
            Path(directory) / jobdir.CONTROL,
            g.to_nodes,
            why="arbiter: grow into idle GPUs",
            by="arbiter",
            force=False,
        )

    def _start_small(self, small: SmallStart) -> None:
        """Give a pending elastic job the smaller size now (one ``scontrol update``); it
        starts when Slurm next schedules, and may grow later."""
        self._log_size("start_small", small)
        if self.options.dry_run:
            return
        try:
            fields = node_count_update(self.backend.runner, small.job_id, small.to_nodes)
            self.control.update_job(small.job_id, fields)
        except (BackendError, TransportError) as exc:  # it may have started meanwhile
            self.log("action_failed", victim=small.job_id, action="resize", why=exc.message)

    def _log_size(self, event: str, d: Growth | SmallStart) -> None:
        self.log(event, job=d.job_id, from_nodes=d.from_nodes, to_nodes=d.to_nodes, why=d.why())

    def _follow(self, snapshot: Snapshot) -> None:
        """Drop the victims that are gone; requeue by force those past their grace."""
        now = snapshot.taken
        for victim, flight in list(self.in_flight.items()):
            job = snapshot.job(victim)
            # A victim shows COMPLETING while its steps end (requeued: its next start shown
            # already): its GPUs are still held. Released then, the waiting job did not
            # fit and the next pass preempted a second victim (clean-clone run 43).
            stopping = job is not None and job.state == "COMPLETING"
            gone = not stopping and (
                job is None or not job.running or job.start != flight.run_start
            )
            if gone:
                del self.in_flight[victim]
                if not self.options.dry_run:
                    self.log(
                        "released",
                        victim=victim,
                        for_job=flight.for_job,
                        after=round(now - flight.signalled_at, 3),
                    )
                continue
            if self.options.dry_run:
                waiting = snapshot.job(flight.for_job)
                if waiting is None or not waiting.pending:
                    del self.in_flight[victim]  # the decision no longer applies
                continue
            if now >= flight.deadline + self.options.slack:
                self.log(
                    "forced_requeue",
                    victim=victim,
                    for_job=flight.for_job,
                    after=round(now - flight.signalled_at, 3),
                    why="still running after its grace time",
                )
                self._command(victim)
                # Once more at most: the next check comes after another grace period.
                self.in_flight[victim] = replace(flight, deadline=float("inf"))

    # -- plumbing ---------------------------------------------------------------------

    def _command(self, victim: str, *, signal: str | None = None) -> None:
        """Send ``signal`` to ``victim``'s batch step, or (none) requeue it; a refusal is
        logged, not raised (the victim may have ended meanwhile)."""
        try:
            if signal is not None:
                self.control.signal(victim, signal)
            else:
                self.control.requeue(victim)
        except (BackendError, TransportError) as exc:
            action = "requeue" if signal is None else f"signal {signal}"
            self.log("action_failed", victim=victim, action=action, why=exc.message)

    def log(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event to the decision log (and hand it to ``on_event``)."""
        record: dict[str, Any] = {"time": round(self.clock(), 3), "event": event}
        if self.options.dry_run:
            record["dry_run"] = True
        record.update(fields)
        make_private_dirs(self.log_path.parent)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)
        if self.on_event is not None:
            self.on_event(record)
        return record


def read_log(path: Path) -> list[dict[str, Any]]:
    """The decision log's events (torn lines skipped)."""

    try:
        return parse_ledger(path.read_text())
    except FileNotFoundError:
        return []


def describe(event: dict[str, Any]) -> str:
    """One line for an event of the decision log."""
    kind = event.get("event")
    prefix = "[dry run] " if event.get("dry_run") else ""
    if kind in ("preempt", "shrink"):
        return f"{prefix}{event['action']}: {event['why']}"
    if kind == "released":
        return f"released {event['victim']} after {event['after']} s (for {event['for_job']})"
    if kind == "grow":
        return f"{prefix}grow: {event['why']}"
    if kind == "start_small":
        return f"{prefix}start small: {event['why']}"
    if kind == "las_plan":
        moves = [
            *(f"evict {v}" for v in event.get("evict", [])),
            *(f"shrink {k} to {v}" for k, v in event.get("shrink", {}).items()),
            *(f"grow {k} to {v}" for k, v in event.get("grow", {}).items()),
            *(f"start {k} on {v}" for k, v in event.get("start_small", {}).items()),
        ]
        return f"{prefix}plan (least attained service): {', '.join(moves)} (node counts)"
    if kind == "forced_requeue":
        return f"requeued {event['victim']} by force: {event['why']}"
    rest = ", ".join(f"{k}={v}" for k, v in event.items() if k not in ("time", "event"))
    return f"{prefix}{kind}: {rest}"
