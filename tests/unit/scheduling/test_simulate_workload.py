"""Synthetic workloads (seeded, at the asked load), CSV traces, and the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hpclaunch.cli import cli
from hpclaunch.scheduling.simulate.engine import simulate
from hpclaunch.scheduling.simulate.metrics import percentile, run_metrics, summarize
from hpclaunch.scheduling.simulate.model import BE, TE
from hpclaunch.scheduling.simulate.policies import make_policy
from hpclaunch.scheduling.simulate.workload import (
    WorkloadParams,
    copy_jobs,
    generate,
    offered_load,
    read_trace,
    write_trace,
)
from tests.unit.conftest import loaded_after

SAMPLE = (
    Path(__file__).parents[3]
    / "hpclaunch"
    / "scheduling"
    / "simulate"
    / "data"
    / "sample-trace.csv"
)


def fields(jobs: list) -> list[tuple]:  # type: ignore[type-arg]
    return [
        (j.id, j.submit, j.gpus, j.nodes, j.duration, j.cls, j.tier, j.ckpt_interval) for j in jobs
    ]


def test_same_seed_same_workload_and_same_results() -> None:
    params = WorkloadParams(jobs=300)
    a, b = generate(params, 7), generate(params, 7)
    assert fields(a) == fields(b)
    assert fields(a) != fields(generate(params, 8))
    runs = [run_metrics(simulate(copy_jobs(a), make_policy("ours"))) for _ in range(2)]
    assert runs[0] == runs[1]


def test_generator_distributions_and_load() -> None:
    jobs = generate(WorkloadParams(jobs=2000, load=0.9), 1)
    assert offered_load(jobs, 256) == pytest.approx(0.9)
    te = [j for j in jobs if j.cls == TE]
    be = [j for j in jobs if j.cls == BE]
    assert 0.7 < len(te) / len(jobs) < 0.8
    assert {j.gpus for j in te} == {1, 2}
    assert all(60 <= j.duration <= 3600 for j in te)
    assert {j.gpus for j in be} == {1, 2, 4, 8, 16, 32}
    assert {j.nodes for j in be if j.gpus > 8} == {2, 4}
    assert all(600 <= j.duration <= 86400 for j in be)


def test_csv_round_trip(tmp_path: Path) -> None:
    jobs = generate(WorkloadParams(jobs=50), 3)
    path = tmp_path / "t.csv"
    write_trace(jobs, path)
    assert fields(read_trace(path)) == fields(jobs)


def test_minimal_trace_columns_get_defaults(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("submit,gpus,duration\n0,1,600\n5,16,7200\n")
    small, big = read_trace(path)
    assert (small.cls, small.nodes, small.tier) == (TE, 1, "high")
    assert (big.cls, big.nodes, big.tier) == (BE, 2, "low")
    path.write_text("submit,gpus\n0,1\n")
    with pytest.raises(ValueError, match="missing column"):
        read_trace(path)


def test_sample_trace_ships_and_replays() -> None:
    jobs = read_trace(SAMPLE)
    assert len(jobs) == 400
    assert offered_load(jobs, 64) == pytest.approx(1.0, rel=1e-3)


def test_percentile_and_ci() -> None:
    assert percentile([5, 1, 4, 2, 3], 50) == 3
    assert percentile(list(range(1, 101)), 95) == 95
    s = summarize([1.0, 2.0, 3.0])
    assert s.mean == 2.0
    assert s.ci95 == pytest.approx(4.303 * 1.0 / 3**0.5)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args], prog_name="hpclaunch")


def test_cli_json_shape() -> None:
    result = invoke("--policy", "fifo", "--policy", "ours", "--seeds", "2", "--jobs", "200",
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["policies"]) == {"fifo", "ours"}
    te95 = data["policies"]["ours"]["metrics"]["te_slowdown_p95"]
    assert set(te95) == {"mean", "ci95", "values"}
    assert len(te95["values"]) == 2
    assert "ours_vs_fifo" in data["comparisons_percent"]
    assert data["seeds"] == [1, 2]


def test_cli_table_on_the_sample_and_unknown_policy() -> None:
    result = invoke("--sample", "--gpus", "64", "--seeds", "1", "--policy", "slurm-native")
    assert result.exit_code == 0
    assert "| slurm-native |" in result.output
    result = invoke("--policy", "nope")
    assert result.exit_code == 2
    assert "unknown policy" in result.output


def test_cli_plot_without_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(
        cli,
        ["simulate", "--policy", "fifo", "--seeds", "1", "--jobs", "50", "--plot",
         str(tmp_path / "p.png")],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "hpclaunch[sim]" in result.output


def test_cli_write_trace(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    result = invoke("--write-trace", str(path), "--jobs", "20")
    assert result.exit_code == 0
    assert len(read_trace(path)) == 20


def test_simulate_help_and_engine_are_light() -> None:
    body = (
        "from hpclaunch.cli import main\n"
        "try:\n    main(['simulate', '--help'])\nexcept SystemExit:\n    pass\n"
        "import hpclaunch.scheduling.simulate.report, hpclaunch.scheduling.simulate.engine\n"
        "assert 'matplotlib' not in sys.modules\n"
    )
    assert loaded_after(body) == []


def test_the_clis_default_policies_are_the_librarys() -> None:
    from hpclaunch.cli.simulate import DEFAULT_POLICIES as SHOWN
    from hpclaunch.ops.simulate import DEFAULT_POLICIES

    assert SHOWN == DEFAULT_POLICIES
