"""``hpclaunch schema``: the JSON schema validates the examples and catches mistakes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from hpclaunch.cli import cli
from hpclaunch.planning.schema import pipeline_schema, spec_schema

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(
    p for p in (REPO / "examples").glob("*.yaml") if "jobs" not in yaml.safe_load(p.read_text())
)
PIPELINES = sorted(set((REPO / "examples").glob("*.yaml")) - set(EXAMPLES))


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = spec_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def errors(validator: jsonschema.protocols.Validator, data: dict[str, Any]) -> list[str]:
    return [e.message for e in validator.iter_errors(data)]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(validator: jsonschema.protocols.Validator, path: Path) -> None:
    assert errors(validator, yaml.safe_load(path.read_text())) == []


def test_yaml_numbers_where_hpclaunch_accepts_them(
    validator: jsonschema.protocols.Validator,
) -> None:
    data = {
        "name": "x",
        "command": ["python", "t.py", "--epochs", 10],
        "env": {"OMP_NUM_THREADS": 4},
        "resources": {"mem": 1000, "time": 30},
        "dependencies": [{"job": 12}],
        "sbatch_extra": {"--nice": 10, "--hold": None},
    }
    assert errors(validator, data) == []


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"name": "x", "command": ["a"], "resource": {}}, "'resource' was unexpected"),
        ({"name": "x", "command": ["a"], "resources": {"gpus": 1}}, "'gpus' was unexpected"),
        ({"name": "x"}, "is not valid under any of the given schemas"),
        ({"name": "x", "command": ["a"], "script": "s.sh"}, "is valid under each of"),
        ({"name": "x", "command": ["a"], "tier": "urgent"}, "'urgent' is not one of"),
        ({"name": "x", "command": ["a"], "dependencies": [{"job": "1", "type": "b"}]}, "'b'"),
    ],
)
def test_mistakes_are_caught(
    validator: jsonschema.protocols.Validator, data: dict[str, Any], words: str
) -> None:
    assert any(words in message for message in errors(validator, data))


def test_descriptions_for_editors() -> None:
    props = spec_schema()["properties"]
    assert isinstance(props, dict)
    assert "sbatch_extra" in props
    assert "refused" in props["sbatch_extra"]["description"]
    assert props["command"]["examples"] == [["python", "train.py", "--lr", "0.1"]]


def test_command_prints_the_schema_and_explains_the_editor_setup() -> None:
    result = CliRunner().invoke(cli, ["schema"], prog_name="hpclaunch")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads(json.dumps(spec_schema()))
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    help_text = CliRunner().invoke(cli, ["schema", "--help"]).stdout
    assert "# yaml-language-server: $schema=" in help_text


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_pipeline_examples_are_valid(path: Path) -> None:
    schema = pipeline_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    assert errors(validator, yaml.safe_load(path.read_text())) == []
    bad = {"jobs": [{"name": "a", "command": ["x"], "after": [{"job": "b", "when": "maybe"}]}]}
    assert errors(validator, bad)  # "... is not valid under any of the given schemas"
    good = {"jobs": [{"name": "a", "command": ["x"], "after": ["b", {"job": "c", "when": "any"}]}]}
    assert errors(validator, good) == []
    assert "$defs" in json.loads(CliRunner().invoke(cli, ["schema", "--pipeline"]).stdout)
