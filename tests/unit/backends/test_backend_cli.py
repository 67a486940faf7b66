"""CliBackend against a fake Slurm: sbatch parsing, batched squeue + sacct, scancel."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import SACCT_FIELDS, CliBackend, parse_sbatch_parsable
from hpclaunch.errors import (
    BackendError,
    BackendUnavailable,
    CommandTimeout,
    ProgramNotFound,
    SubmissionError,
)
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import RenderedJob, render
from hpclaunch.slurm.jobs import JobState
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import make_site, make_spec
from tests.unit.fakes import FakeJob, FakeRunner, FakeSlurm, result

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


def test_sbatch_timeout_and_slurm_unreachable_says_retry_with_the_id(job: RenderedJob) -> None:
    def hang(argv: tuple[str, ...]) -> CommandResult:
        raise CommandTimeout(argv, 60)

    backend, runner = make(hang)
    with pytest.raises(SubmissionError, match="may or may not have been submitted") as info:
        backend.submit(job)
    assert "looking for it failed too: command timed out" in str(info.value)
    assert info.value.hint is not None
    assert f"--submission-id {job.plan.submission_id}" in info.value.hint
    assert [c[0] for c in runner.calls] == ["sbatch", "squeue"]


class LostReply:
    """A FakeSlurm whose sbatch creates the job, then its reply is lost."""

    def __init__(self, slurm: FakeSlurm, how: str = "timeout") -> None:
        self.slurm, self.how = slurm, how

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        answer = self.slurm(argv)
        if argv[0] != "sbatch":
            return answer
        if self.how == "timeout":
            raise CommandTimeout(argv, 60)
        return result(argv, 1, err=f"sbatch: error: Batch job submission failed: {self.how}\n")


@pytest.mark.parametrize(
    "how",
    [
        "timeout",
        "Socket timed out on send/recv operation",
        "Zero Bytes were transmitted or received",
    ],
)
def test_sbatch_reply_lost_after_the_job_was_created_returns_that_job(
    job: RenderedJob, how: str
) -> None:
    slurm = FakeSlurm(jobs={"7": FakeJob("other", ["RUNNING"], comment="hpclaunch:someone-else")})
    backend, runner = make(LostReply(slurm, how))
    ref = backend.submit(job)
    assert ref == JobRef("1000")
    assert len(slurm.submitted) == 1  # never a second sbatch
    assert runner.calls[1] == ("squeue", "--me", "--noheader", "--states=all", "--format=%i|%k")


def test_lost_reply_found_through_sacct_when_squeue_forgot_the_job(job: RenderedJob) -> None:
    slurm = FakeSlurm()
    backend, runner = make(LostReply(slurm))
    slurm.new_job_states = ["COMPLETED"]
    original = slurm._sbatch

    def sbatch_then_forget(argv: tuple[str, ...]) -> CommandResult:
        answer = original(argv)
        slurm.jobs["1000"].in_squeue = False  # MinJobAge passed; the comment is not in sacct
        return answer

    slurm._sbatch = sbatch_then_forget  # type: ignore[method-assign]
    assert backend.submit(job) == JobRef("1000")
    sacct = runner.calls_to("sacct")
    assert len(sacct) == 1
    assert "--format=JobID,Comment,SubmitLine" in sacct[0]
    assert len(slurm.submitted) == 1


def test_lost_reply_and_no_such_job_means_not_submitted(job: RenderedJob) -> None:
    slurm = FakeSlurm(jobs={"7": FakeJob("other", ["RUNNING"], comment="hpclaunch:x")})

    def hang(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "sbatch":
            raise CommandTimeout(argv, 60)
        return slurm(argv)

    backend, _ = make(hang)
    with pytest.raises(SubmissionError, match="so it was not submitted") as info:
        backend.submit(job)
    assert info.value.hint is not None
    assert f"--submission-id {job.plan.submission_id}" in info.value.hint


def test_find_submission_matches_the_exact_tag() -> None:
    slurm = FakeSlurm(
        jobs={
            "1": FakeJob("a", ["RUNNING"], comment="hpclaunch:abc-2"),
            "2": FakeJob("b", ["COMPLETED"], comment="hpclaunch:abc"),
        }
    )
    backend, _ = make(slurm)
    assert backend.find_submission("abc") == JobRef("2")
    assert backend.find_submission("ab") is None


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
        "unknown to Slurm's queue and accounting",
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


def test_a_completed_job_sacct_does_not_know_yet_has_exit_code_zero() -> None:
    # squeue lists it COMPLETED, slurmdbd has not recorded it yet (seen on the cluster, CI
    # 2026-11-24): COMPLETED means exit code 0.
    from hpclaunch.backends.merge import _completed_exit
    from hpclaunch.slurm.jobs import JobInfo

    done = JobInfo(JobRef("7"), JobState.COMPLETED, source="squeue")
    assert _completed_exit(done).exit_code == 0
    failed = JobInfo(JobRef("8"), JobState.FAILED, source="squeue")
    assert _completed_exit(failed).exit_code is None  # unknown until sacct has it


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
    assert info.reason == "accounting unavailable: sacct: Slurm accounting storage is disabled"


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


# -- columns for the status table -----------------------------------------------------------


def test_status_reads_qos_gpus_nodes_and_restarts_in_the_same_single_calls() -> None:
    slurm = FakeSlurm(
        jobs={
            "1": FakeJob(
                "two nodes",
                ["RUNNING"],
                nodes="n[1-2]",
                qos="low",
                tres="cpu=2,mem=200M,node=2,billing=2,gres/gpu=2,gres/gpu:a100=2",
                restarts=2,
            ),
            "2": FakeJob(
                "requeued then done",
                ["COMPLETED"],
                in_squeue=False,
                qos="high",
                tres="cpu=1,gres/gpu=4,node=1",
                attempts=["PREEMPTED", "REQUEUED"],
            ),
        }
    )
    backend, runner = make(slurm)
    infos = backend.status([JobRef("1"), JobRef("2")])
    assert [c[0] for c in runner.calls] == ["squeue", "sacct"]
    assert "--duplicates" in runner.calls[1]
    running, done = infos[JobRef("1")], infos[JobRef("2")]
    assert (running.qos, running.gpus, running.nodes, running.restarts) == ("low", 2, "n[1-2]", 2)
    assert (done.qos, done.gpus, done.restarts, done.state) == ("high", 4, 2, JobState.COMPLETED)


def test_squeue_format_is_the_long_form_with_the_name_last() -> None:
    from hpclaunch.backends.slurm_text import SQUEUE_FORMAT

    assert SQUEUE_FORMAT.startswith("JobArrayID:0|,State:0|,")
    assert "RestartCnt:0|" in SQUEUE_FORMAT
    assert SQUEUE_FORMAT.endswith(",Name:0")


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("cpu=1,mem=100M,node=1,billing=1", 0),
        ("billing=2,cpu=2,gres/gpu=2,mem=200M,node=2", 2),
        ("cpu=1,gres/gpu:a100=3,gres/gpu=3", 3),
        ("", None),
        ("N/A", None),
    ],
)
def test_gpus_in_tres(tres: str, gpus: int | None) -> None:
    from hpclaunch.backends.slurm_text import gpus_in

    assert gpus_in(tres, "gpu") == gpus


# -- find by name, attempts, missing commands ------------------------------------------------


def test_find_jobs_matches_names_exactly_as_squeue_prints_them() -> None:
    slurm = FakeSlurm(
        jobs={
            "1": FakeJob('we"ird|na,me', ["RUNNING"]),
            "2": FakeJob("we", ["PENDING"]),
            "3": FakeJob('we"ird|na,me', ["COMPLETED"]),
        }
    )
    backend, runner = make(slurm)
    found = backend.find_jobs('we"ird|na,me')
    assert [(i.ref.job_id, i.state) for i in found] == [("1", JobState.RUNNING)]
    assert runner.calls == [("squeue", "--me", "--noheader", "--format=%i|%T|%j")]


def test_attempts_one_per_sacct_record_oldest_first() -> None:
    use = "|00:10:00|2|00:01.500|cpu=2,mem=200M,node=1,gres/gpu=1|"
    out = (
        "26|PREEMPTED|0:15|2026-11-22T06:21:25|2026-11-22T06:21:25|2026-11-22T06:21:26|"
        f"00:00:01|n1|None{use}\n"
        "26.batch|CANCELLED|0:15|x|x|x|x|n1||||00:01.500||cpu=00:00:01,mem=2508K,pages=0\n"
        "26.0|CANCELLED|0:15|x|x|x|x|n1||||||cpu=00:00:01,mem=1.50M\n"
        "26|RUNNING|0:0|2026-11-22T06:21:26|2026-11-22T06:21:38|Unknown|00:00:03|n2|None"
        "|UNLIMITED|2|00:00:00||\n"
    )
    backend, runner = make(lambda argv: result(argv, out=out))
    first, second = backend.attempts(JobRef("26"))
    # Its limit, CPUs, CPU time and allocation; the steps' biggest memory (the batch's).
    assert (first.time_limit, first.cpus, first.cpu_seconds, first.mem_peak) == (
        600,
        2,
        1.5,
        2508 * 1024,
    )
    assert first.tres == "cpu=2,mem=200M,node=1,gres/gpu=1"
    assert (second.time_limit, second.mem_peak, second.tres) == (None, None, None)
    assert (first.index, first.state, first.exit_code, first.exit_signal) == (
        0,
        JobState.PREEMPTED,
        0,
        15,
    )
    assert (second.index, second.state, second.exit_code, second.end) == (
        1,
        JobState.RUNNING,
        None,
        None,
    )
    assert "--duplicates" in runner.calls[0]


def test_a_missing_slurm_command_names_it_and_says_where_to_run() -> None:
    def missing(argv: tuple[str, ...]) -> CommandResult:
        raise ProgramNotFound(argv[0])

    backend, _ = make(missing)
    with pytest.raises(BackendUnavailable, match="Slurm's 'squeue' command is not found") as info:
        backend.status([JobRef("1")])
    assert info.value.hint is not None
    assert "login node" in info.value.hint
    assert "--site" in info.value.hint


def test_exit_code_from_squeue_while_sacct_has_no_record_yet() -> None:
    """Right after a job ends, slurmdbd may not have its record: squeue's raw wait status
    (768 = exit 3) still gives the exit code, so a FAILED job never shows no code."""
    slurm = FakeSlurm(
        jobs={
            "5": FakeJob("lagging", ["FAILED"], exit_code="3:0", in_sacct=False),
            "6": FakeJob("killed", ["CANCELLED"], exit_code="0:9", in_sacct=False),
            "7": FakeJob("running", ["RUNNING"], exit_code="0:0", in_sacct=False),
        }
    )
    backend, _ = make(slurm)
    infos = backend.status([JobRef("5"), JobRef("6"), JobRef("7")])
    assert (infos[JobRef("5")].state, infos[JobRef("5")].exit_code) == (JobState.FAILED, 3)
    assert (infos[JobRef("6")].exit_code, infos[JobRef("6")].exit_signal) == (0, 9)
    assert infos[JobRef("7")].exit_code is None  # not finished: no exit code yet


# -- job arrays: one summary for "status <array id>" ----------------------------------------
# Recorded on the local Slurm 22.05 cluster with the backend's exact squeue/sacct formats:
#   sbatch --array=0-4%2 -A research --qos=normal --wrap 'sleep 2; exit $((SLURM_ARRAY_TASK_ID==3))'
_TRES = "cpu=1,mem=100M,node=1,billing=1"
_ACCT_TRES = "billing=1,cpu=1,mem=100M,node=1|billing=1,cpu=1,mem=100M,node=1"
# Two tasks done, two running, one pending (the %2 limit).
SQUEUE_MID = (
    f"4493_1|COMPLETED|None|n1|0:02|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_0|COMPLETED|None|n1|0:02|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_4|PENDING|JobArrayTaskLimit||0:00|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_3|RUNNING|None|n1|0:01|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_2|RUNNING|None|n1|0:01|normal|1|{_TRES}|0|0|N/A|wrap\n"
)
# sacct at the same moment folds the tasks that have not started yet into one line.
SACCT_MID = (
    f"4493_0|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_1|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    "4493_[2-4%2]|PENDING|0:0|00:00:00|None assigned|JobArrayTaskLimit|normal|1||"
    "billing=1,cpu=1,mem=100M,node=1|wrap\n"
)
# A little later: squeue knows task 3 FAILED (wait status 256 = exit 1); sacct lags and
# has no line yet for tasks 2 and 3.
SQUEUE_LAG = (
    f"4493_2|COMPLETED|None|n1|0:02|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_1|COMPLETED|None|n1|0:02|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_0|COMPLETED|None|n1|0:02|normal|1|{_TRES}|0|0|N/A|wrap\n"
    f"4493_3|FAILED|NonZeroExitCode|n1|0:02|normal|1|{_TRES}|0|256|N/A|wrap\n"
    f"4493_4|RUNNING|None|n1|0:00|normal|1|{_TRES}|0|0|N/A|wrap\n"
)
SACCT_LAG = (
    f"4493_0|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_1|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_4|RUNNING|0:0|00:00:00|n1|JobArrayTaskLimit|normal|1|{_ACCT_TRES}|wrap\n"
)
# After the end.
SACCT_END = (
    f"4493_0|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_1|COMPLETED|0:0|00:00:02|n1|None|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_2|COMPLETED|0:0|00:00:02|n1|JobArrayTaskLimit|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_3|FAILED|1:0|00:00:02|n1|JobArrayTaskLimit|normal|1|{_ACCT_TRES}|wrap\n"
    f"4493_4|COMPLETED|0:0|00:00:02|n1|JobArrayTaskLimit|normal|1|{_ACCT_TRES}|wrap\n"
)
_FORGOTTEN = "slurm_load_jobs error: Invalid job id specified\n"


def recorded(squeue: str | None, sacct: str) -> Callable[[tuple[str, ...]], CommandResult]:
    """Answers squeue and sacct with recorded lines (``squeue=None``: it forgot them all)."""

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue":
            return result(argv, 1, err=_FORGOTTEN) if squeue is None else result(argv, out=squeue)
        assert argv[0] == "sacct"
        return result(argv, out=sacct)

    return answer


def test_array_id_is_summed_up_from_its_tasks_in_one_squeue_and_one_sacct() -> None:
    backend, runner = make(recorded(SQUEUE_MID, SACCT_MID))
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert [c[0] for c in runner.calls] == ["squeue", "sacct"]
    assert "--array" in runner.calls[0]
    assert "--jobs=4493" in runner.calls[1]
    assert info.state is JobState.RUNNING
    assert info.reason == "array: 2 running, 1 pending, 2 completed"
    assert (info.node_count, info.gpus, info.restarts) == (2, 0, 0)
    assert (info.exit_code, info.elapsed, info.name, info.qos) == (None, None, "wrap", "normal")


def test_array_tasks_are_merged_per_task_when_sacct_lags_behind_squeue() -> None:
    backend, _ = make(recorded(SQUEUE_LAG, SACCT_LAG))
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert info.state is JobState.RUNNING
    assert info.reason == "array: 1 running, 3 completed, 1 failed"
    assert (info.node_count, info.exit_code) == (1, 1)  # task 3's code, from squeue


def test_finished_array_with_a_failed_task_is_failed_with_its_exit_code() -> None:
    backend, _ = make(
        recorded(SQUEUE_LAG.replace("RUNNING|None|n1|0:00", "COMPLETED|None|n1|0:02"), SACCT_END)
    )
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert (info.state, info.exit_code, info.node_count, info.gpus) == (
        JobState.FAILED,
        1,
        None,
        0,  # one task's: these asked for none
    )
    assert info.reason == "array: 4 completed, 1 failed"
    assert info.state.is_finished


def test_array_tasks_squeue_forgot_come_from_sacct() -> None:
    # After MinJobAge squeue knows none of the tasks (exit 1), or only the later ones.
    backend, _ = make(recorded(None, SACCT_END))
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert (info.state, info.reason, info.source) == (
        JobState.FAILED,
        "array: 4 completed, 1 failed",
        "sacct",
    )
    later = "".join(line + "\n" for line in SQUEUE_LAG.splitlines() if "4493_4" in line)
    backend, _ = make(recorded(later, SACCT_END))
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert (info.state, info.reason) == (
        JobState.RUNNING,
        "array: 1 running, 3 completed, 1 failed",
    )


# Slurm 22.05's slurmdbd, a moment after a 2-task array's tasks started (recorded on the
# test cluster, 2026-11-29): a record of the task whose raw id is the array's, without its
# task id ("17", QOS Unknown, name "allocation"), before the tasks' own records.
SACCT_PARTIAL_2205 = (
    "17|FAILED|78:0|00:00:00|n1|None|Unknown|1|billing=1,cpu=1,mem=50M,node=1||allocation\n"
    "17.batch|FAILED|78:0|00:00:00|n1|||1|cpu=1,mem=50M,node=1||batch\n"
)
# squeue at that moment, as in the clean-clone CI run it failed: task 0 ended, task 1 runs.
SQUEUE_ONE_RUNNING = (
    "17_1|RUNNING|None|n1|0:00|low|1|cpu=1,mem=50M,node=1,billing=1|0|0|2026-11-29T12:44:23|rp\n"
    "17_0|COMPLETED|None|n1|0:00|low|1|cpu=1,mem=50M,node=1,billing=1|0|0|2026-11-29T12:44:23|rp\n"
)


def test_an_arrays_bare_id_in_accounting_is_not_the_array() -> None:
    # Taken for the array, that record ended a sweep's --wait with a task still RUNNING.
    backend, _ = make(recorded(SQUEUE_ONE_RUNNING, SACCT_PARTIAL_2205))
    info = backend.status([JobRef("17")])[JobRef("17")]
    assert (info.state, info.reason) == (JobState.RUNNING, "array: 1 running, 1 completed")
    assert not info.state.is_finished
    # squeue forgot the tasks: accounting's task lines still win over the bare record.
    tasks = f"17_0|COMPLETED|0:0|00:00:02|n1|None|low|1|{_ACCT_TRES}|rp\n"
    backend, _ = make(recorded(None, SACCT_PARTIAL_2205 + tasks))
    info = backend.status([JobRef("17")])[JobRef("17")]
    assert (info.state, info.reason) == (JobState.COMPLETED, "array: 1 completed")


def test_a_task_id_is_answered_as_before_and_beside_its_array() -> None:
    backend, runner = make(recorded(SQUEUE_LAG, SACCT_LAG))
    infos = backend.status([JobRef("4493_3"), JobRef("4493_4"), JobRef("4493")])
    failed, running = infos[JobRef("4493_3")], infos[JobRef("4493_4")]
    assert (failed.state, failed.exit_code, failed.source, failed.reason) == (
        JobState.FAILED,
        1,
        "squeue",
        "NonZeroExitCode",
    )
    assert (running.state, running.elapsed, running.source) == (JobState.RUNNING, "0:00", "squeue")
    assert infos[JobRef("4493")].reason == "array: 1 running, 3 completed, 1 failed"
    assert [c[0] for c in runner.calls] == ["squeue", "sacct"]


def test_a_pending_task_only_sacct_knows_is_read_from_its_folded_line() -> None:
    backend, _ = make(recorded(None, SACCT_MID))
    infos = backend.status([JobRef("4493"), JobRef("4493_3")])
    assert infos[JobRef("4493_3")].state is JobState.PENDING
    assert infos[JobRef("4493")].reason == "array: 3 pending, 2 completed"


def test_array_summary_without_sacct_says_why() -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue":
            return result(argv, out=SQUEUE_MID)
        return result(argv, 1, err="sacct: error: Slurm accounting storage is disabled\n")

    backend, _ = make(answer)
    info = backend.status([JobRef("4493")])[JobRef("4493")]
    assert info.state is JobState.RUNNING
    assert info.reason == (
        "array: 2 running, 1 pending, 2 completed "
        "(accounting unavailable: sacct: Slurm accounting storage is disabled)"
    )


@pytest.mark.parametrize(
    ("states", "summary", "exit_code"),
    [
        (["COMPLETED", "COMPLETED"], JobState.COMPLETED, 0),
        (["COMPLETED", "CANCELLED", "TIMEOUT"], JobState.TIMEOUT, None),
        (["CANCELLED", "FAILED", "TIMEOUT"], JobState.FAILED, 2),
        (["COMPLETED", "REQUEUED"], JobState.PENDING, None),
        (["PREEMPTED", "COMPLETING"], JobState.RUNNING, None),
        # A task Slurm ended PREEMPTED and did not requeue (the map of run 22, pyslurm)
        (["COMPLETED", "PREEMPTED", "COMPLETED"], JobState.PREEMPTED, None),
    ],
)
def test_array_state_order(states: list[str], summary: JobState, exit_code: int | None) -> None:
    from hpclaunch.backends.arrays import summarise_array
    from hpclaunch.slurm.jobs import JobInfo, parse_state

    codes = {"FAILED": 2, "TIMEOUT": 0, "CANCELLED": 0, "COMPLETED": 0}
    tasks = [
        JobInfo(JobRef(f"9_{i}"), parse_state(s), exit_code=codes.get(s), restarts=1)
        for i, s in enumerate(states)
    ]
    info = summarise_array(JobRef("9"), tasks)
    assert (info.state, info.exit_code, info.restarts) == (summary, exit_code, len(states))


def test_an_array_that_runs_no_task_shows_the_gpus_of_one_task() -> None:
    """Issue 27: sweep rows in ``status`` showed GPUS 0 (the sum over running tasks) while
    their tasks waited or after they ended."""
    from hpclaunch.backends.arrays import summarise_array
    from hpclaunch.slurm.jobs import JobInfo

    def task(i: int, state: JobState) -> JobInfo:
        return JobInfo(JobRef(f"9_{i}"), state, gpus=2)

    done = summarise_array(JobRef("9"), [task(0, JobState.COMPLETED), task(1, JobState.FAILED)])
    assert done.gpus == 2
    waiting = summarise_array(JobRef("9"), [task(0, JobState.PENDING)])
    assert waiting.gpus == 2
    running = [task(0, JobState.RUNNING), task(1, JobState.RUNNING), task(2, JobState.PENDING)]
    assert summarise_array(JobRef("9"), running).gpus == 4
