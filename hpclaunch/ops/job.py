"""A submitted job, from Python: its state, its end, its logs, cancelling it.

job = hpclaunch.submit("train.yaml")
final = job.wait()          # JobInfo: state, exit code, nodes, restarts
print(job.logs())           # every attempt's log, oldest first
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpclaunch.backends.base import JobRef
    from hpclaunch.observe import JobInfo, JobState
    from hpclaunch.ops.context import Context
    from hpclaunch.render import RenderedJob
    from hpclaunch.sweep.status import SweepStatus

__all__ = ["Job", "SweepRun"]


@dataclass
class Job:
    """One job of a :class:`~hpclaunch.ops.session.Session`.

    Attributes:
        ref: Slurm's job id (``.job_id``) and cluster.
        submission_id: hpclaunch's id of the submission (``--comment=hpclaunch:<id>``).
        log_dir: Where the job writes ``attempt-N.log`` (``None``: not known here).
        existing: The submission id already named this job: nothing was submitted.
        rendered: The batch script and sbatch argv, when this session submitted it.
    """

    session: Context = field(repr=False)
    ref: JobRef
    submission_id: str | None = None
    log_dir: str | None = None
    existing: bool = False
    rendered: RenderedJob | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        """Slurm's job id (``123``; ``123_4`` for an array task)."""
        return self.ref.job_id

    def status(self) -> JobInfo:
        """The job now: one look at Slurm's queue and, once it ended, its accounting."""
        return self.session.backend.status([self.ref])[self.ref]

    @property
    def state(self) -> JobState:
        """The job's state now (:meth:`status`'s)."""
        return self.status().state

    def done(self) -> bool:
        """Whether the job has ended (in any way)."""
        return self.state.is_finished

    def wait(self, timeout: float | None = None) -> JobInfo:
        """Block until the job ends (polling at the site's pace) and return its end.

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        from hpclaunch.observe import wait_for

        return wait_for(self.session.backend, [self.ref], timeout=timeout)[self.ref]

    def logs(self, attempt: int | None = None) -> str:
        """The job's output: every attempt's log in order, or attempt ``attempt`` (1, 2 ...)
        only; ``""`` before the job has written any."""
        from hpclaunch.logs import attempt_logs, attempt_of
        from hpclaunch.ops.context import remote_files

        if self.log_dir is None:
            return ""
        files = remote_files(self.session)
        texts = []
        for path in attempt_logs(self.log_dir, files):
            if attempt is None or attempt_of(path) == attempt:
                data = path.read_bytes() if files is None else files.read_bytes(str(path))
                texts.append(data.decode("utf-8", errors="replace"))
        return "".join(texts)

    def cancel(self) -> None:
        """Cancel the job (a job already ended is not an error)."""
        self.session.backend.cancel(self.ref)

    def tier(self, new_tier: str) -> None:
        """Move the pending job to ``new_tier`` (``hpclaunch tier``): its QOS and, on a site
        with quotas, its account and nice, decided again from the project's usage.

        Raises:
            PlanError: No such tier here, or the cluster does not allow it.
            BackendError: The job has started or ended, or Slurm refused.
        """
        from hpclaunch.ops.tier import apply_tier_move, plan_tier_move

        apply_tier_move(self.session, plan_tier_move(self.session, self.id, new_tier))


@dataclass
class SweepRun:
    """A submitted sweep of a :class:`~hpclaunch.ops.session.Session`: its arrays' jobs.

    Attributes:
        sweep_id: The id ``hpclaunch sweep`` prints (``hpclaunch sweep status ID``).
        arrays: The arrays' jobs, in point order.
        points: How many points (tasks) the sweep has.
    """

    session: Context = field(repr=False)
    sweep_id: str
    arrays: tuple[JobRef, ...]
    points: int

    def status(self, *, metrics: bool = True) -> SweepStatus:
        """Every task's state (and, ``metrics``, the final metrics of those that completed)."""
        from hpclaunch.sweep.record import find_sweep
        from hpclaunch.sweep.status import sweep_status

        return sweep_status(self.session.backend, find_sweep(self.sweep_id), metrics=metrics)

    def wait(self, timeout: float | None = None) -> SweepStatus:
        """Block until every task has ended; then :meth:`status`.

        Raises:
            WatchTimeout: ``timeout`` seconds passed first.
        """
        from hpclaunch.observe import wait_for

        wait_for(self.session.backend, list(self.arrays), timeout=timeout)
        return self.status()

    def cancel(self) -> None:
        """Cancel every task (finished ones keep their results)."""
        for ref in self.arrays:
            self.session.backend.cancel(ref)
