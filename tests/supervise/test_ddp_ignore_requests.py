"""examples/ddp_train.py --ignore-requests: the periodic-only baseline of bench/preemption.py.

One process, no launcher: a checkpoint request is already waiting when training starts. The
normal trainer commits a checkpoint at the first step and stops; with ``--ignore-requests``
it stops at the same step without writing one, and periodic checkpoints still happen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "ddp_train.py"


def train(job: Path, *extra: str) -> str:
    env = dict(os.environ, HPCLAUNCH_JOB_DIR=str(job), HPCLAUNCH_ATTEMPT="0")
    for name in ("HPCLAUNCH_CONTROL_DIR", "HPCLAUNCH_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    argv = [sys.executable, str(TRAINER), "--steps", "30", "--every", "10", "--sleep", "0"]
    out = subprocess.run(
        [*argv, *extra], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def steps(job: Path) -> list[int]:
    return [int(x) for x in (job / "steps-attempt-0.log").read_text().split()]


def checkpoints(job: Path) -> list[str]:
    return sorted(p.name for p in (job / "checkpoints").glob("step-*"))


def test_a_request_is_honoured_by_default_and_ignored_by_the_baseline(tmp_path: Path) -> None:
    ours, base = tmp_path / "ours", tmp_path / "base"
    for job in (ours, base):
        (job / "control").mkdir(parents=True)
        (job / "control" / "checkpoint-request.json").write_text('{"reason": "preemption"}')
    train(ours)
    out = train(base, "--ignore-requests")
    assert steps(ours) == steps(base) == [1]  # both stop at the first step that looks
    assert checkpoints(ours) == ["step-000000001"]
    assert checkpoints(base) == []  # nothing saved on the request
    assert "ignored, stopping after step 1" in out


def test_the_baseline_keeps_its_periodic_checkpoints(tmp_path: Path) -> None:
    train(tmp_path, "--ignore-requests")  # no request: runs to the end
    assert steps(tmp_path) == list(range(1, 31))
    assert checkpoints(tmp_path) == ["step-000000010", "step-000000020", "step-000000030"]
