"""Preempt a real 4-rank data-parallel trainer (torchrun, gloo) and resume it: the result is
exact (4 ranks: with 2, a reduction order changed by a resume would go unnoticed).

The test plays the sidecar: it writes ``checkpoint-request.json``, waits for
``checkpoint-done.json``, then SIGTERMs torchrun's process group, and starts the next
attempt with ``HPCLAUNCH_ATTEMPT`` one higher (clearing the control files first, as the
sidecar does at the start of an attempt). One chain shows both cases:

* attempt 0 is asked to checkpoint and stops cleanly at the committed step;
* attempt 1 is killed *during* its on-request checkpoint write (``--save-sleep``);
* attempt 2 resumes from the newest complete checkpoint and finishes.

The final weights equal those of an uninterrupted run bit for bit, no committed step is
trained twice, none is skipped, and the half-written checkpoint is never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "examples" / "ddp_train.py"
TORCHRUN = Path(sys.executable).with_name("torchrun")
STEPS, EVERY = 150, 40
ARGS = ["--steps", str(STEPS), "--every", str(EVERY), "--sleep", "0.02"]


def start(job: Path, attempt: int, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HPCLAUNCH_JOB_DIR=str(job), HPCLAUNCH_ATTEMPT=str(attempt))
    env["OMP_NUM_THREADS"] = "1"
    for name in ("HPCLAUNCH_CONTROL_DIR", "HPCLAUNCH_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    argv = [str(TORCHRUN), "--standalone", "--nproc_per_node=4", str(TRAINER), *ARGS, *extra]
    argv += ["--hash-out", str(job / "final.sha256")]
    with (job / f"torchrun-{attempt}.log").open("wb") as log:
        return subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: torchrun starts each worker in a session of its own,
    so killing torchrun's process group does not reach them."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().decode(errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def kill_all(proc: subprocess.Popen[bytes]) -> None:
    for pid in [*descendants(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def finish(proc: subprocess.Popen[bytes], job: Path, attempt: int, timeout: float = 60) -> None:
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all(proc)
        rc = -9
    output = (job / f"torchrun-{attempt}.log").read_text()
    assert rc == 0, f"attempt {attempt} exit {rc}:\n{output[-3000:]}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """What the sidecar does once the checkpoint is committed (or the grace time is up)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        kill_all(proc)


def wait_for(what: str, check: Callable[[], object], timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def trained(job: Path, attempt: int) -> list[int]:
    path = job / f"steps-attempt-{attempt}.log"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def request_checkpoint(job: Path) -> float:
    control = job / "control"
    control.mkdir(exist_ok=True)
    now = time.time()
    data = {"reason": "preemption", "requested_at": now, "deadline": now + 60}
    tmp = control / ".checkpoint-request.json.tmp"
    tmp.write_text(json.dumps(data))
    os.rename(tmp, control / "checkpoint-request.json")
    return now


def new_attempt(job: Path) -> None:
    """The sidecar clears the previous attempt's control files before launching."""
    shutil.rmtree(job / "control", ignore_errors=True)


def committed(job: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in (job / "checkpoints").glob("step-*"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final weights' sha256 of an uninterrupted run."""
    job = tmp_path_factory.mktemp("uninterrupted")
    finish(start(job, 0), job, 0)
    assert trained(job, 0) == list(range(1, STEPS + 1))
    return (job / "final.sha256").read_text().strip()


def test_preempted_and_killed_mid_write_still_bit_for_bit(tmp_path: Path, reference: str) -> None:
    job = tmp_path

    # Attempt 0: a checkpoint request mid-run; the trainer commits and stops at that step.
    proc = start(job, 0)
    wait_for("30 steps", lambda: len(trained(job, 0)) >= 30)
    asked = request_checkpoint(job)
    done_file = job / "control" / "checkpoint-done.json"

    def done() -> dict[str, float] | None:
        data = json.loads(done_file.read_text()) if done_file.exists() else None
        return data if data and data["committed_at"] >= asked else None

    done0 = wait_for("checkpoint-done.json", done)
    assert isinstance(done0, dict)
    stop(proc)
    c0 = int(done0["step"])
    assert trained(job, 0) == list(range(1, c0 + 1))  # nothing trained past the commit
    assert c0 in committed(job)
    assert done0["seconds"] < 5

    # Attempt 1: resumes at c0 + 1; killed while writing its on-request checkpoint.
    new_attempt(job)
    proc = start(job, 1, "--save-sleep", "30")
    wait_for("50 more steps", lambda: len(trained(job, 1)) >= 50)
    request_checkpoint(job)
    ckpts = job / "checkpoints"
    half = wait_for("a half-written checkpoint", lambda: list(ckpts.glob(".tmp-step-*/model.pt")))
    assert isinstance(half, list)
    stop(proc)
    tmp_dir = half[0].parent
    match = re.match(r"\.tmp-step-(\d+)-", tmp_dir.name)
    assert match is not None
    c1 = int(match.group(1))
    assert trained(job, 1) == list(range(c0 + 1, c1 + 1))
    assert tmp_dir.exists()
    assert not (ckpts / f"step-{c1:09d}").exists()
    p1 = max(committed(job))  # the newest complete checkpoint, from before the kill
    assert c0 <= p1 < c1

    # Attempt 2: resumes from p1 (the half-written c1 is ignored) and finishes.
    new_attempt(job)
    finish(start(job, 2), job, 2)
    assert f"attempt 2: starting after step {p1}" in (job / "torchrun-2.log").read_text()
    a0, a1, a2 = trained(job, 0), trained(job, 1), trained(job, 2)
    assert a2 == list(range(p1 + 1, STEPS + 1))
    assert sorted(set(a0 + a1 + a2)) == list(range(1, STEPS + 1))  # none skipped
    redone = sorted(s for s in a1 if s in a2)
    assert redone == list(range(p1 + 1, c1 + 1))  # only work after the newest commit
    assert not set(a0) & set(a1)  # the clean stop lost nothing
    assert (job / "final.sha256").read_text().strip() == reference
    assert not list(ckpts.glob(".tmp-*"))  # the abandoned write was cleaned up
