"""Multi-job files (hpclaunch.planning.pipeline): validation errors, order, derived ids, sbatch
options, and the words status uses for a job that waits or never ran."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpclaunch.backends.base import JobRef
from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import load_spec
from hpclaunch.planning.pipeline import (
    explain_dependency_wait,
    is_pipeline_file,
    load_pipeline,
    parse_dependency,
    parse_pipeline,
    step_submission_ids,
    with_dependencies,
)
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.planning.render import render
from hpclaunch.slurm.jobs import JobInfo, JobState
from tests.unit.conftest import make_spec

REPO = Path(__file__).resolve().parents[3]


def job(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": ["python", f"{name}.py"], **fields}


def steps_of(*jobs: dict[str, Any], **top: Any) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    steps = parse_pipeline({"jobs": list(jobs), **top}, source="p.yaml")
    return [(step.name, step.after) for step in steps]


def error(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        parse_pipeline(data, source="p.yaml")
    text = str(info.value)
    assert text.startswith("p.yaml")
    assert "errors.pydantic.dev" not in text
    return text + "\nHint: " + (info.value.hint or "")


# -- the file model -----------------------------------------------------------------------


def test_example_is_a_pipeline_train_then_evaluate() -> None:
    path = REPO / "examples" / "pipeline.yaml"
    assert is_pipeline_file(path)
    steps = load_pipeline(path)
    assert [(s.name, s.after) for s in steps] == [
        ("train", ()),
        ("evaluate", (("train", "afterok"),)),
    ]
    assert steps[1].spec.project == "research"  # from defaults
    assert steps[1].spec.resources.mem == "200M"


def test_single_spec_is_not_a_pipeline(tmp_path: Path) -> None:
    assert not is_pipeline_file(REPO / "examples" / "hello.yaml")
    assert not is_pipeline_file(tmp_path / "missing.yaml")


def test_after_forms_and_when() -> None:
    got = steps_of(
        job("train"),
        job("eval", after=["train"]),
        job("export", after=[{"job": "eval", "when": "any"}, {"job": "train", "when": "ok"}]),
        job("alert", after="train"),
        job("cleanup", after={"job": "train", "when": "notok"}),
    )
    assert got == [
        ("train", ()),
        ("eval", (("train", "afterok"),)),
        ("export", (("eval", "afterany"), ("train", "afterok"))),
        ("alert", (("train", "afterok"),)),
        ("cleanup", (("train", "afternotok"),)),
    ]


def test_order_is_dependency_order_then_file_order() -> None:
    got = steps_of(
        job("export", after=["eval"]),
        job("eval", after=["train"]),
        job("other"),
        job("train"),
    )
    assert [name for name, _ in got] == ["other", "train", "eval", "export"]
    # A job freed by the one just placed goes before a later independent one.
    got = steps_of(job("a"), job("b", after=["a"]), job("c"))
    assert [name for name, _ in got] == ["a", "b", "c"]


def test_defaults_merge_under_each_job_mappings_key_by_key() -> None:
    steps = parse_pipeline(
        {
            "defaults": {
                "project": "research",
                "env": {"A": "1", "B": "2"},
                "resources": {"mem": "1G", "time": "00:10:00"},
            },
            "jobs": [job("train", env={"B": "3"}, resources={"mem": "2G"}), job("eval")],
        },
        source="p.yaml",
    )
    train, evaluate = (s.spec for s in steps)
    assert train.env == {"A": "1", "B": "3"}
    assert (train.resources.mem, train.resources.time) == ("2G", "00:10:00")
    assert (evaluate.project, evaluate.resources.mem) == ("research", "1G")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"jobs": [job("a"), job("a")]}, "jobs[1].name: 'a' is also the name of jobs[0]"),
        (
            {"jobs": [job("train"), job("eval", after=["trian"])]},
            "jobs[1].after[0]: no job named 'trian' in this file (did you mean 'train'?); "
            "its jobs: train, eval",
        ),
        ({"jobs": [job("eval", after=["eval"])]}, "jobs[0].after[0]: job 'eval' waits for itself"),
        (
            {"jobs": [job("a", after=["c"]), job("b", after=["a"]), job("c", after=["b"])]},
            "jobs: a → c → b → a wait for each other (a cycle in after:)",
        ),
        (
            {"jobs": [job("x"), job("a", after=["x", "x"])]},
            "jobs[1].after[1]: 'x' is named twice",
        ),
        (
            {"jobs": [job("a"), job("b", after=[{"job": "a", "when": "sometimes"}])]},
            "jobs[1].after[0].when: Input should be 'ok', 'any' or 'notok'",
        ),
        (
            {"jobs": [job("a"), job("b", after=[{"job": "a", "if": "ok"}])]},
            "jobs[1].after[0].if: unknown key 'if'; valid keys at jobs[1].after[0]: job, when",
        ),
        ({"jobs": [job("a", resources={"gpus": 1})]}, "jobs[0].resources.gpus: unknown key 'gpus'"),
        ({"jobs": [{"command": ["x"]}]}, "jobs[0].name: required but missing"),
        ({"jobs": []}, "jobs: the list is empty"),
        ({"defaults": {}}, "jobs: required but missing"),
        ({"jobs": [job("a")], "default": {}}, "unknown key 'default' (did you mean 'defaults'?)"),
        ({"jobs": [job("a")], "defaults": {"nme": "x"}}, "defaults.nme: unknown key 'nme'"),
        ({"jobs": [job("a")], "defaults": {"name": "x"}}, "defaults.name: each job sets its own"),
        ({"jobs": [job("a")], "defaults": {"after": ["a"]}}, "defaults.after: each job sets"),
        ({"jobs": [job("a")], "defaults": [1]}, "defaults: expected a mapping"),
        (
            {"jobs": [job("a", sweep={"method": "grid", "parameters": {"lr": [1]}})]},
            "jobs[0].sweep: a job of a multi-job file cannot be a sweep",
        ),
    ],
)
def test_errors_name_the_file_and_field(data: dict[str, Any], words: str) -> None:
    assert words in error(data)


def test_unknown_after_hint_points_to_dependencies_with_ids() -> None:
    text = error({"jobs": [job("eval", after=["train"])]})
    assert "dependencies: [{job: '<job id>', type: afterok}]" in text


def test_single_spec_with_after_explains_what_to_use(tmp_path: Path) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(job("eval", after=["train"])))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert f"{path}: after: names other jobs of a multi-job file" in str(info.value)
    assert info.value.hint is not None
    assert "jobs: [...]" in info.value.hint
    assert "dependencies: [{job: '1234', type: afterok}]" in info.value.hint


def test_a_pipeline_file_is_not_a_single_spec() -> None:
    with pytest.raises(SpecError, match="is a multi-job file"):
        load_spec(REPO / "examples" / "pipeline.yaml")


def test_load_pipeline_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope\.yaml does not exist"):
        load_pipeline(tmp_path / "nope.yaml")


# -- submission ids -----------------------------------------------------------------------


def test_step_ids_derive_from_the_pipeline_id() -> None:
    assert step_submission_ids("nightly-7", ["train", "eval v2", "ëx"]) == {
        "train": "nightly-7-train",
        "eval v2": "nightly-7-eval_v2",
        "ëx": "nightly-7-_x",
    }


def test_step_ids_stay_unique_and_short() -> None:
    ids = step_submission_ids("a" * 48, ["eval 1", "eval/1", "x" * 100])
    assert len(set(ids.values())) == 3
    assert all(len(i) <= 64 for i in ids.values())
    assert ids["eval 1"] == "a" * 48 + "-0-eval_1"
    assert ids["eval/1"] == "a" * 48 + "-1-eval_1"


@pytest.mark.parametrize("base", ["a b", "", "a" * 49])
def test_bad_pipeline_id_is_refused(base: str) -> None:
    with pytest.raises(SpecError, match="invalid submission id"):
        step_submission_ids(base, ["a"])


# -- sbatch options -----------------------------------------------------------------------


def test_with_dependencies_adds_dependency_and_kill_on_invalid_dep(
    plan_for: Callable[..., SubmissionPlan],
) -> None:
    plan = plan_for(make_spec(name="export"))
    waited = with_dependencies(
        plan, [("eval", "afterok", "124"), ("train", "afterok", "123"), ("x", "afterany", "9")]
    )
    assert waited.option("--dependency") == "afterok:124:123,afterany:9"
    assert waited.option("--kill-on-invalid-dep") == "yes"
    assert any(
        "starts after eval (afterok), train (afterok), x (afterany)" in note
        for note in waited.notes
    )
    script = render(waited).script
    assert "#SBATCH --dependency=afterok:124:123,afterany:9\n" in script
    assert "#SBATCH --kill-on-invalid-dep=yes\n" in script
    assert with_dependencies(plan, []) is plan


def test_with_dependencies_joins_the_specs_own_dependencies(
    plan_for: Callable[..., SubmissionPlan],
) -> None:
    spec = make_spec(dependencies=[{"job": "77", "type": "afterany"}])
    plan = with_dependencies(plan_for(spec), [("train", "afterok", "123")])
    assert plan.option("--dependency") == "afterany:77,afterok:123"
    assert [f for f, _ in plan.sbatch_options].count("--dependency") == 1


def test_parse_dependency() -> None:
    assert parse_dependency("afterok:1:2,afterany:3+5") == [
        ("afterok", "1"),
        ("afterok", "2"),
        ("afterany", "3"),
    ]
    assert parse_dependency("singleton") == []
    assert parse_dependency("afterok:1?afterok:2") == []


# -- explaining a job that waits or never ran ----------------------------------------------


def info(job_id: str, state: str, **fields: Any) -> JobInfo:
    return JobInfo(JobRef(job_id), JobState(state), **fields)


NAMES = {"123": "train", "124": "eval"}


def test_cancelled_never_started_names_the_failed_dependency() -> None:
    # sacct (22.05) for a job killed by --kill-on-invalid-dep: no nodes, Elapsed 00:00:00.
    evaluate = info("124", "CANCELLED", reason="Dependency", elapsed="00:00:00")
    train = info("123", "FAILED", exit_code=1, elapsed="00:00:02", nodes="n1")
    why = explain_dependency_wait(evaluate, "afterok:123", {"123": train}, NAMES)
    assert why == "never ran: train (job 123) FAILED, exit code 1"


def test_a_cascade_says_the_step_before_never_ran() -> None:
    export = info("125", "CANCELLED", reason="DependencyNeverSatisfied", elapsed="0:00")
    evaluate = info("124", "CANCELLED", nodes="None assigned", elapsed="00:00:00")
    why = explain_dependency_wait(export, "afterok:124", {"124": evaluate}, NAMES)
    assert why == "never ran: eval (job 124) CANCELLED (never ran)"


def test_pending_job_waits_for_the_running_one() -> None:
    evaluate = info("124", "PENDING", reason="Dependency")
    train = info("123", "RUNNING", nodes="n1")
    assert explain_dependency_wait(evaluate, "afterok:123", {"123": train}, NAMES) == (
        "waits for: train (job 123) RUNNING"
    )


def test_pending_forever_without_kill_on_invalid_dep() -> None:
    evaluate = info("124", "PENDING", reason="DependencyNeverSatisfied")
    train = info("123", "COMPLETED", exit_code=0, nodes="n1")
    why = explain_dependency_wait(evaluate, "afternotok:123", {"123": train}, NAMES)
    assert why == "never runs: train (job 123) COMPLETED"


@pytest.mark.parametrize(
    ("job_info", "deps"),
    [
        (info("124", "COMPLETED", nodes="n1", elapsed="00:00:03"), {"123": "COMPLETED"}),
        # cancelled after it started: not a dependency's doing
        (info("124", "CANCELLED", nodes="n1", elapsed="00:00:03"), {"123": "FAILED"}),
        # cancelled while pending, but its dependency held: someone ran scancel
        (info("124", "CANCELLED", elapsed="00:00:00"), {"123": "COMPLETED"}),
        # afterany always holds
        (info("124", "CANCELLED", elapsed="00:00:00"), {}),
        (info("124", "PENDING", reason="Priority"), {"123": "COMPLETED"}),
    ],
)
def test_nothing_to_add(job_info: JobInfo, deps: dict[str, str]) -> None:
    states = {i: info(i, s, nodes="n1") for i, s in deps.items()}
    assert explain_dependency_wait(job_info, "afterok:123", states, NAMES) is None


def test_afterany_never_breaks() -> None:
    evaluate = info("124", "CANCELLED", elapsed="00:00:00")
    states = {"123": info("123", "FAILED", nodes="n1")}
    assert explain_dependency_wait(evaluate, "afterany:123", states, NAMES) is None
