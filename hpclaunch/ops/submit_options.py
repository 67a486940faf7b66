"""How a submission is made: one value through every submit path (a spec, a function's
call, a sweep, a map, a rerun), instead of the same keywords spelled at each of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["SubmitOptions"]

#: What the hook is given: a job's SubmissionPlan, or a sweep's SweepPlan.
PlanT = TypeVar("PlanT")


@dataclass(frozen=True)
class SubmitOptions(Generic[PlanT]):
    """The options of one submission (``hpclaunch submit``'s and ``sweep``'s flags).

    Attributes:
        overrides: ``KEY=VALUE`` changes (``--set``), validated as the file is.
        submission_id: Your own id (a job's submission id, a sweep's id): a submission
            that already carries it is taken (a sweep's missing arrays submitted), never
            doubled.
        check: Refuse before sbatch what the cluster would refuse, and missing paths.
        dry_run: Plan and render only.
        force: Take the job of ``submission_id`` even if it came from another spec.
        cwd: Where the job starts when the spec names no workdir (default: here; over
            SSH, the job directory); a ``--sync`` snapshot's directory.
        rerun_of: The job this one reruns (``hpclaunch rerun``): its submit directory is
            ``cwd``, where the paths are checked as at its own submission.
        before_submit: Called with the plan just before Slurm is asked (``--sync``
            uploads then; a function's call is written into the job directory).
    """

    overrides: Sequence[str] = ()
    submission_id: str | None = None
    check: bool = True
    dry_run: bool = False
    force: bool = False
    cwd: str | None = None
    rerun_of: str | None = None
    before_submit: Callable[[PlanT], object] | None = None

    def then(self, hook: Callable[[PlanT], object]) -> SubmitOptions[PlanT]:
        """These options, with ``hook`` called after :attr:`before_submit`."""
        first = self.before_submit

        def both(plan: PlanT) -> None:
            if first is not None:
                first(plan)
            hook(plan)

        return dataclasses.replace(self, before_submit=both)
