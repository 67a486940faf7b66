"""Issue 49: ``elastic.batch: adaptive`` live. An elastic job (nodes 1 or 2, one rank each,
global batch 16, at most 8 per rank, up to 256) trains on 1 node, then is resized to 2.
Its trainer (tests/integration/tiny_trainer.py) takes 0.05 s per pass plus 0.002 s per
sample, and 0.05 s of sync on 2 ranks; on 2 ranks it reports gradient statistics of noise
scale 400 samples; every rank calls ``runtime.replan_batch`` every 20 steps (srun's ranks,
without a process group: rank 0's plan reaches rank 1 through the control directory).

Checked on the cluster, from the job's own ledger and logs:
* both attempts start at the submitted batch (one shape measured says nothing of a pass's
  fixed cost or the sync: the model's prior is all per-sample), and re-plans at 1 node
  keep it;
* at 2 nodes a re-plan within the attempt, with two shapes measured, takes a larger global
  batch, and scales the learning rate by its statistical efficiency from the statistics
  the ledger recorded for the window before it (``batch_measured``);
* every sample of the stream is trained once: the cursors of the steps trained, attempt
  after attempt, tile the stream without a gap or an overlap, across the batch sizes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpclaunch.scheduling.throughput import efficiency

from .conftest import Cli, wait_gone, wait_progress, wait_running

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
TRAINER = str(REPO / "tests/integration/tiny_trainer.py")
VENV = str(REPO / ".venv")
NOISE = 400.0
STEPS = 120  # about 50 at 1 node, the rest at 2 (about 30 s at the grown batch)


def _resize(cli: Cli, job_id: str, nodes: int) -> str:
    out = cli("resize", job_id, "--nodes", str(nodes), "--wait", "120", "--force", timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


PLAN = r"(\d+) ranks x (\d+) x (\d+) = (\d+), lr x([\d.]+)"


def _plans(log: str, what: str) -> list[tuple[int, ...]]:
    """(step, world, per rank, accumulation, global) of each plan said after ``what`` (a
    pattern whose one group is the step, or none: 0); the lr factor apart."""
    found = re.findall(rf"^{what}: {PLAN}$", log, re.MULTILINE)
    return [tuple(int(v) for v in (m if len(m) == 6 else ("0", *m))[:5]) for m in found]


def _lr(log: str, step: int) -> float:
    return float(re.findall(rf"^replan at step {step}: {PLAN}$", log, re.MULTILINE)[0][4])


def test_an_adaptive_batch_grows_within_an_attempt_once_its_overheads_are_measured(
    hpclaunch: Cli, write_spec: Any
) -> None:
    spec = write_spec(
        command=["python", TRAINER, "--steps", str(STEPS), "--sleep", "0.05", "--per-sample",
                 "0.002", "--sync", "0.05", "--noise", str(NOISE), "--elastic",
                 "--replan-every", "20"],
        launcher="srun",
        processes_per_node=1,
        venv=VENV,
        tier="medium",
        resources={"nodes": 1, "gpus_per_node": 0, "time": "00:10:00", "mem": "200M"},
        elastic={"nodes": [1, 2], "global_batch": 16, "max_batch_per_gpu": 8,
                 "batch": "adaptive", "max_global_batch": 256, "min_interval": 0},
    )  # fmt: skip
    out = hpclaunch("submit", str(spec))
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().splitlines()[-1]
    job_dir = Path(hpclaunch.submitted()[job_id]["job_dir"])
    wait_running(job_id, timeout=120)
    wait_progress(job_dir, 45, timeout=120, job_id=job_id)
    _resize(hpclaunch, job_id, 2)
    wait_gone([job_id], timeout=300, every=1)

    log = hpclaunch.log(job_id)
    starts = [p[1:] for p in _plans(log, "plan")]
    assert starts == [(1, 8, 2, 16), (2, 8, 1, 16)], log
    replans = [p for p in _plans(log, r"replan at step (\d+)") if p[4] != 16]
    assert replans, log
    step, world, per_rank, accumulation, grown = replans[0]
    lr = _lr(log, step)
    assert world == 2
    assert grown == world * per_rank * accumulation <= 256

    ledger = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    ends = [e for e in ledger if e.get("event") == "attempt_end"]
    assert [e["reason"] for e in ends] == ["resized", "success"], ends
    assert (ends[0]["world_size"], ends[0]["per_rank_batch"], ends[0]["accumulation"]) == (1, 8, 2)
    windows = [e for e in ledger if e.get("event") == "batch_measured"]
    assert {(e["attempt"], e["world_size"]) for e in windows} >= {(0, 1), (1, 2)}, windows
    (before,) = [e for e in windows if e["attempt"] == 1 and e["step"] == int(step)]
    assert (before["per_rank_batch"], before["accumulation"]) == (8, 1)
    # One rank a node without accumulation measures the noise exactly here; one node (one
    # rank accumulating the whole batch) has nothing to compare.
    assert (before["grad_sqr"], before["grad_var"]) == (pytest.approx(1.0), pytest.approx(NOISE))
    assert "grad_var" not in ends[0]
    assert lr == pytest.approx(efficiency(grown, 16, 1.0, NOISE / 16), rel=1e-3)
    assert lr > 1.0

    # Each sample once: the steps trained (the last attempt's word on a step wins: a step
    # redone after the resize replays the same cursor range) tile [0, end).
    spans: dict[int, tuple[int, int]] = {}
    for attempt in range(2):
        for line in (job_dir / f"cursor-attempt-{attempt}.log").read_text().splitlines():
            number, first, after = map(int, line.split())
            spans[number] = (first, after)
    assert sorted(spans) == list(range(1, STEPS + 1))
    cursor = 0
    for number in range(1, STEPS + 1):
        assert spans[number][0] == cursor, (number, spans[number])
        cursor = spans[number][1]
    assert spans[int(step) + 1][1] - spans[int(step) + 1][0] == grown
