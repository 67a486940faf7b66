"""YAML as users write it: unquoted Slurm times are the text written, never base-60 numbers
(PyYAML's YAML 1.1 read ``time: 30:00`` as 1800 minutes), and a key given twice is refused
with both lines, in spec, pipeline, site and user config files alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpclaunch.config.settings import load_user_config
from hpclaunch.config.site import load_site
from hpclaunch.errors import ConfigError, SpecError
from hpclaunch.jobspec.job import load_spec
from hpclaunch.planning.pipeline import load_pipeline
from hpclaunch.planning.render import render
from tests.unit.conftest import HOME, PYTHON, SUBMISSION_ID, make_site

# Every format of sbatch(1) --time, and what sbatch makes of it.
TIMES = [
    ("30", "00:30:00"),  # M: a bare number is minutes
    ("30:00", "00:30:00"),  # M:S, 30 minutes (PyYAML's base 60: 1800 "minutes" = 30 hours)
    ("5:00", "00:05:00"),  # M:S (base 60: 300 minutes = 5 hours)
    ("90:30", "01:30:30"),  # M:S, minutes past 59
    ("1:30:00", "01:30:00"),  # H:M:S (base 60: 5400 minutes = 90 hours)
    ("2-12", "2-12:00:00"),  # D-H
    ("1-06:30", "1-06:30:00"),  # D-H:M
    ("1-06:30:15", "1-06:30:15"),  # D-H:M:S
]


def _spec_file(tmp_path: Path, time: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        f"name: t\ncommand: [python, train.py]\nresources:\n  time: {time}\n", encoding="utf-8"
    )
    return path


@pytest.mark.parametrize("quote", ["", "'", '"'])
@pytest.mark.parametrize(("written", "expected"), TIMES)
def test_every_slurm_time_format_quoted_or_not(
    tmp_path: Path, written: str, expected: str, quote: str
) -> None:
    spec = load_spec(_spec_file(tmp_path, f"{quote}{written}{quote}"))
    assert spec.resources.time == expected
    site = make_site(
        partitions=[{"name": "p", "gpus_per_node": 4, "cpus_per_node": 8, "max_time": "7-00"}]
    )
    from hpclaunch.planning.plan import build_plan

    plan = build_plan(spec, site, submission_id=SUBMISSION_ID, home=HOME, cwd="/tmp", python=PYTHON)
    job = render(plan)
    assert f"--time={expected}" in job.sbatch_argv or f"#SBATCH --time={expected}" in job.script


def test_site_partition_max_time_unquoted(tmp_path: Path) -> None:
    site = Path("site-configs/local.yaml").read_text(encoding="utf-8")
    path = tmp_path / "site.yaml"
    path.write_text(site.replace("max_time: 10 ", "max_time: 10:00 "), encoding="utf-8")
    debug = next(p for p in load_site(path).partitions if p.name == "debug")
    assert debug.max_time_seconds == 600  # 10 minutes, not 600 minutes


def test_pipeline_defaults_time_unquoted(tmp_path: Path) -> None:
    path = tmp_path / "pipe.yaml"
    path.write_text(
        "defaults: {resources: {time: 45:00}}\njobs:\n  - {name: a, command: [echo, a]}\n",
        encoding="utf-8",
    )
    (step,) = load_pipeline(path)
    assert step.spec.resources.time == "00:45:00"


def _assert_duplicate(exc: ConfigError, path: Path, key: str, first: int, second: int) -> None:
    text = str(exc)
    assert str(path) in text
    assert f"key {key!r} is given twice, on line {first} and on line {second}" in text
    assert exc.hint
    assert "keep one" in exc.hint


def test_duplicate_key_in_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "name: t\ncommand: [python, train.py]\nresources:\n  nodes: 1\n"
        "tier: low\nresources:\n  gpus_per_node: 2\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as info:
        load_spec(path)
    _assert_duplicate(info.value, path, "resources", 3, 6)


def test_duplicate_nested_key_in_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: t\ncommand: [x]\nresources:\n  nodes: 1\n  nodes: 2\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    _assert_duplicate(info.value, path, "nodes", 4, 5)


def test_duplicate_key_in_a_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "pipe.yaml"
    path.write_text("jobs:\n  - name: a\n    command: [echo]\n    name: b\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_pipeline(path)
    _assert_duplicate(info.value, path, "name", 2, 4)


def test_duplicate_key_in_a_site(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    text = Path("site-configs/local.yaml").read_text(encoding="utf-8")
    path.write_text(text + "quotas: {research: 2}\n", encoding="utf-8")
    first = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("quotas:"))
    with pytest.raises(ConfigError) as info:
        load_site(path)
    _assert_duplicate(info.value, path, "quotas", first, len(text.splitlines()) + 1)


def test_duplicate_key_in_the_user_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("site: local\nbackend: cli\nsite: other\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_user_config(path)
    _assert_duplicate(info.value, path, "site", 1, 3)


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "x-res: &r {nodes: 1, mem: 1G}\nname: t\ncommand: [x]\nresources:\n  <<: *r\n  nodes: 2\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError, match="x-res"):  # unknown key, not a duplicate
        load_spec(path)


def test_tabs_get_use_spaces(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: t\nresources:\n\tnodes: 1\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in str(info.value)
    assert "line 3" in str(info.value)
    assert info.value.hint == "use spaces, not tabs, to indent YAML"
