"""A connection dropped while sbatch ran: the backend finds the job instead of resubmitting."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import CliBackend
from hpclaunch.errors import ConnectionDropped, SubmissionError
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import render
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import make_site, make_spec
from tests.unit.fakes import FakeRunner, FakeSlurm

PlanFor = Callable[..., SubmissionPlan]


def dropping(slurm: FakeSlurm, *, created: bool) -> FakeRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "sbatch":
            if created:
                slurm(argv)  # the job exists on the cluster; its reply never arrives
            raise ConnectionDropped(argv, "me@login", detail="the SSH connection closed")
        return slurm(argv)

    return FakeRunner(answer)


def test_dropped_after_sbatch_returns_the_job_once(plan_for: PlanFor) -> None:
    slurm = FakeSlurm()
    runner = dropping(slurm, created=True)
    ref = CliBackend(runner, make_site()).submit(render(plan_for(make_spec(name="x"))))
    assert ref == JobRef("1000")
    assert len(slurm.submitted) == 1
    assert len(runner.calls_to("sbatch")) == 1  # looked up, never sent again


def test_dropped_before_the_job_existed_says_retry(plan_for: PlanFor) -> None:
    slurm = FakeSlurm()
    job = render(plan_for(make_spec(name="x")))
    with pytest.raises(SubmissionError, match="connection dropped while sbatch ran") as info:
        CliBackend(dropping(slurm, created=False), make_site()).submit(job)
    assert not slurm.submitted
    assert info.value.hint is not None
    assert job.plan.submission_id in info.value.hint
