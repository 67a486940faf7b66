"""The pyslurm backend's option mapping: every option a plan sets, the sweep's command-line
options over the script's, and a clear refusal for options it cannot pass (no pyslurm
needed: these are pure functions; the cluster tests submit through pyslurm for real)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hpclaunch.backends.jobdesc import describe_job, merged_options
from hpclaunch.errors import PlanError
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import render
from tests.unit.conftest import make_spec

PlanFor = Callable[..., SubmissionPlan]


def test_every_option_of_a_gpu_job_with_requeue_maps(plan_for: PlanFor) -> None:
    spec = make_spec(
        name="gpu job",
        launcher="torchrun",
        tier="low",
        resources={"nodes": 2, "gpus_per_node": 2, "time": "45:00", "mem": "3G"},
        checkpoint={"signal": "USR1", "signal_lead_time": 60},
        sbatch_extra={"--begin": "now+1minute", "--mail-type": "END"},
    )
    plan = plan_for(spec)
    job = render(plan)
    options, args = merged_options(plan.sbatch_options, job.sbatch_argv, plan.script_path)
    attrs = describe_job(options, args).attributes
    # One attribute for each option the plan set: nothing dropped on the way.
    assert [o for o in options if o[0] != "--parsable"] == list(plan.sbatch_options)
    assert attrs["name"] == "gpu job"
    assert attrs["comment"] == f"hpclaunch:{plan.submission_id}"
    assert attrs["qos"] == plan.option("--qos")
    assert attrs["nodes"] == "2"
    assert attrs["ntasks_per_node"] == 1
    assert attrs["ntasks"] == 2  # as sbatch derives it (pyslurm would say 1)
    assert attrs["time_limit"] == 45
    assert attrs["memory_per_node"] == "3G"
    assert attrs["log_files_open_mode"] == "append"
    assert attrs["is_requeueable"] is True
    assert plan.option("--signal") == "B:USR1@60"
    assert attrs["signal"] == {
        "signal": 10,
        "time": 60,
        "batch_only": True,
        "allow_reservation_overlap": False,
    }
    assert attrs["begin_time"] == "now+1minute"
    assert attrs["mail_types"] == "END"
    assert attrs["working_directory"] == plan.workdir
    assert attrs["standard_output"].endswith("/slurm-%j.out")  # type: ignore[union-attr]
    gpu = plan.option("--gres") if any(f == "--gres" for f, _ in options) else None
    assert attrs["gres_per_node"] == (gpu or f"gpu:{plan.option('--gpus-per-node')}")


def test_the_variables_sbatch_sets_from_its_options_go_in_the_jobs_environment() -> None:
    """sbatch exports SLURM_CPUS_PER_TASK, SLURM_NTASKS_PER_NODE, ... from its options and
    slurmd does not add them (seen on the test cluster: a pyslurm job had neither)."""
    options = [
        ("--nodes", "2"),
        ("--ntasks-per-node", "1"),
        ("--cpus-per-task", "4"),
        ("--dependency", "afterok:12"),
    ]
    env = describe_job(options).environment
    assert env == {
        "SLURM_CPUS_PER_TASK": "4",
        "SLURM_TRES_PER_TASK": "cpu=4",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_JOB_DEPENDENCY": "afterok:12",
    }  # no SLURM_NTASKS: sbatch sets it only for --ntasks (slurmd sets it from the job)
    env = describe_job([("--ntasks", "3"), ("--cpus-per-gpu", "2")]).environment
    assert env == {"SLURM_NTASKS": "3", "SLURM_NPROCS": "3"}


@pytest.mark.parametrize(
    ("time", "minutes"), [("30", 30), ("0:30", 1), ("30:01", 31), ("1-0", 1440)]
)
def test_time_limits_are_whole_minutes_rounded_up(time: str, minutes: int) -> None:
    assert describe_job([("--time", time)]).attributes["time_limit"] == minutes


def test_the_command_line_wins_and_the_script_args_follow() -> None:
    script = [("--comment", "hpclaunch:sweep"), ("--dependency", "afterok:1")]
    argv = [
        "sbatch",
        "--parsable",
        "--array=0-9%2",
        "--comment=hpclaunch:sweep-a0",
        "--dependency=afterok:1,afterany:7",
        "/jobs/x/job.sbatch",
        "20",
    ]
    options, args = merged_options(script, argv, "/jobs/x/job.sbatch")
    described = describe_job(options, args)
    assert described.attributes == {
        "comment": "hpclaunch:sweep-a0",
        "dependencies": "afterok:1,afterany:7",
        "array": "0-9%2",
    }
    assert described.script_args == ("20",)


def test_signals_by_name_or_number_and_pipelines_kill_on_invalid_dep() -> None:
    attrs = describe_job([("--signal", "SIGTERM"), ("--kill-on-invalid-dep", "yes")]).attributes
    assert attrs["signal"] == {
        "signal": 15,
        "time": 60,
        "batch_only": False,
        "allow_reservation_overlap": False,
    }
    assert attrs["kill_on_invalid_dependency"] is True
    assert describe_job([("--signal", "R:12@30")]).attributes["signal"] == {
        "signal": 12,
        "time": 30,
        "batch_only": False,
        "allow_reservation_overlap": True,
    }


def test_short_spellings_and_flags() -> None:
    attrs = describe_job([("-p", "gpu"), ("--exclusive", None), ("--no-requeue", None)]).attributes
    assert attrs == {"partitions": "gpu", "resource_sharing": "no", "is_requeueable": False}


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ([("--propagate", "STACK")], "--propagate: pyslurm's JobSubmitDescription has no"),
        ([("--nice", "ten")], "'ten' is not a whole number"),
        ([("--signal", "B:NOPE@5")], "'B:NOPE@5' is not"),
        ([("--kill-on-invalid-dep", "maybe")], "'maybe' is not yes or no"),
        ([("--time", "soon")], "'soon' is not a Slurm time"),
        ([("--qos", None)], "--qos: it needs a value"),
    ],
)
def test_what_cannot_be_passed_is_refused_never_dropped(
    options: list[tuple[str, str | None]], said: str
) -> None:
    with pytest.raises(PlanError, match=said) as info:
        describe_job(options)
    assert info.value.hint is not None
    assert "--backend cli" in info.value.hint


def test_an_argv_of_another_script_is_an_error() -> None:
    with pytest.raises(ValueError, match="not an sbatch command"):
        merged_options([], ["sbatch", "/other.sbatch"], "/jobs/x/job.sbatch")
