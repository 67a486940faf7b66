"""Spec and site YAML go through libyaml when PyYAML has it, with the same data and the same
error texts (line, column and words) as the pure-Python ``yaml.safe_load``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpclaunch import _validation
from hpclaunch._validation import read_yaml_mapping
from hpclaunch.errors import SpecError

DOCUMENT = """\
name: "x y"
on: yes
off: no
nothing: ~
day: 2026-11-22
octal: 0o17
old_octal: 017
float: 1e3
list: [1, "2", {a: b}]
anchor: &a {k: v}
alias: *a
block: |
  two
  lines
"""


def test_libyaml_is_used_when_pyyaml_has_it() -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml")
    assert _validation._FAST_BASE is yaml.CSafeLoader
    assert issubclass(_validation._FAST_LOADER, yaml.CSafeLoader)


def test_same_data_as_safe_load(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(DOCUMENT)
    assert read_yaml_mapping(path, SpecError, "spec") == yaml.safe_load(DOCUMENT)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # libyaml says "did not find expected ',' or ']'".
        (
            "name: x\ncommand: [a\nenv: {}\n",
            "line 3 column 4: YAML syntax error: expected ',' or ']', but got ':'",
        ),
        # libyaml says "found unknown escape character", at column 6.
        ('a: "x\\q"\n', "line 1 column 7: YAML syntax error: found unknown escape character 'q'"),
        ("a: *nope\n", "line 1 column 4: YAML syntax error: found undefined alias 'nope'"),
        ("a: b: c\n", "line 1 column 5: YAML syntax error: mapping values are not allowed here"),
        ("a: \x07\n", "YAML error: unacceptable character #x0007: special characters are not"),
    ],
)
def test_errors_are_worded_as_by_the_python_parser(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        read_yaml_mapping(path, SpecError, "spec")
    assert str(info.value).startswith(
        f"{path}, {message}" if "line" in message else f"{path}: {message}"
    )
