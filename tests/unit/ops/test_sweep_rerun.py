"""Points that never ran (Slurm ended their tasks before the batch script started):
``sweep status`` names them, ``sweep rerun`` submits exactly those again, once."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from hpclaunch.backends.cli import CliBackend
from hpclaunch.backends.jobdesc import script_options
from hpclaunch.config.site import load_site
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.ops.context import Context
from hpclaunch.ops.sweep_rerun import rerun_sweep
from hpclaunch.ops.sweep_status import sweep_status
from hpclaunch.planning.render import render
from hpclaunch.planning.sweep import plan_sweep
from hpclaunch.store.sweeps import SweepArray, SweepRecord, find_sweep, save_sweep
from tests.unit.conftest import HOME, SUBMISSION_ID, hostile_text, make_site
from tests.unit.fakes import FakeRunner, result

STATE = "%i|%T|%r"  # sweep status's squeue format
TAGS = "%i|%k"  # find_submission's squeue format


def _record() -> SweepRecord:
    """Points 0-2 in array 10 (in-quota script), 3-4 in array 11 (over-quota script)."""
    return SweepRecord(
        sweep_id=SUBMISSION_ID,
        name="sw",
        site="local",
        job_dir="/jobs/s",
        log_dir="/logs/s",
        params_file="/jobs/s/sweep-params.jsonl",
        points=5,
        submitted_at="2026-11-26T10:00:00+00:00",
        tier="low",
        qos="low",
        max_concurrent=2,
        arrays=(
            SweepArray("10", 0, 3, script="/jobs/s/job.sbatch"),
            SweepArray("11", 3, 2, script="/jobs/s/job-overquota.sbatch"),
        ),
    )


class Cluster:
    """Slurm's answers: task states, which points' scripts started (``find``), the jobs
    tagged with a submission id, and sbatch handing out ids from 201."""

    def __init__(self) -> None:
        self.states = {"10_0": "COMPLETED", "10_1": "FAILED", "10_2": "FAILED"}
        self.states |= {"11_0": "NODE_FAIL", "11_1": "PENDING"}
        self.started = ["/logs/s/tasks/2/attempt-0.log"]  # 10_2 failed in the user's code
        self.tagged: dict[str, str] = {}
        self.next_id = 201

    def __call__(self, argv: tuple[str, ...]) -> Any:
        if argv[0] == "squeue" and f"--format={STATE}" in argv:
            lines = [f"{job}|{state}|None" for job, state in self.states.items()]
            return result(argv, out="\n".join(lines) + "\n")
        if argv[0] == "squeue" and f"--format={TAGS}" in argv:
            lines = [f"{job}|hpclaunch:{tag}" for tag, job in self.tagged.items()]
            return result(argv, out="\n".join(lines) + "\n")
        if argv[0] == "find":
            return result(argv, 1, "\n".join(self.started) + "\n", "find: '/jobs/s/tasks': none")
        if argv[0] == "sbatch":
            job = str(self.next_id)
            self.next_id += 1
            tag = next(a for a in argv if a.startswith("--comment=")).split(":", 1)[1]
            self.tagged[tag] = job
            array = next(a for a in argv if a.startswith("--array=")).split("=")[1]
            for task in array.split("%")[0].split(","):
                self.states[f"{job}_{task}"] = "PENDING"
            return result(argv, out=f"{job}\n")
        return result(argv, 1)  # grep (no ledger says success), sacct


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Context, Cluster]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    save_sweep(_record())
    slurm = Cluster()
    context = Context(site="local", backend="cli", warn=lambda text: None)
    context.__dict__["backend"] = CliBackend(FakeRunner(slurm), load_site("local"))
    return context, slurm


def test_status_names_the_points_whose_tasks_ended_before_their_script_started(
    cluster: tuple[Context, Cluster],
) -> None:
    context, _ = cluster
    status = sweep_status(context.backend, find_sweep(SUBMISSION_ID), metrics=False)
    assert [t.point for t in status.tasks if t.never_ran] == [1, 3]  # not 2: it started
    (said,) = [p for p in status.problems if "never ran" in p]
    assert said.startswith("2 point(s) never ran: Slurm ended their tasks (10_1 FAILED, 11_0 ")
    assert f"'hpclaunch sweep rerun {SUBMISSION_ID}'" in said
    assert status.to_dict()["tasks"][1]["never_ran"] is True


def test_rerun_submits_only_those_points_with_their_arrays_script_and_offset(
    cluster: tuple[Context, Cluster],
) -> None:
    context, slurm = cluster
    rerun = rerun_sweep(context, SUBMISSION_ID[:8])
    assert rerun.points == (1, 3)
    runner = context.backend.runner
    assert isinstance(runner, FakeRunner)
    assert [c[2:] for c in runner.calls_to("sbatch")] == [
        ("--array=1%2", f"--comment=hpclaunch:{SUBMISSION_ID}-r0", "/jobs/s/job.sbatch", "0"),
        (
            "--array=0%2",
            f"--comment=hpclaunch:{SUBMISSION_ID}-r1",
            "/jobs/s/job-overquota.sbatch",
            "3",
        ),
    ]
    record = find_sweep(SUBMISSION_ID)
    assert record.arrays[2:] == (
        SweepArray("201", 0, 3, (1,), "/jobs/s/job.sbatch"),
        SweepArray("202", 3, 2, (0,), "/jobs/s/job-overquota.sbatch"),
    )
    # Status now shows each point's newest task; the reruns are pending, nothing to rerun.
    status = sweep_status(context.backend, record, metrics=False)
    assert [t.job_id for t in status.tasks] == ["10_0", "201_1", "10_2", "202_0", "11_1"]
    assert not any(t.never_ran for t in status.tasks)
    again = rerun_sweep(context, SUBMISSION_ID)
    assert again.points == ()
    assert len(runner.calls_to("sbatch")) == 2
    # A rerun whose task also ended before its script ran is submitted again, once.
    slurm.states["201_1"] = "FAILED"
    third = rerun_sweep(context, SUBMISSION_ID)
    assert third.points == (1,)
    assert runner.calls_to("sbatch")[-1][2:4] == (
        "--array=1%2",
        f"--comment=hpclaunch:{SUBMISSION_ID}-r2",
    )


def test_a_rerun_whose_record_was_lost_is_found_by_its_tag_not_submitted_twice(
    cluster: tuple[Context, Cluster],
) -> None:
    """sbatch ran but the record was not written (the process died): the next rerun
    computes the same tag, finds the job in Slurm and records it instead."""
    context, slurm = cluster
    slurm.tagged[f"{SUBMISSION_ID}-r0"] = "300"
    slurm.states["300_1"] = "PENDING"
    rerun = rerun_sweep(context, SUBMISSION_ID)
    runner = context.backend.runner
    assert isinstance(runner, FakeRunner)
    assert [c[2] for c in runner.calls_to("sbatch")] == ["--array=0%2"]  # only array 11's
    assert [a.job_id for a in rerun.arrays] == ["300", "201"]


_PLAN = plan_sweep(
    JobSpec.model_validate(
        {"name": "sw", "command": ["t", "{i}"], "sweep": {"method": "list", "points": [{"i": 1}]}}
    ),
    make_site(),
    submission_id=SUBMISSION_ID,
    home=HOME,
    max_array_size=10,
).plan


@given(hostile_text.filter(lambda t: t.isprintable() and not re.search("hetjob|packjob", t, re.I)))
def test_the_sbatch_lines_of_a_rendered_script_read_back_as_its_options(odd: str) -> None:
    """pyslurm submits a rerun from the script on disk: its #SBATCH lines, read back,
    are the plan's options, hostile values too."""
    plan = replace(
        _PLAN, sbatch_options=(*_PLAN.sbatch_options, ("--begin", odd), ("--hold", None))
    )
    assert script_options(render(plan).script) == list(plan.sbatch_options)
