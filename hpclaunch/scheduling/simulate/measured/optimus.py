"""Optimus (Peng et al., EuroSys'18) as the Pollux artifact ran it, with its oracle: a
reference run that checks our elastic path (sizes changing every round, restarts,
placement) against the artifact's published Optimus + Oracle results.

Each round every job gets one GPU, in arrival order, while GPUs remain; then the GPUs left
go one at a time to the job whose run time left shrinks most with one more (its true step
time at ``n`` and ``n + 1`` GPUs, its batch fixed, times the steps it has left: the
oracle), up to its largest size. A job keeps its GPUs where its size did not change; the
others are placed on the nodes with the most free GPUs (:func:`.allocate.place`).
Written from the paper's description and the artifact's behaviour, read, not copied.
"""

from __future__ import annotations

from hpclaunch.scheduling.simulate.measured.allocate import place
from hpclaunch.scheduling.simulate.measured.engine import RoundsConfig
from hpclaunch.scheduling.simulate.measured.jobs import WorkJob

__all__ = ["Optimus"]


class Optimus:
    """The policy (see the module docstring); its jobs must be elastic and run with the
    oracle (``optimus-oracle`` in :data:`~.published.RUNS`)."""

    def __call__(
        self, now: float, jobs: list[WorkJob], config: RoundsConfig
    ) -> dict[str, tuple[int, ...]]:
        free = config.nodes * config.gpus_per_node
        self._left: dict[tuple[str, int], float] = {}  # this round's run times left
        sizes: dict[str, int] = {}
        gain: dict[str, float] = {}
        for job in jobs:
            if free < 1:
                break
            sizes[job.name], free = 1, free - 1
            gain[job.name] = self._gain(job, 1, free)
        by_name = {job.name: job for job in jobs}
        while free > 0 and gain and max(gain.values()) > 0:
            name = max(gain, key=lambda k: gain[k])
            sizes[name] += 1
            free -= 1
            gain[name] = self._gain(by_name[name], sizes[name], free)
        return place([j for j in jobs if j.name in sizes], config, sizes)

    def _gain(self, job: WorkJob, gpus: int, free: int) -> float:
        """Seconds of run time one more GPU saves (0 where it may not take one)."""
        most = job.elastic.max_gpus if job.elastic else job.gpus
        if gpus + 1 > most or free < 1:
            return 0.0
        return self._run_left(job, gpus) - self._run_left(job, gpus + 1)

    def _run_left(self, job: WorkJob, gpus: int) -> float:
        key = (job.name, gpus)
        if key not in self._left:
            self._left[key] = job.remaining_seconds(gpus, restart=0.0)
        return self._left[key]
