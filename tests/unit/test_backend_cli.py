"""CliBackend against a fake Slurm: sbatch parsing, batched squeue + sacct, scancel."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import SACCT_FIELDS, CliBackend, parse_sbatch_parsable
from hpclaunch.errors import BackendError, BackendUnavailable, CommandTimeout, SubmissionError
from hpclaunch.observe import JobState
from hpclaunch.plan import SubmissionPlan
from hpclaunch.render import RenderedJob, render
from hpclaunch.transport.base import CommandResult

from .conftest import make_site, make_spec
from .fakes import FakeJob, FakeRunner, FakeSlurm, result

PlanFor = Callable[..., SubmissionPlan]


def make(answer: Callable[[tuple[str, ...]], CommandResult]) -> tuple[CliBackend, FakeRunner]:
    runner = FakeRunner(answer)
    return CliBackend(runner, make_site()), runner


@pytest.fixture
def job(plan_for: PlanFor) -> RenderedJob:
    return render(plan_for(make_spec(name="hello")))


# -- submit -------------------------------------------------------------------------------


def test_submit_writes_the_script_then_runs_sbatch(job: RenderedJob) -> None:
    slurm = FakeSlurm()
    backend, runner = make(slurm)
    ref = backend.submit(job)
    assert ref == JobRef("1000")
    assert runner.files == {job.script_path: (job.script, 0o700)}
    assert runner.calls == [("sbatch", "--parsable", job.script_path)]


@pytest.mark.parametrize(
    ("stdout", "ref"),
    [
        ("123\n", JobRef("123")),
        ("123;hpclaunch\n", JobRef("123", "hpclaunch")),
        ("\n77_3\n", JobRef("77_3")),
    ],
)
def test_parse_sbatch_parsable(stdout: str, ref: JobRef) -> None:
    assert parse_sbatch_parsable(stdout) == ref


def test_sbatch_refusal_carries_slurms_words_and_a_hint(job: RenderedJob) -> None:
    err = (
        "sbatch: error: Batch job submission failed: "
        "Invalid account or account/partition combination specified\n"
    )
    backend, _ = make(lambda argv: result(argv, 1, err=err))
    with pytest.raises(SubmissionError) as info:
        backend.submit(job)
    assert "sbatch refused job 'hello'" in str(info.value)
    assert "Invalid account or account/partition combination" in str(info.value)
    assert "exit code: 1" in str(info.value)
    assert info.value.hint is not None
    assert "project" in info.value.hint
    assert info.value.result is not None


def test_sbatch_garbage_answer(job: RenderedJob) -> None:
    backend, _ = make(lambda argv: result(argv, 0, out="Submitted batch job 5\n"))
    with pytest.raises(SubmissionError, match="cannot read a job id"):
        backend.submit(job)


def test_sbatch_timeout_warns_against_resubmitting(job: RenderedJob) -> None:
    def hang(argv: tuple[str, ...]) -> CommandResult:
        raise CommandTimeout(argv, 60)

    backend, _ = make(hang)
    with pytest.raises(SubmissionError, match="may or may not have been submitted") as info:
        backend.submit(job)
    assert info.value.hint is not None
    assert f"hpclaunch:{job.plan.submission_id}" in info.value.hint


# -- status -------------------------------------------------------------------------------


def test_status_batches_one_squeue_and_one_sacct() -> None:
    slurm = FakeSlurm(
        jobs={
            "1": FakeJob("running one", ["RUNNING"]),
            "2": FakeJob("old|one", ["FAILED"], exit_code="3:0", in_squeue=False),
            "3": FakeJob("cancelled", ["CANCELLED by 0"], exit_code="0:15", in_squeue=False),
            "4": FakeJob("pending", ["PENDING"], reason="Resources", nodes=""),
        }
    )
    backend, runner = make(slurm)
    refs = [JobRef(i) for i in ("1", "2", "3", "4", "5")]
    infos = backend.status(refs)
    assert list(infos) == refs
    squeue, sacct = runner.calls_to("squeue"), runner.calls_to("sacct")
    assert len(squeue) == 1
    assert len(sacct) == 1
    assert "--jobs=1,2,3,4,5" in squeue[0]
    assert "--states=all" in squeue[0]
    assert "--jobs=2,3,5" in sacct[0]  # only what squeue did not know
    assert f"--format={','.join(SACCT_FIELDS)}" in sacct[0]

    assert (infos[refs[0]].state, infos[refs[0]].source, infos[refs[0]].name) == (
        JobState.RUNNING,
        "squeue",
        "running one",
    )
    assert infos[refs[0]].exit_code is None
    old = infos[refs[1]]
    assert (old.state, old.exit_code, old.source, old.name) == (
        JobState.FAILED,
        3,
        "sacct",
        "old|one",
    )
    cancelled = infos[refs[2]]
    assert (cancelled.state, cancelled.exit_code, cancelled.exit_signal) == (
        JobState.CANCELLED,
        0,
        15,
    )
    pending = infos[refs[3]]
    assert (pending.state, pending.reason, pending.nodes) == (JobState.PENDING, "Resources", None)
    unknown = infos[refs[4]]
    assert (unknown.state, unknown.reason, unknown.source) == (
        JobState.UNKNOWN,
        "unknown to squeue and sacct",
        "none",
    )


def test_squeue_finished_job_gets_its_exit_code_from_sacct() -> None:
    slurm = FakeSlurm(
        jobs={
            "7": FakeJob("done", ["COMPLETED"], exit_code="0:0"),
            "8": FakeJob("run", ["RUNNING"]),
        }
    )
    backend, runner = make(slurm)
    infos = backend.status([JobRef("7"), JobRef("8")])
    assert infos[JobRef("7")].exit_code == 0
    assert infos[JobRef("7")].source == "squeue"
    assert "--jobs=7" in runner.calls_to("sacct")[0]


def test_no_sacct_call_when_squeue_knows_every_running_job() -> None:
    slurm = FakeSlurm(jobs={"1": FakeJob("a", ["RUNNING"]), "2": FakeJob("b", ["PENDING"])})
    backend, runner = make(slurm)
    backend.status([JobRef("1"), JobRef("2")])
    assert [c[0] for c in runner.calls] == ["squeue"]


def test_all_ids_unknown_to_squeue() -> None:
    # squeue exits 1 with "Invalid job id specified" when no id is known (Slurm 22.05).
    slurm = FakeSlurm(jobs={"9": FakeJob("gone", ["COMPLETED"], in_squeue=False)})
    backend, runner = make(slurm)
    infos = backend.status([JobRef("9")])
    assert infos[JobRef("9")].state is JobState.COMPLETED
    assert [c[0] for c in runner.calls] == ["squeue", "sacct"]


def test_squeue_failure_is_backend_unavailable() -> None:
    backend, _ = make(
        lambda argv: result(
            argv,
            1,
            err="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
        )
    )
    with pytest.raises(BackendUnavailable, match="Unable to contact slurm controller"):
        backend.status([JobRef("1")])


def test_sacct_failure_leaves_unknown_jobs_unknown_with_the_reason() -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue":
            return result(argv, 1, err="slurm_load_jobs error: Invalid job id specified\n")
        return result(argv, 1, err="sacct: error: Slurm accounting storage is disabled\n")

    backend, _ = make(answer)
    info = backend.status([JobRef("1")])[JobRef("1")]
    assert info.state is JobState.UNKNOWN
    assert info.reason == "sacct failed: sacct: error: Slurm accounting storage is disabled"


def test_status_of_nothing_asks_nothing() -> None:
    backend, runner = make(lambda argv: pytest.fail("no call expected"))
    assert backend.status([]) == {}
    assert runner.calls == []


def test_duplicate_refs_are_asked_once() -> None:
    slurm = FakeSlurm(jobs={"1": FakeJob("a", ["RUNNING"])})
    backend, runner = make(slurm)
    infos = backend.status([JobRef("1"), JobRef("1")])
    assert list(infos) == [JobRef("1")]
    assert "--jobs=1" in runner.calls[0]


# -- cancel -------------------------------------------------------------------------------


def test_cancel_is_safe_to_repeat() -> None:
    slurm = FakeSlurm(jobs={"1": FakeJob("a", ["RUNNING"])})
    backend, runner = make(slurm)
    backend.cancel(JobRef("1"))
    backend.cancel(JobRef("1"))  # "already completing or completed": fine
    backend.cancel(JobRef("404"))  # forgotten after MinJobAge: "Invalid job id": fine
    assert runner.calls == [("scancel", "1"), ("scancel", "1"), ("scancel", "404")]


def test_cancel_other_failures_raise() -> None:
    backend, _ = make(
        lambda argv: result(argv, 1, err="scancel: error: Access/permission denied\n")
    )
    with pytest.raises(BackendError, match="permission denied"):
        backend.cancel(JobRef("1"))
