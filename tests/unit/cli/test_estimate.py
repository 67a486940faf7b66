"""``hpclaunch estimate`` and the estimate in ``submit --dry-run`` (fake Slurm; the parse of
sbatch --test-only's real answers is in tests/unit/slurm/test_slurm_recorded.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hpclaunch.ops.estimate import suggest_time
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import assert_clean_error, run
from tests.unit.fakes import FakeSlurm, result


def _spec(tmp_path: Path, time: str = "01:00:00") -> Path:
    spec = tmp_path / "train.yaml"
    spec.write_text(
        f"name: train\ncommand: [python, -c, pass]\nresources: {{time: '{time}'}}\n"
        "project: research\n"
    )
    return spec


def test_estimate_says_slurms_start_and_what_past_runs_of_the_spec_took(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = _spec(tmp_path)
    out = run(env, "estimate", str(spec))
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == [
        "Slurm expects it to start at 2026-11-28T12:40:00 on n1 in partition gpu",
        "no completed run of this spec in the history; its time limit: 1:00:00",
    ]
    assert slurm.submitted == []  # sbatch --test-only, the script on stdin: nothing queued
    assert slurm.tested == [("sbatch", "--test-only")]
    # Three runs of the same spec completed, in 2 to 4 minutes.
    for elapsed in ("00:02:00", "00:04:00", "00:03:00"):
        slurm.new_job_states = ["COMPLETED"]
        assert run(env, "submit", str(spec)).exit_code == 0
        slurm.jobs[str(slurm.next_id - 1)].elapsed = elapsed
    # Another spec of the same name is not the same spec.
    other = tmp_path / "other"
    other.mkdir()
    assert run(env, "submit", str(_spec(other, "00:30:00"))).exit_code == 0
    out = run(env, "estimate", str(spec))
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[1] == (
        "3 completed runs of the same spec ran 2:00 to 4:00 (median 3:00); its time limit: 1:00:00"
    )
    assert lines[2].startswith("suggested: --time 10:00 (resources.time)")
    data = json.loads(run(env, "estimate", str(spec), "--json").stdout)
    assert [p["ran_s"] for p in data["past"]] == [180, 240, 120]  # newest first
    assert data["suggested_time"] == 600
    assert data["slurm"]["nodes"] == "n1"
    # --set changes the spec: its own history (none), and the limit asked
    out = run(env, "estimate", str(spec), "--set", "resources.time=00:05:00")
    assert "its time limit: 5:00" in out.stdout
    assert "suggested" not in out.stdout


def test_dry_run_prints_the_estimate_unless_it_does_not_ask_the_cluster(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = _spec(tmp_path)
    out = run(env, "submit", "--dry-run", str(spec))
    assert out.exit_code == 0, out.output
    assert "# estimate:\n#   Slurm expects it to start at 2026-11-28T12:40:00 on n1" in out.stdout
    assert slurm.submitted == []
    out = run(env, "submit", "--dry-run", "--no-check", str(spec))
    assert "# estimate" not in out.stdout
    assert len(slurm.tested) == 1


def test_a_job_slurm_would_refuse_is_a_clean_error(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    def refuse(argv: tuple[str, ...]) -> CommandResult:
        return result(
            argv,
            1,
            err="sbatch: error: Batch job submission failed: Requested node configuration "
            "is not available\n",
        )

    slurm._sbatch = refuse  # type: ignore[method-assign]
    out = run(env, "estimate", str(_spec(tmp_path)))
    assert_clean_error(out, 1, "Requested node configuration is not available")
    assert "Slurm would refuse job 'train'" in out.stderr


def test_a_time_limit_is_suggested_only_far_above_the_runs() -> None:
    assert suggest_time(4 * 3600, [600, 1200]) == 1800  # 1.5 x 20 min
    assert suggest_time(3600, [2000]) is None  # under twice the run
    assert suggest_time(1500, [700]) is None  # under 15 minutes spare
    assert suggest_time(None, [600]) is None  # the partition's limit: not known here
    assert suggest_time(3600, []) is None


def test_estimate_takes_quota_as_submit_does(
    env: dict[str, str], slurm: FakeSlurm, tmp_path: Path
) -> None:
    """Issue 45: estimate had no --quota strict (submit and sweep have it)."""
    spec = _spec(tmp_path)
    for quota in ("strict", "allow"):
        out = run(env, "estimate", "--quota", quota, str(spec))
        assert out.exit_code == 0, out.output
        assert out.stdout.startswith("Slurm expects it to start at ")
    assert run(env, "estimate", "--quota", "sometimes", str(spec)).exit_code == 2
