"""``hpclaunch simulate --workload pollux-osdi21``: the published workloads from the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from hpclaunch.cli import cli


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args], prog_name="hpclaunch")


def test_the_published_workloads_print_the_artifacts_results_ours_and_the_gate() -> None:
    result = invoke("--workload", "pollux-osdi21", "--policy", "fifo", "--load", "0.5")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "artifact pollux" in out
    assert "artifact tiresias" in out
    assert "fidelity gate: our Tiresias" in out
    assert "MET" in out
    fifo = next(line for line in out.splitlines() if line.strip().startswith("fifo "))
    assert "of our tiresias" in fifo  # the paired ratio


def test_the_published_workloads_as_json() -> None:
    result = invoke("--workload", "pollux-osdi21", "--policy", "tiresias", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["load"] == 1.0
    assert len(data["tiresias"]["workloads"]) == 8
    assert data["fidelity"]["met"] is True


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--workload", "pollux"], "unknown workload 'pollux'"),
        (["--workload", "pollux-osdi21", "--load", "0.7"], "loads: 0.5, 1.0, 1.5, 2.0"),
        (["--workload", "pollux-osdi21", "--policy", "ours"], "policies: fifo"),
        (["--workload", "pollux-osdi21", "--jobs", "10"], "--jobs: only for the synthetic"),
    ],
)
def test_mistakes_get_one_clear_error(args: list[str], says: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output
