"""hpclaunch.runtime across 2 real processes (torch.distributed, gloo on CPU).

The ranks must agree on the checkpoint step even when only one of them has seen the request,
commit once (rank 0 writes, the other waits), and never hang when one rank's save fails;
a full disk on rank 0 is the same CheckpointWriteError on both.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

WORKER = r"""
import json, os, sys, time
from pathlib import Path
import torch.distributed as dist
from hpclaunch import runtime
from hpclaunch.errors import SupervisorError

rank, out, shared = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + sys.argv[4], rank=rank, world_size=2)
result = {"rank": rank, "distributed": runtime.is_distributed(), "world": runtime.world_size()}

# Part 1: only rank 1's control dir holds a request; the ranks must still agree at step 1.
result["first"] = next(s for s in range(1, 10) if runtime.should_checkpoint(s, every=100))
result["requested"] = runtime.checkpoint_requested()
result["first_reason"] = runtime.current_request().reason
writes = []
def save(tmp):
    writes.append(rank)
    (tmp / "state.bin").write_bytes(b"x" * 100)
result["path"] = str(runtime.commit_checkpoint(result["first"], save))
result["writes"] = writes
# all_ranks: the same tmp dir on every rank, each writes its shard
def shard(tmp):
    (tmp / f"shard-{rank}.bin").write_bytes(bytes([rank]) * 10)
runtime.commit_checkpoint(2, shard, all_ranks=True)
# a failure on rank 0 reaches rank 1 instead of hanging it
def broken(tmp):
    raise RuntimeError("disk full")
try:
    runtime.commit_checkpoint(3, broken)
except SupervisorError as exc:
    result["error"] = "SupervisorError: " + str(exc)
except RuntimeError as exc:
    result["error"] = "RuntimeError: " + str(exc)
# a full disk on rank 0 (its save writes through a link to /dev/full: the kernel's ENOSPC)
# is a CheckpointWriteError with the errno on both ranks; nothing is committed
def full(tmp):
    (tmp / "state.bin").symlink_to("/dev/full")
    with open(tmp / "state.bin", "wb") as f:
        f.write(b"x" * 8192)
        f.flush()
try:
    runtime.commit_checkpoint(4, full)
except runtime.CheckpointWriteError as exc:
    result["full"] = [exc.errno, str(exc)]
runtime.barrier()
# Part 2: both ranks watch one request file, written by the test mid-run; rank 1 looks rarely.
os.environ["HPCLAUNCH_CONTROL_DIR"] = shared
interval = 0.05 if rank == 0 else 1.5
for step in range(1, 2000):
    time.sleep(0.01)
    runtime.report_progress(step, min_interval=0)
    local_before = runtime.current_request(min_interval=interval) is not None
    if runtime.should_checkpoint(step, min_interval=interval):
        result["step"], result["local_before"] = step, local_before
        result["reason"] = runtime.current_request().reason
        break
out.write_text(json.dumps(result))
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """Both parts of WORKER in one launch (a torch start-up costs seconds on 2 cores)."""
    tmp = tmp_path_factory.mktemp("dist")
    (tmp / "control-1").mkdir()
    (tmp / "control-1" / "checkpoint-request.json").write_text(
        json.dumps({"reason": "preemption", "requested_at": time.time(), "deadline": 0})
    )
    (tmp / "worker.py").write_text(WORKER)
    shared = tmp / "control"
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, HPCLAUNCH_JOB_DIR=str(tmp))
        env["HPCLAUNCH_CONTROL_DIR"] = str(tmp / f"control-{rank}")
        env.pop("RANK", None)
        argv = [sys.executable, str(tmp / "worker.py"), str(rank), str(tmp / f"out{rank}.json")]
        procs.append(subprocess.Popen([*argv, str(shared), str(tmp / "pg")], env=env))
    deadline = time.monotonic() + 60
    progress = shared / "progress.json"
    while not (progress.exists() and json.loads(progress.read_text())["step"] >= 20):
        assert time.monotonic() < deadline, "the workers never reached part 2"
        time.sleep(0.02)
    tmp_file = shared / ".req.tmp"
    tmp_file.write_text(
        json.dumps({"reason": "manual", "requested_at": time.time(), "deadline": 0})
    )
    os.rename(tmp_file, shared / "checkpoint-request.json")
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    return tmp, [json.loads((tmp / f"out{rank}.json").read_text()) for rank in (0, 1)]


def test_ranks_agree_commit_once_and_share_failures(
    run: tuple[Path, list[dict[str, Any]]],
) -> None:
    tmp_path, (r0, r1) = run
    lonely = tmp_path / "control-0"  # rank 0 has no request; rank 1's control dir has one
    assert r0["distributed"]
    assert r0["world"] == 2
    assert r0["first"] == r1["first"] == 1
    assert r0["requested"]
    assert r1["requested"]
    # rank 0 cannot see rank 1's request file (control dirs not shared): it knows only that
    # a peer was asked
    assert (r0["first_reason"], r1["first_reason"]) == ("peer", "preemption")
    assert r0["path"] == r1["path"] == str(tmp_path / "checkpoints" / "step-000000001")
    assert (r0["writes"], r1["writes"]) == ([0], [])
    shards = json.loads((tmp_path / "checkpoints" / "step-000000002" / "manifest.json").read_text())
    assert sorted(shards["files"]) == ["shard-0.bin", "shard-1.bin"]
    assert r0["error"] == "RuntimeError: disk full"
    assert r1["error"].startswith("SupervisorError: checkpoint of step 3 was not committed")
    assert not (tmp_path / "checkpoints" / "step-000000003").exists()
    ckpts = tmp_path / "checkpoints"
    assert r0["full"] == [
        errno.ENOSPC,
        f"[Errno 28] checkpoint of step 4 was not written to {ckpts}: No space left on device; "
        f"nothing was committed, the resume point stays step 2 ({ckpts}/step-000000002)",
    ]
    assert r1["full"] == [
        errno.ENOSPC,
        f"[Errno 28] checkpoint of step 4 was not written to {ckpts}: No space left on device "
        "(on another rank); nothing was committed",
    ]
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-000000001", "step-000000002"]
    done = json.loads((lonely / "checkpoint-done.json").read_text())  # rank 0 writes it
    assert done["step"] == 2


def test_concurrent_request_all_ranks_stop_at_one_step(
    run: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, (r0, r1) = run
    assert r0["step"] == r1["step"] >= 20
    # rank 0 (polling every 0.05 s) saw the file first; rank 1 stopped because it agreed
    assert r0["local_before"] is True
    # ... and, told by the reduction, read the shared file for the request's own reason (it
    # recorded "peer" before: the disk-full fault test saw rank 0 record a preemption so)
    assert r0["reason"] == r1["reason"] == "manual"
