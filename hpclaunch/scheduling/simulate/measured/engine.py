"""The rounds: every ``interval`` seconds (60) the jobs advance, then the policy decides
who holds which GPUs for the next round, as the Pollux artifact runs its workloads. A job
that gets GPUs it did not hold (started, resumed, moved or resized) first spends
``restart`` seconds (30) without progress: loading its checkpoint and warming up. Jobs are
gang-scheduled: all their GPUs or none.

After each round, every job that trained in it measures its step time and gradient
statistics (:meth:`~.jobs.WorkJob.observe`), each off by a lognormal factor (``noise``,
5 %: step times of one job on one allocation vary so): the policies see only that.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpclaunch.scheduling.simulate.measured.jobs import RESTART, WorkJob

__all__ = ["Policy", "RoundsConfig", "simulate_rounds"]


@dataclass(frozen=True)
class RoundsConfig:
    """Cluster shape and round mechanics (the artifact's: 16 x 4 GPUs, 60 s, 30 s)."""

    nodes: int = 16
    gpus_per_node: int = 4
    interval: float = 60.0
    restart: float = RESTART
    horizon: float = 60 * 86400.0  # a guard against a policy that never finishes
    noise: float = 0.05  # the sigma of a measurement's lognormal error
    seed: int = 0  # of the measurement errors: runs repeat exactly


#: A policy: (now, the jobs arrived and not done in arrival order, config) -> the GPUs
#: each job holds next round (its node ids). Jobs absent hold none.
Policy = Callable[[float, list[WorkJob], RoundsConfig], dict[str, tuple[int, ...]]]


def simulate_rounds(
    jobs: Sequence[WorkJob], policy: Policy, config: RoundsConfig | None = None
) -> list[WorkJob]:
    """Run ``jobs`` (fresh ones: they keep their state) under ``policy`` to the end."""
    config = config or RoundsConfig()
    pending = sorted(jobs, key=lambda j: (j.submit, j.name))
    errors = random.Random(config.seed)
    now = 0.0
    while any(not j.done for j in pending):
        if now > config.horizon:
            raise RuntimeError(f"jobs still running after {config.horizon:.0f} s")
        for job in pending:
            job.advance(now, config.interval)
            if job.nodes and not job.done and job.delay == 0:
                job.observe(math.exp(errors.gauss(0.0, config.noise)))
        now += config.interval
        active = [j for j in pending if j.submit <= now and not j.done]
        for job in pending:
            if job.done:
                job.nodes = ()
        decided = policy(now, active, config)
        for job in active:
            nodes = decided.get(job.name, ())
            if nodes != job.nodes:
                if nodes and job.nodes and len(nodes) != len(job.nodes):
                    job.resized_at = now
                job.nodes = nodes
                if nodes:
                    job.delay = config.restart
                    job.restarts += 1
                    if job.started < 0:
                        job.started = now
    return list(pending)
