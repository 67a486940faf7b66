"""Job spec validation, and the texts of its errors."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
import yaml

from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import JobSpec, load_spec
from tests.unit.conftest import make_spec

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def load_error(tmp_path: Path, text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text))
    # Never a raw pydantic/yaml text: no pydantic URLs, and the file is named.
    assert "errors.pydantic.dev" not in str(info.value)
    assert "job.yaml" in str(info.value)
    return info.value


def test_example_loads() -> None:
    spec = load_spec(REPO / "examples" / "hello.yaml")
    assert spec.name == "hello"
    assert spec.tier == "medium"
    assert spec.project == "research"
    assert spec.resources.gpus_per_node == 0
    assert spec.command[0] == "bash"


def test_defaults() -> None:
    spec = make_spec()
    assert spec.launcher == "none"
    assert spec.tier == "medium"
    assert spec.resources.nodes == 1
    assert spec.resources.cpus_per_task == 1
    assert spec.resources.time is None
    assert spec.checkpoint.signal_lead_time == 120
    assert spec.checkpoint.signal == "USR1"
    assert spec.env == {}


def test_frozen() -> None:
    spec = make_spec()
    with pytest.raises(pydantic.ValidationError):
        spec.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("given", "normalised", "seconds"),
    [("30", "00:30:00", 1800), (90, "01:30:00", 5400), ("1-00:00:00", "1-00:00:00", 86400)],
)
def test_time_is_normalised(given: str | int, normalised: str, seconds: int) -> None:
    spec = make_spec(resources={"time": given})
    assert spec.resources.time == normalised
    assert spec.resources.time_seconds == seconds


@pytest.mark.parametrize(
    ("given", "normalised", "mb"),
    [
        ("8G", "8G", 8192),
        ("500m", "500M", 500),
        ("2gb", "2G", 2048),
        (1000, "1000M", 1000),
        ("1T", "1T", 1048576),
        ("100K", "100K", 1),
    ],
)
def test_mem_is_normalised(given: str | int, normalised: str, mb: int) -> None:
    resources = make_spec(resources={"mem": given}).resources
    assert resources.mem == normalised
    assert resources.mem_mb == mb


def test_name_may_hold_quotes_and_symbols() -> None:
    name = """it's "quoted" $(x) `y` #z ünï"""
    assert make_spec(name=name).name == name


def test_ints_in_argv_and_env_become_strings() -> None:
    spec = make_spec(command=["python", "train.py", "--epochs", 10], env={"OMP_NUM_THREADS": 4})
    assert spec.command == ("python", "train.py", "--epochs", "10")
    assert spec.env == {"OMP_NUM_THREADS": "4"}


def test_unknown_top_level_key_lists_valid_keys(tmp_path: Path) -> None:
    err = load_error(tmp_path, "name: x\ncommand: [a]\nresource: {nodes: 2}\n")
    text = str(err)
    assert "resource: unknown key 'resource' (did you mean 'resources'?)" in text
    assert (
        "valid keys at the top level: name, command, script, args, workdir, env, launcher" in text
    )
    assert err.hint is not None
    assert "resources" in err.hint


def test_unknown_nested_key_lists_that_levels_keys(tmp_path: Path) -> None:
    err = load_error(tmp_path, "name: x\ncommand: [a]\nresources: {gpus: 2}\n")
    text = str(err)
    assert "resources.gpus: unknown key 'gpus'" in text
    assert (
        "valid keys at resources: nodes, gpus_per_node, gpu_type, cpus_per_task, cpus_per_gpu, "
        "mem, time, constraint, exclusive" in text
    )


def test_field_path_and_problem(tmp_path: Path) -> None:
    err = load_error(tmp_path, "name: x\ncommand: [a]\nresources: {gpus_per_node: -1}\n")
    assert "resources.gpus_per_node: Input should be greater than or equal to 0 (got -1)" in str(
        err
    )


def test_several_errors_are_all_listed(tmp_path: Path) -> None:
    err = load_error(tmp_path, "command: []\ntier: urgent\n")
    text = str(err)
    assert "3 invalid fields" in text
    assert "name: required but missing" in text
    assert "command:" in text
    assert "tier: Input should be 'critical', 'high', 'medium' or 'low' (got 'urgent')" in text


def test_missing_file() -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec("/nonexistent/job.yaml")


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    err = load_error(tmp_path, "name: x\ncommand: [a\nenv: {}\n")
    assert "YAML syntax error" in str(err)
    assert "line 3" in str(err)


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    err = load_error(tmp_path, "- a\n- b\n")
    assert "expected a mapping" in str(err)


def test_command_as_shell_string_is_explained(tmp_path: Path) -> None:
    err = load_error(tmp_path, "name: x\ncommand: python train.py\n")
    assert "command: must be a list of arguments" in str(err)


@pytest.mark.parametrize(
    ("fields", "path", "words"),
    [
        ({"name": "two\nlines"}, "name", "one line"),
        ({"name": "  "}, "name", "blank"),
        ({"name": "my-hetjob"}, "name", "heterogeneous"),
        ({"command": ["-v"]}, "command", "the program"),
        ({"command": ["a", "b\x00c"]}, "command", "NUL"),
        ({"env": {"1BAD": "x"}}, "env", "not a valid environment variable name"),
        ({"env": {"SLURM_JOB_ID": "x"}}, "env", "set by Slurm and hpclaunch"),
        ({"env": {"FLAG": True}}, "env.FLAG", "boolean"),
        ({"env": {"LR": 0.1}}, "env.LR", "as a number"),
        ({"launcher": "mpirun"}, "launcher", "Input should be"),
        ({"resources": {"gpu_type": "a100"}}, "resources", "gpus_per_node is 0"),
        ({"resources": {"time": "ten"}}, "resources.time", "not a Slurm time"),
        ({"resources": {"mem": "lots"}}, "resources.mem", "not a memory size"),
        ({"resources": {"nodes": 0}}, "resources.nodes", "greater than or equal to 1"),
        ({"checkpoint": {"signal_lead_time": 70000}}, "checkpoint.signal_lead_time", "65535"),
        ({"project": "my project"}, "project", "pattern"),
    ],
)
def test_invalid_values(tmp_path: Path, fields: dict[str, object], path: str, words: str) -> None:
    import yaml

    data = {"name": "x", "command": ["a"], **fields}
    err = load_error(tmp_path, yaml.safe_dump(data))
    line = next(line for line in str(err).splitlines() if line.startswith(f"  - {path}"))
    assert words in line


def test_model_validate_gives_same_rules() -> None:
    with pytest.raises(pydantic.ValidationError):
        JobSpec.model_validate({"name": "x", "command": ["a"], "extra": 1})


def test_script_with_args() -> None:
    spec = make_spec(command=None, script="run.sh", args=["--n", 3, "a b"])
    assert spec.argv == ("run.sh", "--n", "3", "a b")
    assert make_spec().argv == ("python", "train.py")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"script": "run.sh"}, "give either command (an argv list) or script"),
        ({"command": None}, "not neither"),
        ({"args": ["x"]}, "args go with script"),
        ({"venv": ".venv", "conda": "torch"}, "give venv or conda, not both"),
        ({"conda": "my env"}, "conda"),
        ({"modules": ["cuda; rm -rf ~"]}, "modules[0]"),
        ({"modules": ["$(x)"]}, "modules[0]"),
    ],
)
def test_one_way_to_run_and_environments(
    tmp_path: Path, fields: dict[str, object], words: str
) -> None:
    data = {"name": "x", "command": ["a"], **fields}
    err = load_error(tmp_path, yaml.safe_dump(data))
    assert words in str(err)


def test_modules_and_conda() -> None:
    spec = make_spec(modules=["cuda/12.1", "PrgEnv-gnu", "gcc@11.2"], conda="/opt/envs/torch-2")
    assert spec.modules == ("cuda/12.1", "PrgEnv-gnu", "gcc@11.2")
    assert spec.conda == "/opt/envs/torch-2"


def test_resources_constraint_exclusive_cpus_per_gpu() -> None:
    res = make_spec(
        resources={
            "gpus_per_node": 2,
            "cpus_per_gpu": 6,
            "constraint": "a&[b|c]",
            "exclusive": True,
        }
    ).resources
    assert (res.cpus_per_gpu, res.cpus_per_node, res.constraint, res.exclusive) == (
        6,
        12,
        "a&[b|c]",
        True,
    )


@pytest.mark.parametrize(
    ("resources", "words"),
    [
        ({"gpus_per_node": 1, "cpus_per_gpu": 2, "cpus_per_task": 2}, "not both"),
        ({"cpus_per_gpu": 2}, "gpus_per_node is 0"),
        ({"constraint": "a b"}, "resources.constraint"),
    ],
)
def test_bad_resources(tmp_path: Path, resources: dict[str, object], words: str) -> None:
    err = load_error(
        tmp_path, yaml.safe_dump({"name": "x", "command": ["a"], "resources": resources})
    )
    assert words in str(err)


def test_dependencies() -> None:
    spec = make_spec(dependencies=[{"job": 12}, {"job": "13_4", "type": "afterany"}])
    assert [(d.job, d.type) for d in spec.dependencies] == [("12", "afterok"), ("13_4", "afterany")]


def test_bad_dependency_names_its_path(tmp_path: Path) -> None:
    text = "name: x\ncommand: [a]\ndependencies: [{job: 1}, {job: abc, type: before}]\n"
    err = str(load_error(tmp_path, text))
    assert "dependencies[1].job: String should match pattern" in err
    assert (
        "dependencies[1].type: Input should be 'afterok', 'afterany', 'afternotok' or 'after'"
        in err
    )


def test_sbatch_extra_allowed() -> None:
    extra = {"--nice": 10, "--begin=now": None, "-w": "n1", "mail-type": "END"}
    assert make_spec(sbatch_extra=extra).sbatch_extra == {
        "--nice": "10",
        "--begin=now": None,
        "-w": "n1",
        "mail-type": "END",
    }


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("--qos", "'--qos' is set by hpclaunch: use tier"),
        ("-q", "sbatch reads '-q' as --qos"),
        ("--output", "use output_dir"),
        ("-o", "use output_dir"),
        ("--requeue", "use tier and checkpoint.max_requeues"),
        ("-p", "as --partition) is set by hpclaunch"),
        ("-pdebug", "as --partition"),
        ("--part", "sbatch reads '--part' as --partition"),
        ("--qos=high", "sbatch reads '--qos=high' as --qos"),
        ("--time=10", "use resources.time"),
        ("--gres", "use resources.gpus_per_node"),
        ("--gpus", "use resources.gpus_per_node"),
        ("--mem-per-cpu", "use resources.mem"),
        ("--dependency", "use dependencies"),
        ("-d", "use dependencies"),
        ("--signal", "use checkpoint.signal"),
        ("--chdir", "use workdir"),
        ("-J", "use name"),
        ("-A", "use project"),
        ("--exclusive", "use resources.exclusive"),
        ("-C", "use resources.constraint"),
        ("-y", "sbatch has no short option -y"),
        ("---x", "is not an sbatch option"),
    ],
)
def test_sbatch_extra_conflicts_name_our_field(tmp_path: Path, key: str, words: str) -> None:
    text = yaml.safe_dump({"name": "x", "command": ["a"], "sbatch_extra": {key: "v"}})
    if "=" in key:
        text = yaml.safe_dump({"name": "x", "command": ["a"], "sbatch_extra": {key: None}})
    err = load_error(tmp_path, text)
    assert "sbatch_extra: " in str(err)
    assert words in str(err)


def test_sbatch_extra_value_twice(tmp_path: Path) -> None:
    text = yaml.safe_dump({"name": "x", "command": ["a"], "sbatch_extra": {"--nice=1": 2}})
    assert "the value is given twice" in str(load_error(tmp_path, text))


def test_sbatch_extra_repeated_spelling(tmp_path: Path) -> None:
    extra = {"-w": "n1", "--nodelist": "n2"}
    text = yaml.safe_dump({"name": "x", "command": ["a"], "sbatch_extra": extra}, sort_keys=False)
    assert "'--nodelist' repeats '-w'" in str(load_error(tmp_path, text))
