"""Sweeps: expansion, splitting into arrays, the params file, placeholders (hostile values
through the real batch script and task step), per-task directories, status, the record."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpclaunch.backends.arrays import held_problem
from hpclaunch.backends.base import JobRef
from hpclaunch.backends.cli import CliBackend
from hpclaunch.backends.slurm_text import parse_held_tasks, parse_task_states
from hpclaunch.config.site import load_site
from hpclaunch.errors import JobNotFound, PlanError, SpecError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.ops.sweep import submit_sweep
from hpclaunch.ops.sweep_status import sweep_status
from hpclaunch.planning.points import ArrayChunk, expand, params_lines, split_arrays
from hpclaunch.planning.render import render
from hpclaunch.planning.sweep import plan_sweep
from hpclaunch.runtime import report_metrics, sweep_params
from hpclaunch.store.sweeps import (
    SweepArray,
    SweepRecord,
    find_sweep,
    find_task,
    list_sweeps,
    save_sweep,
)
from hpclaunch.supervise.ledger import Ledger
from hpclaunch.supervise.sweep_task import placeholders, read_point, substitute, task_env
from tests.unit.conftest import HOME, PYTHON, SUBMISSION_ID, hostile_text, make_site, sweep_spec
from tests.unit.fakes import FakeRunner, result

SITE = make_site()


def sweep(**fields: Any) -> Sweep:
    return Sweep.model_validate(fields)


# -- the spec and expansion -----------------------------------------------------------------


def test_grid_is_every_combination_first_parameter_slowest() -> None:
    points = expand(sweep(method="grid", parameters={"lr": [0.1, 0.01], "bs": [32, 64, 128]}))
    assert len(points) == 6
    assert points[:3] == [{"lr": 0.1, "bs": 32}, {"lr": 0.1, "bs": 64}, {"lr": 0.1, "bs": 128}]
    assert points[-1] == {"lr": 0.01, "bs": 128}


def test_random_is_deterministic_for_a_seed_and_stays_in_range() -> None:
    params = {
        "lr": {"min": 1e-5, "max": 1e-1, "log": True},
        "layers": {"min": 1, "max": 4, "int": True},
        "opt": ["adam", "sgd"],
        "drop": {"min": 0.0, "max": 0.5},
    }
    first = expand(sweep(method="random", count=200, seed=7, parameters=params))
    assert first == expand(sweep(method="random", count=200, seed=7, parameters=params))
    assert first != expand(sweep(method="random", count=200, seed=8, parameters=params))
    assert all(1e-5 <= p["lr"] <= 1e-1 for p in first)
    assert {p["layers"] for p in first} == {1, 2, 3, 4}
    assert all(isinstance(p["layers"], int) for p in first)
    assert {p["opt"] for p in first} == {"adam", "sgd"}
    assert all(0.0 <= p["drop"] <= 0.5 for p in first)  # type: ignore[operator]
    # log-uniform: about as many draws below 1e-3 as above
    below = sum(1 for p in first if p["lr"] < 1e-3)  # type: ignore[operator]
    assert 60 < below < 140


def test_list_is_as_written() -> None:
    points = [{"lr": 0.1, "name": "a"}, {"lr": 0.2, "name": "b"}]
    assert expand(sweep(method="list", points=points)) == points


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "grid", "parameters": {"lr": 0.1}}, "sweep.parameters: lr: give a list"),
        ({"method": "grid", "parameters": {"lr": []}}, "lr: the list of values is empty"),
        ({"method": "random", "parameters": {"lr": [1]}}, "method random needs count"),
        ({"method": "grid", "parameters": {"lr": {"min": 1, "max": 2}}}, "a grid takes lists"),
        ({"method": "list", "points": [{"a": 1}, {"b": 2}]}, "point 1 has parameters ['b']"),
        ({"method": "grid", "parameters": {"1a": [1]}}, "'1a' is not a parameter name"),
        ({"method": "grid", "parameters": {"lr": [1]}, "count": 3}, "count: not used by method"),
        ({"method": "grid", "parameters": {"lr": [[1]]}}, "[1] is not a single value"),
        ({"method": "list"}, "method list needs points"),
        (
            {"method": "random", "count": 2, "parameters": {"lr": {"min": 2, "max": 1}}},
            "lr: min (2) must be below max (1)",
        ),
        (
            {"method": "random", "count": 2, "parameters": {"lr": {"min": 0, "max": 1, "log": 1}}},
            "log: true needs min > 0",
        ),
        (
            {"method": "random", "count": 2, "parameters": {"lr": {"min": 1, "max": 2, "x": 1}}},
            "lr: unknown key 'x'",
        ),
        ({"method": "grid", "parameters": {"a": [1]}, "max_concurrent": 0}, "max_concurrent"),
        ({"method": "bayes", "parameters": {"a": [1]}}, "sweep.method"),
    ],
)
def test_bad_sweeps_name_the_field(fields: dict[str, Any], message: str, tmp_path: Path) -> None:
    from hpclaunch.jobspec.job import load_spec

    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"name": "x", "command": ["echo"], "sweep": fields}))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert message in info.value.message
    assert str(path) in info.value.message


# -- splitting into arrays --------------------------------------------------------------------


def test_split_keeps_every_index_below_max_array_size() -> None:
    arrays = split_arrays(300, 101)
    assert arrays == [ArrayChunk(0, 101), ArrayChunk(101, 101), ArrayChunk(202, 98)]
    assert [a.array_spec for a in arrays] == ["0-100", "0-100", "0-97"]
    covered = [a.offset + i for a in arrays for i in range(a.count)]
    assert covered == list(range(300))


@pytest.mark.parametrize(
    ("points", "size", "specs"),
    [
        (101, 101, ["0-100"]),
        (102, 101, ["0-100", "0"]),
        (1, 1001, ["0"]),
        (1000, 1001, ["0-999"]),
        (3, 1, ["0", "0", "0"]),
    ],
)
def test_split_edges(points: int, size: int, specs: list[str]) -> None:
    assert [a.array_spec for a in split_arrays(points, size)] == specs


def test_split_refuses_no_points_and_no_arrays() -> None:
    with pytest.raises(ValueError, match="at least one point"):
        split_arrays(0, 10)
    with pytest.raises(ValueError, match="arrays are disabled"):
        split_arrays(5, 0)


def test_the_cap_is_each_arrays_percent_and_arrays_are_chained() -> None:
    spec = sweep_spec(sweep={"method": "list", "points": [{"i": i} for i in range(250)]}, cap=3)
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=101)
    assert [a.array_spec for a in planned.arrays] == ["0-100%3", "0-100%3", "0-47%3"]
    assert planned.chained
    first = planned.sbatch_argv(0, None)
    assert first[:4] == (
        "sbatch",
        "--parsable",
        "--array=0-100%3",
        f"--comment=hpclaunch:{SUBMISSION_ID}-a0",
    )
    assert first[-2:] == (planned.plan.script_path, "0")
    second = planned.sbatch_argv(1, "500")
    assert "--dependency=afterany:500" in second
    assert second[-1] == "101"


def test_chaining_keeps_the_specs_own_dependency() -> None:
    spec = sweep_spec(
        sweep={"method": "list", "points": [{"i": i} for i in range(5)]},
        cap=1,
        dependencies=[{"job": "77"}],
    )
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    assert "--dependency=afterok:77,afterany:9" in planned.sbatch_argv(1, "9")


def test_without_a_cap_arrays_are_independent() -> None:
    spec = sweep_spec(sweep={"method": "list", "points": [{"i": i} for i in range(5)]})
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    assert not planned.chained
    assert not any(a.startswith("--dependency") for a in planned.sbatch_argv(1, "9"))


def test_sweeps_default_to_tier_low_unless_the_spec_says() -> None:
    spec = sweep_spec(sweep={"method": "grid", "parameters": {"a": [1]}})
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert (planned.plan.tier, planned.plan.qos) == ("low", "low")
    assert ("--requeue", None) in planned.plan.sbatch_options
    spec = sweep_spec(sweep={"method": "grid", "parameters": {"a": [1]}}, tier="medium")
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert planned.plan.tier == "medium"


def test_a_spec_without_sweep_is_refused() -> None:
    with pytest.raises(PlanError, match="no sweep section"):
        plan_sweep(sweep_spec(), SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)


def test_a_placeholder_that_names_no_parameter_is_refused_with_a_guess() -> None:
    """Issue 27: ``{hiden}`` with a parameter ``hidden`` was submitted, and every task
    failed; only the dry run mentioned it."""
    spec = sweep_spec(
        sweep={"method": "grid", "parameters": {"hidden": [64, 128], "lr": [1]}},
        command=["t", "--hidden", "{hiden}", "--lr", "{lr}"],
    )
    with pytest.raises(PlanError) as refused:
        plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert refused.value.message == (
        "command: {hiden} is not a sweep parameter (parameters: hidden, lr): every task "
        "would get it as written"
    )
    assert refused.value.hint == "did you mean {hidden}? write {{hiden}} for a literal {hiden}"


def test_an_escaped_placeholder_is_passed_literally_and_braces_alone() -> None:
    spec = sweep_spec(
        sweep={"method": "grid", "parameters": {"lr": [1]}},
        command=["t", "{lr}", "--fmt", "{{epoch}}", '{"a": 1}', "echo ${HOME}"],
    )
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert not any("not in command or args" in note for note in planned.plan.notes)
    assert substitute(["{lr}", "{{epoch}}", '{"a": 1}', "{0}", "{x}"], {"lr": 0.5}) == [
        "0.5",
        "{epoch}",
        '{"a": 1}',
        "{0}",
        "{x}",
    ]


def test_a_parameter_no_placeholder_uses_is_noted() -> None:
    """The trainer may read it with runtime.sweep_params(): said, not refused."""
    spec = sweep_spec(
        sweep={"method": "grid", "parameters": {"lr": [1], "seed": [1, 2]}}, command=["t", "{lr}"]
    )
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert (
        "sweep parameter seed not in command or args (no {name} placeholder): the tasks "
        "differ only if the trainer reads runtime.sweep_params()"
    ) in planned.plan.notes


def test_submit_writes_the_params_file_then_one_sbatch_per_array() -> None:
    from hpclaunch.backends.cli import CliBackend

    spec = sweep_spec(sweep={"method": "list", "points": [{"i": i} for i in range(7)]}, cap=2)
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    jobs = iter(["100", "101", "102"])
    runner = FakeRunner(lambda argv: result(argv, out=next(jobs) + "\n"))
    backend = CliBackend(runner, SITE)
    seen: list[tuple[int, JobRef]] = []
    refs = submit_sweep(backend, runner, planned, on_array=lambda i, r: seen.append((i, r)))
    assert [r.job_id for r in refs] == ["100", "101", "102"]
    assert [i for i, _ in seen] == [0, 1, 2]
    sbatch = runner.calls_to("sbatch")
    assert [c[-1] for c in sbatch] == ["0", "3", "6"]
    assert "--dependency=afterany:100" in sbatch[1]
    assert "--dependency=afterany:101" in sbatch[2]
    text, mode = runner.files[planned.params_file]
    assert mode == 0o600
    assert [json.loads(line)["params"] for line in text.splitlines()] == [
        {"i": i} for i in range(7)
    ]


def test_a_resumed_sweep_takes_the_arrays_in_slurm_and_chains_on_them() -> None:
    """The retry of a sweep cut off after its first array (submit --sweep-id): array 0 is
    taken, 1 and 2 are submitted, 1 waits on the taken one, and the script is written
    once, with the first array this call submits."""
    from hpclaunch.backends.cli import CliBackend

    spec = sweep_spec(sweep={"method": "list", "points": [{"i": i} for i in range(7)]}, cap=2)
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=3)
    jobs = iter(["101", "102"])
    runner = FakeRunner(lambda argv: result(argv, out=next(jobs) + "\n"))
    seen: list[int] = []
    refs = submit_sweep(
        CliBackend(runner, SITE),
        runner,
        planned,
        on_array=lambda i, r: seen.append(i),
        taken=lambda i: JobRef("100") if i == 0 else None,
    )
    assert [r.job_id for r in refs] == ["100", "101", "102"]
    assert seen == [0, 1, 2]
    sbatch = runner.calls_to("sbatch")
    assert [c[-1] for c in sbatch] == ["3", "6"]  # arrays 1 and 2 only
    assert "--dependency=afterany:100" in sbatch[0]
    assert f"{planned.plan.job_dir}/job.sbatch" in runner.files


# -- the params file and the task step -------------------------------------------------------


def test_params_file_round_trip_with_newlines(tmp_path: Path) -> None:
    points = [{"a": "x\ny", "b": 1}, {"a": "ü'\"$()", "b": 2.5}, {"a": "", "b": True}]
    path = tmp_path / "p.jsonl"
    path.write_text(params_lines(points))
    assert len(path.read_text().splitlines()) == 3
    assert [read_point(str(path), i) for i in range(3)] == points
    from hpclaunch.supervise.sweep_task import TaskError

    with pytest.raises(TaskError, match="no point 3"):
        read_point(str(path), 3)


def test_each_task_gets_its_own_directories() -> None:
    env = {
        "HPCLAUNCH_JOB_DIR": "/jobs/s1",
        "HPCLAUNCH_LOG_DIR": "/logs/s1",
        "HPCLAUNCH_CHECKPOINT_DIR": "/jobs/s1/checkpoints",
        "HPCLAUNCH_SUBMISSION_ID": SUBMISSION_ID,
    }
    got = task_env(env, 12, {"lr": 0.1})
    assert got["HPCLAUNCH_JOB_DIR"] == "/jobs/s1/tasks/12"
    assert got["HPCLAUNCH_CONTROL_DIR"] == "/jobs/s1/tasks/12/control"
    assert got["HPCLAUNCH_CHECKPOINT_DIR"] == "/jobs/s1/tasks/12/checkpoints"
    assert got["HPCLAUNCH_LOG_DIR"] == "/logs/s1/tasks/12"
    assert json.loads(got["HPCLAUNCH_SWEEP_PARAMS"]) == {"lr": 0.1}
    assert got["WANDB_RUN_ID"] == f"{SUBMISSION_ID}t12"
    own = task_env({**env, "HPCLAUNCH_CHECKPOINT_DIR": "/scratch/ck", "WANDB_RUN_ID": "x"}, 3, {})
    assert own["HPCLAUNCH_CHECKPOINT_DIR"] == "/scratch/ck/tasks/3"
    assert "WANDB_RUN_ID" not in own


DUMPER = (
    "import json, os, sys\n"
    "out = os.path.join(os.environ['HPCLAUNCH_JOB_DIR'], 'dump.json')\n"
    "json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, open(out, 'w'))\n"
)
values = st.one_of(
    hostile_text,
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.lists(values, min_size=1, max_size=3),
    # A word with {name} for a name that is no parameter is refused (check_placeholders).
    words=st.lists(
        hostile_text.filter(lambda w: not placeholders([re.sub(r"\$\{\w+\}", "", w)]) - {"a"}),
        max_size=3,
    ),
)
def test_hostile_values_reach_the_task_exactly(a: list[Any], words: list[str]) -> None:
    """The whole rendered batch script under bash, as array task 1 of the array at offset
    ``len(a) - 1``: the last point's values replace ``{a}`` inside words, and nothing runs."""
    from hpclaunch.supervise.sweep_task import format_value

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dumper = root / "dump.py"
        dumper.write_text(DUMPER)
        points = [{"a": value} for value in a] + [{"a": a[-1]}]
        spec = JobSpec.model_validate(
            {
                "name": "x",
                "command": [sys.executable, str(dumper), "{a}", "pre{a}post", *words],
                "sweep": {"method": "list", "points": points},
            }
        )
        planned = plan_sweep(
            spec,
            make_site(job_root=str(root / "jobs")),
            submission_id=SUBMISSION_ID,
            home=tmp,
            cwd=tmp,
            python=sys.executable,
            max_array_size=1000,
        )
        job_dir = Path(planned.plan.job_dir)
        job_dir.mkdir(parents=True)
        Path(planned.params_file).write_text(params_lines(planned.points))
        script = root / "job.sh"
        script.write_text(render(planned.plan).script)
        offset = len(points) - 2
        env = {"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8", "SLURM_ARRAY_TASK_ID": "1"}
        proc = subprocess.run(
            ["bash", str(script), str(offset)], cwd=root, env=env, capture_output=True, check=False
        )
        point = offset + 1
        task_dir = job_dir / "tasks" / str(point)
        log = (task_dir / "attempt-0.log").read_text(errors="replace")
        assert proc.returncode == 0, log
        got = json.loads((task_dir / "dump.json").read_text())
        value = format_value(points[point]["a"])
        assert got["argv"] == [value, f"pre{value}post", *substitute(words, points[point])]
        assert json.loads(got["env"]["HPCLAUNCH_SWEEP_PARAMS"]) == points[point]
        assert not (root / "canary").exists()


def test_the_batch_script_refuses_a_bad_offset(tmp_path: Path) -> None:
    spec = sweep_spec(sweep={"method": "grid", "parameters": {"a": [1]}})
    planned = plan_sweep(
        spec,
        make_site(job_root=str(tmp_path / "jobs")),
        submission_id=SUBMISSION_ID,
        home=str(tmp_path),
        python=PYTHON,
        max_array_size=10,
    )
    script = tmp_path / "job.sh"
    script.write_text(render(planned.plan).script)
    for args, task in ((["a[$(touch canary)]"], "0"), ([], "0"), (["0"], "")):
        env = {"PATH": os.environ["PATH"], "SLURM_ARRAY_TASK_ID": task}
        proc = subprocess.run(
            ["bash", str(script), *args], cwd=tmp_path, env=env, capture_output=True, check=False
        )
        assert proc.returncode == 2
    assert not (tmp_path / "canary").exists()


# -- runtime API ------------------------------------------------------------------------------


def test_runtime_params_and_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HPCLAUNCH_SWEEP_PARAMS", raising=False)
    assert sweep_params() is None
    monkeypatch.setenv("HPCLAUNCH_SWEEP_PARAMS", '{"lr": 0.1}')
    monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    assert sweep_params() == {"lr": 0.1}
    path = report_metrics({"loss": 0.25, "acc": 1, "bad": float("nan")})
    assert path == tmp_path / "final-metrics.json"
    data = json.loads(path.read_text())
    assert data["metrics"] == {"loss": 0.25, "acc": 1, "bad": "nan"}
    with pytest.raises(TypeError, match="not a number"):
        report_metrics({"x": [1, 2]})
    monkeypatch.setenv("RANK", "1")
    assert report_metrics({"loss": 9}) is None
    assert json.loads(path.read_text())["metrics"]["loss"] == 0.25


# -- status and the record --------------------------------------------------------------------


def test_task_states_from_squeue_and_sacct_lines() -> None:
    text = "10_0|COMPLETED\n10_[1-3,5%2]|PENDING\n10_4|CANCELLED by 0\n10|RUNNING\n10_6.batch|X\n"
    assert parse_task_states(text) == {
        "10_0": "COMPLETED",
        "10_1": "PENDING",
        "10_2": "PENDING",
        "10_3": "PENDING",
        "10_5": "PENDING",
        "10_4": "CANCELLED",
    }


HELD = Path(__file__).parents[1] / "data" / "cluster-25.11" / "squeue_array_held.txt"


def test_held_tasks_from_recorded_squeue_lines() -> None:
    """squeue --array --states=all --format=%i|%T|%r of the 25.11 cluster while tasks that
    slurmctld launched a second time after its restart waited, requeued and held."""
    text = HELD.read_text()
    held = parse_held_tasks(text)
    assert held
    assert set(held.values()) == {"launch failed requeued held"}
    states = parse_task_states(text)
    assert all(states[task] == "PENDING" for task in held)
    assert len(states) == len(text.splitlines())  # every task line, the reason column or not


def test_held_tasks_are_named_with_the_release_command() -> None:
    said = held_problem({"10_12": "launch failed requeued held", "10_3": "JobHeldUser"})
    assert said is not None
    assert said.startswith("2 task(s) wait on a hold (JobHeldUser, launch failed requeued held)")
    assert "'scontrol release 10_3 10_12'" in said
    assert held_problem({}) is None


def test_status_names_the_held_tasks() -> None:
    lines = "10_0|RUNNING|None\n10_1|PENDING|launch failed requeued held\n10_2|PENDING|Priority\n"
    runner = FakeRunner(lambda argv: result(argv, out=lines if argv[0] == "squeue" else ""))
    backend = CliBackend(runner, load_site("local"))
    status = sweep_status(backend, _record(points=3, arrays=(SweepArray("10", 0, 3),)))
    assert "--format=%i|%T|%r" in runner.calls[0]
    assert status.counts == {"RUNNING": 1, "PENDING": 2}
    (held,) = [p for p in status.problems if "hold" in p]
    assert "1 task(s) wait on a hold (launch failed requeued held): 10_1." in held


def _record(**fields: Any) -> SweepRecord:
    data: dict[str, Any] = {
        "sweep_id": SUBMISSION_ID,
        "name": "sw",
        "site": "local",
        "job_dir": "/jobs/s",
        "log_dir": "/jobs/s",
        "params_file": "/jobs/s/sweep-params.jsonl",
        "points": 4,
        "submitted_at": "2026-11-22T10:00:00+00:00",
        "tier": "low",
        "qos": "low",
        "arrays": (SweepArray("10", 0, 3), SweepArray("11", 3, 1)),
    }
    data.update(fields)
    return SweepRecord(**data)


def test_status_is_one_squeue_and_one_sacct_and_reads_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def answer(argv: tuple[str, ...]) -> Any:
        if argv[0] == "squeue":
            return result(argv, out="11_0|RUNNING\n")
        if argv[0] == "find":  # 10_2 FAILED after its script started: not a rerun
            return result(argv, out="/jobs/s/tasks/2/attempt-0.log\n")
        return result(argv, out="10_0|COMPLETED\n10_1|COMPLETED\n10_2|FAILED\n11_0|PENDING\n")

    runner = FakeRunner(answer)
    runner.put_file(
        "/jobs/s/sweep-params.jsonl", params_lines([{"lr": v} for v in (1, 2, 3, 4)]), 0o600
    )
    runner.put_file("/jobs/s/tasks/0/final-metrics.json", '{"metrics": {"loss": 0.5}}', 0o600)
    runner.put_file("/jobs/s/tasks/1/final-metrics.json", "not json", 0o600)
    status = sweep_status(CliBackend(runner, load_site("local")), _record())
    # grep: the ledgers of the tasks Slurm has not seen complete (one call for all);
    # find: which of those that FAILED ever started
    assert [c[0] for c in runner.calls] == ["squeue", "sacct", "grep", "find"]
    assert not any(t.never_ran for t in status.tasks)
    assert "--jobs=10,11" in runner.calls[0]
    assert status.counts == {"COMPLETED": 2, "FAILED": 1, "RUNNING": 1}
    assert [t.metrics for t in status.tasks] == [{"loss": 0.5}, None, None, None]
    assert [t.params["lr"] for t in status.tasks] == [1, 2, 3, 4]
    assert [t.job_id for t in status.tasks] == ["10_0", "10_1", "10_2", "11_0"]

    from hpclaunch.cli.sweep import _print_status

    _print_status(status)
    out = capsys.readouterr().out
    assert "COMPLETED 2, FAILED 1, RUNNING 1" in out
    assert "loss" in out
    assert "0.5" in out
    assert "lr" in out


def test_status_skips_sacct_when_squeue_knows_every_task() -> None:
    runner = FakeRunner(lambda argv: result(argv, out="10_0|RUNNING\n10_1|PENDING\n"))
    backend = CliBackend(runner, load_site("local"))
    status = sweep_status(backend, _record(points=2, arrays=(SweepArray("10", 0, 2),)))
    assert [c[0] for c in runner.calls] == ["squeue", "grep"]
    assert status.counts == {"RUNNING": 1, "PENDING": 1}
    assert status.problems == ("params file: cannot read /jobs/s/sweep-params.jsonl: no such file",)


def test_a_task_whose_ledger_says_success_is_completed_whatever_slurm_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """slurmctld restarted and forgot the ends of tasks 10_1 and 10_2: it says RUNNING and
    TIMEOUT. Their sidecars' ledgers (written by the real Ledger, read by the real grep)
    say success; 10_3's says user_error, 11_0 is still running."""
    jobs = tmp_path / "s"
    for point, reason in ((0, "success"), (1, "success"), (2, "success"), (3, "user_error")):
        ledger = Ledger(jobs / "tasks" / str(point), 0)
        ledger.path.parent.mkdir(parents=True)
        ledger.append("attempt_start", nodes=["n1"])
        ledger.append("attempt_end", reason=reason, exit_code=0 if reason == "success" else 1)
    (jobs / "tasks" / "4").mkdir()
    Ledger(jobs / "tasks" / "4", 0).append("attempt_start", nodes=["n2"])
    states = "10_0|COMPLETED\n10_1|RUNNING\n10_2|TIMEOUT\n10_3|FAILED\n11_0|RUNNING\n"

    def answer(argv: tuple[str, ...]) -> Any:
        if argv[0] in ("grep", "find"):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            return result(argv, done.returncode, done.stdout)
        return result(argv, out=states if argv[0] == "squeue" else "")

    record = _record(
        job_dir=str(jobs),
        points=5,
        arrays=(SweepArray("10", 0, 4), SweepArray("11", 4, 1)),
    )
    status = sweep_status(CliBackend(FakeRunner(answer), load_site("local")), record)
    assert [(t.state, t.slurm_state) for t in status.tasks] == [
        ("COMPLETED", None),
        ("COMPLETED", "RUNNING"),
        ("COMPLETED", "TIMEOUT"),
        ("FAILED", None),
        ("RUNNING", None),
    ]
    assert status.counts == {"COMPLETED": 3, "FAILED": 1, "RUNNING": 1}
    assert not status.tasks[3].never_ran  # its ledger shows the attempt: the user's error
    (lost,) = [p for p in status.problems if "ledgers" in p]
    assert "2 task(s) ended successfully" in lost
    assert "'scancel 10_1 10_2'" in lost
    assert status.to_dict()["tasks"][2]["slurm_state"] == "TIMEOUT"

    from hpclaunch.cli.sweep import _print_status

    _print_status(status)
    assert "COMPLETED (Slurm: TIMEOUT)" in capsys.readouterr().out


def test_record_find_by_id_prefix_array_and_task(tmp_path: Path) -> None:
    save_sweep(_record(), tmp_path)
    other = _record(sweep_id="f" * 32, arrays=(SweepArray("12", 0, 4),))
    save_sweep(other, tmp_path)
    assert len(list_sweeps(tmp_path)) == 2
    assert find_sweep(SUBMISSION_ID, tmp_path).arrays[1] == SweepArray("11", 3, 1)
    assert find_sweep("0123", tmp_path).sweep_id == SUBMISSION_ID
    assert find_sweep("12", tmp_path).sweep_id == "f" * 32
    with pytest.raises(JobNotFound, match="no sweep"):
        find_sweep("9999", tmp_path)
    found = find_task("11_0", tmp_path)
    assert found is not None
    assert found[1] == 3
    assert find_task("10_3", tmp_path) is None  # array 10 has tasks 0..2
    assert find_task("10", tmp_path) is None


def _quota_sweep(max_concurrent: int | None, points: int = 12) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "s",
            "command": ["python", "train.py", "--seed", "{seed}"],
            "project": "research",
            "tier": "medium",
            "resources": {"gpus_per_node": 1, "time": 10},
            "sweep": {
                "method": "grid",
                "parameters": {"seed": list(range(points))},
                **({"max_concurrent": max_concurrent} if max_concurrent else {}),
            },
        }
    )


def _plan_quota(spec: JobSpec, used: int, mode: str = "allow") -> Any:
    from hpclaunch.config.site import load_site

    return plan_sweep(
        spec,
        load_site("local"),  # research: 8 guaranteed GPUs
        submission_id=SUBMISSION_ID,
        home=HOME,
        max_array_size=1001,
        python=PYTHON,
        quota_used=used,
        quota_mode=mode,
    )


def test_a_sweep_beyond_its_free_quota_is_split_in_quota_and_over_quota() -> None:
    # 12 one-GPU tasks at once, research has 8 guaranteed GPUs free: judged per task, every
    # task was in-quota and 4 waited at the quota beside idle GPUs. Now 8 run in-quota
    # (never preempted) and 4 over-quota on idle GPUs.
    sweep = _plan_quota(_quota_sweep(12), used=0)
    inside, over = sweep.plan, sweep.overquota
    assert over is not None
    assert (inside.quota, inside.account, inside.qos) == ("in-quota", "research", "normal")
    assert (over.quota, over.account, over.qos) == ("over-quota", "research-oq", "overquota")
    assert [a.array_spec for a in sweep.arrays] == ["0-7%8", "0-3%4"]
    assert [a.offset for a in sweep.arrays] == [0, 8]
    assert [sweep.plan_of(i).script_path for i in range(2)] == [
        f"{inside.job_dir}/job.sbatch",
        f"{inside.job_dir}/job-overquota.sbatch",
    ]
    assert sweep.sbatch_argv(1, None)[-2:] == (f"{inside.job_dir}/job-overquota.sbatch", "8")
    assert over.option("--requeue") is None  # preemptible: requeued, resumed
    assert inside.option("--no-requeue") is None
    assert (
        inside.quota_warning
        == over.quota_warning
        == (
            "project research has 8 of its guaranteed GPUs free; this sweep runs 12 tasks at once: "
            "8 in-quota, 4 over-quota on idle GPUs, which may be preempted (--quota=strict waits "
            "in-quota instead)"
        )
    )
    assert any("points 0-7 in-quota (8 at a time" in n for n in inside.notes)
    assert any("points 8-11 over-quota (4 at a time" in n for n in inside.notes)
    # More points than run at once: shared in the same ratio (2/3 in-quota).
    many = _plan_quota(_quota_sweep(12, points=60), used=2)  # 6 free
    assert [a.array_spec for a in many.arrays] == ["0-29%6", "0-29%6"]
    assert [a.offset for a in many.arrays] == [0, 30]
    # A cap that fits what is left of the guarantee keeps it whole and in-quota.
    fits = _plan_quota(_quota_sweep(6), used=2)
    assert (fits.plan.quota, fits.overquota, fits.plan.quota_warning) == ("in-quota", None, None)
    assert any("6 tasks can run at once (max_concurrent 6)" in n for n in fits.plan.notes)
    # Nothing free: over-quota as a whole, and the note says so.
    full = _plan_quota(_quota_sweep(12), used=8)
    assert (full.plan.quota, full.overquota) == ("over-quota", None)
    assert full.plan.quota_warning is not None
    assert "this job asks 12" in full.plan.quota_warning
    # strict: in-quota, one part, waiting at the guarantee.
    strict = _plan_quota(_quota_sweep(12), used=0, mode="strict")
    assert (strict.plan.quota, strict.overquota) == ("in-quota", None)


def test_a_split_sweep_submits_each_part_with_its_own_script() -> None:
    sweep = _plan_quota(_quota_sweep(12), used=0)
    runner = FakeRunner(lambda argv: result(argv, out=f"{700 + len(runner.calls)}\n"))
    from hpclaunch.backends.cli import CliBackend
    from hpclaunch.config.site import load_site

    refs = submit_sweep(CliBackend(runner, load_site("local")), runner, sweep)
    assert len(refs) == 2
    written = sorted(runner.files)
    assert f"{sweep.plan.job_dir}/job.sbatch" in written
    assert f"{sweep.plan.job_dir}/job-overquota.sbatch" in written
    over_script = runner.files[f"{sweep.plan.job_dir}/job-overquota.sbatch"][0]
    assert "#SBATCH --account=research-oq\n" in over_script
    assert "#SBATCH --qos=overquota\n" in over_script
    sbatch = [c for c in runner.calls if c[0] == "sbatch"]
    assert [c[-1] for c in sbatch] == ["0", "8"]  # each array told its first point
    assert not any(a.startswith("--dependency") for c in sbatch for a in c)  # parts in parallel


def test_sort_tasks_by_metric_missing_last_and_unknown_names_the_known() -> None:
    from hpclaunch.ops.sweep_status import TaskStatus, sort_tasks

    tasks = [
        TaskStatus(0, "1_0", "COMPLETED", {"lr": 0.1}, {"loss": 0.5}),
        TaskStatus(1, "1_1", "FAILED", {"lr": 0.01}, None),
        TaskStatus(2, "1_2", "COMPLETED", {"lr": 0.001}, {"loss": 0.2}),
    ]
    assert [t.point for t in sort_tasks(tasks, "loss")] == [2, 0, 1]
    assert [t.point for t in sort_tasks(tasks, "loss", descending=True)] == [0, 2, 1]
    assert [t.point for t in sort_tasks(tasks, "lr")] == [2, 1, 0]
    with pytest.raises(KeyError, match="loss, lr"):
        sort_tasks(tasks, "acc")


def test_an_adaptive_sweep_is_an_array_of_trials_that_ask_the_study() -> None:
    spec = sweep_spec(
        sweep={
            "method": "tpe",
            "metric": {"name": "val_loss"},
            "parameters": {"lr": {"min": 0.001, "max": 0.1, "log": True}, "w": [8, 16]},
            "trials": 5,
            "early_terminate": {"type": "asha", "min_steps": 2},
        },
        cap=2,
        command=["python", "train.py", "--lr", "{lr}", "--width", "{w}"],
        launcher="srun",
    )
    planned = plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
    assert planned.points == ({},) * 5  # each task asks the study
    assert [a.array_spec for a in planned.arrays] == ["0-4%2"]
    step = planned.plan.launch_prefix
    assert step[step.index("--study") + 1] == planned.study_file
    assert planned.study_file == f"{planned.plan.job_dir}/study.json"
    assert planned.study is not None
    assert planned.study.journal == f"{planned.plan.job_dir}/study.journal"
    assert any(
        n.startswith("adaptive sweep (tpe, Optuna): 5 trials minimizing val_loss")
        for n in planned.plan.notes
    )
    assert not planned.unused
    runner = FakeRunner(lambda argv: result(argv, out="100\n"))
    submit_sweep(CliBackend(runner, SITE), runner, planned)
    text, mode = runner.files[planned.study_file]
    assert mode == 0o600
    assert json.loads(text)["name"] == f"hpclaunch-{SUBMISSION_ID}"


def test_an_adaptive_sweeps_placeholders_are_its_parameters() -> None:
    spec = sweep_spec(
        sweep={"method": "tpe", "metric": {"name": "l"}, "parameters": {"lr": [0.1]}, "trials": 2},
        command=["python", "train.py", "--lr", "{lrr}"],
        launcher="srun",
    )
    with pytest.raises(
        PlanError, match=r"(?s)\{lrr\} is not a sweep parameter.*did you mean \{lr\}"
    ):
        plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=10)
