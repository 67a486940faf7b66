"""Pipelines on the real local cluster: a train → eval → export chain runs in order, and an
eval after a failed train never starts (Slurm cancels it) and ``status`` says why."""

from __future__ import annotations

import itertools
import json
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Run, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}


def step(name: str, out: Path, *, exit_code: int = 0, **fields: Any) -> dict[str, Any]:
    """A CPU-only job that appends '<name> <start> <end>' (epoch ns) to ``out``."""
    line = f'echo "{name} $s $(date +%s%N)" >> {out}'
    script = f"s=$(date +%s%N); sleep 2; {line}; exit {exit_code}"
    return {"name": name, "command": ["bash", "-c", script], **fields}


def write(path: Path, *jobs: dict[str, Any]) -> Path:
    data = {
        "defaults": {
            "project": "research",
            "resources": {"cpus_per_task": 1, "mem": "100M", "time": "00:05:00"},
        },
        "jobs": list(jobs),
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sacct(*job_ids: str) -> dict[str, dict[str, str]]:
    fields = ["JobID", "State", "Start", "End", "Elapsed", "NodeList", "Reason"]
    out = subprocess.run(
        [
            "sacct",
            "-X",
            "--noheader",
            "--parsable2",
            f"--jobs={','.join(job_ids)}",
            f"--format={','.join(fields)}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]
    return {row["JobID"]: row for row in rows}


def test_train_eval_export_run_in_order(hpclaunch: Run, tmp_path: Path, shared_dir: Path) -> None:
    out = shared_dir / "order.txt"
    path = write(
        tmp_path / "pipeline.yaml",
        step("export", out, after=["eval"]),  # the file's order does not matter
        step("train", out),
        step("eval", out, after=[{"job": "train", "when": "ok"}]),
    )
    done = hpclaunch("submit", "--wait", str(path), timeout=90)
    assert done.returncode == 0, done.stderr
    train, evaluate, export = done.stdout.split()
    assert f"train → {train}\n" in done.stderr
    assert f"eval → {evaluate}  after afterok:train\n" in done.stderr
    assert f"export → {export}  after afterok:eval\n" in done.stderr

    lines = [line.split() for line in out.read_text().splitlines()]
    assert [name for name, _, _ in lines] == ["train", "eval", "export"]
    for (_, _, end), (_, start, _) in itertools.pairwise(lines):
        assert int(start) > int(end)  # each started after the one before had written

    accounted = sacct(train, evaluate, export)
    assert {row["State"] for row in accounted.values()} == {"COMPLETED"}
    for before, after in ((train, evaluate), (evaluate, export)):
        end = datetime.fromisoformat(accounted[before]["End"])
        assert datetime.fromisoformat(accounted[after]["Start"]) >= end


def test_eval_after_a_failed_train_never_starts(
    hpclaunch: Run, tmp_path: Path, shared_dir: Path
) -> None:
    out = shared_dir / "order.txt"
    path = write(
        tmp_path / "pipeline.yaml",
        step("train", out, exit_code=1),
        step("eval", out, after=["train"]),
    )
    done = hpclaunch("submit", str(path))
    assert done.returncode == 0, done.stderr
    train, evaluate = done.stdout.split()

    assert wait_state(hpclaunch, train, FINAL)["state"] == "FAILED"
    info = wait_state(hpclaunch, evaluate, FINAL, timeout=30)
    # Slurm 22.05 with --kill-on-invalid-dep=yes: cancelled, never pending for ever.
    assert info["state"] == "CANCELLED"
    assert info["reason"] == f"never ran: train (job {train}) FAILED, exit code 1"

    accounted = sacct(train, evaluate)
    assert accounted[evaluate]["State"] == "CANCELLED"
    assert accounted[evaluate]["Elapsed"] == "00:00:00"
    assert accounted[evaluate]["NodeList"] == "None assigned"  # it never had a node
    assert [line.split()[0] for line in out.read_text().splitlines()] == ["train"]

    table = hpclaunch("status", evaluate)
    assert table.returncode == 0, table.stderr
    assert f"never ran: train (job {train}) FAILED, exit code 1" in table.stdout
    print(table.stdout)  # shown with pytest -s: the real table
    raw = json.loads(hpclaunch("status", train, "--json").stdout)
    assert raw[0]["state"] == "FAILED"
