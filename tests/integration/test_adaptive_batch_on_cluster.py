"""Issue 49: ``elastic.batch: adaptive`` live. An elastic job (nodes 1 or 2, one rank each,
global batch 16, at most 8 per rank, up to 256) trains on 2 nodes, is resized to 1, then
back to 2. Its trainer (tests/integration/tiny_trainer.py) takes 0.05 s per pass plus
0.002 s per sample, and 0.05 s of sync on 2 ranks, and reports gradient statistics of noise
scale 400 samples.

Checked on the cluster, from the job's own ledger and logs:
* the first two attempts plan the submitted batch (one shape measured says nothing of a
  pass's fixed cost: the model's prior is all per-sample);
* the ledger keeps each attempt's plan, speed and gradient statistics;
* the third attempt, with two shapes measured, plans a larger global batch, and scales its
  learning rate by that batch's statistical efficiency from the ledger's statistics;
* every sample of the stream is trained once: the cursors of the steps trained, attempt
  after attempt, tile the stream without a gap or an overlap, across three batch sizes.
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
STEPS = 130  # about 40 at 2 nodes, 40 at 1, the rest (about 20 s) at the grown batch


def _resize(cli: Cli, job_id: str, nodes: int) -> str:
    out = cli("resize", job_id, "--nodes", str(nodes), "--wait", "120", "--force", timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_an_adaptive_batch_grows_once_its_overheads_are_measured_and_trains_each_sample_once(
    hpclaunch: Cli, write_spec: Any
) -> None:
    spec = write_spec(
        command=["python", TRAINER, "--steps", str(STEPS), "--sleep", "0.05", "--per-sample",
                 "0.002", "--sync", "0.05", "--noise", str(NOISE), "--elastic"],
        launcher="srun",
        processes_per_node=1,
        venv=VENV,
        tier="medium",
        resources={"nodes": 2, "gpus_per_node": 0, "time": "00:10:00", "mem": "200M"},
        elastic={"nodes": [1, 2], "global_batch": 16, "max_batch_per_gpu": 8,
                 "batch": "adaptive", "max_global_batch": 256, "min_interval": 0},
    )  # fmt: skip
    out = hpclaunch("submit", str(spec))
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().splitlines()[-1]
    job_dir = Path(hpclaunch.submitted()[job_id]["job_dir"])
    wait_running(job_id, timeout=120)
    wait_progress(job_dir, 30, timeout=120, job_id=job_id)
    said = _resize(hpclaunch, job_id, 1)
    shrunk_at = int(re.findall(r"checkpoint step (\d+)", said)[0])
    wait_progress(job_dir, shrunk_at + 30, timeout=180, job_id=job_id)
    said = _resize(hpclaunch, job_id, 2)
    wait_gone([job_id], timeout=300, every=1)

    log = hpclaunch.log(job_id)
    plans = re.findall(r"plan: (\d+) ranks x (\d+) x (\d+) = (\d+), lr x([\d.]+)", log)
    assert [p[0] for p in plans[:3]] == ["2", "1", "2"], log
    assert [int(p[3]) for p in plans[:2]] == [16, 16], plans  # nothing learned of overheads
    world, per_rank, accumulation, chosen, lr = plans[2]
    assert int(chosen) > 16, plans
    assert int(chosen) == int(world) * int(per_rank) * int(accumulation) <= 256

    ledger = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    ends = [e for e in ledger if e.get("event") == "attempt_end"]
    assert [e["reason"] for e in ends] == ["resized", "resized", "success"], ends
    for end, plan in zip(ends, plans, strict=True):
        assert end["world_size"] == int(plan[0])
        assert (end["per_rank_batch"], end["accumulation"]) == (int(plan[1]), int(plan[2]))
        assert end["samples_per_s"] > 0
    # One rank without accumulation at 2 nodes measures the noise; 1 node (one rank,
    # accumulating the whole batch) has nothing to compare. The statistics are exact here.
    assert ends[0]["grad_sqr"] == pytest.approx(1.0)
    assert ends[0]["grad_var"] == pytest.approx(NOISE)
    gain = efficiency(int(chosen), 16, 1.0, NOISE / 16)
    assert float(lr) == pytest.approx(gain, rel=1e-3)
    assert float(lr) > 1.0

    # Each sample once: the steps trained, last attempt's word on a step wins (a step
    # redone after a resize replays the same cursor range), tile [0, end).
    spans: dict[int, tuple[int, int]] = {}
    for attempt in range(3):
        for line in (job_dir / f"cursor-attempt-{attempt}.log").read_text().splitlines():
            step, before, after = map(int, line.split())
            spans[step] = (before, after)
    assert sorted(spans) == list(range(1, STEPS + 1))
    cursor = 0
    for step in range(1, STEPS + 1):
        before, after = spans[step]
        assert before == cursor, (step, spans[step])
        cursor = after
    sizes = {after - before for before, after in spans.values()}
    assert sizes == {16, int(chosen)}, sizes
