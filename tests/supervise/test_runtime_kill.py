"""A checkpoint writer SIGKILLed at any moment never leaves a checkpoint that looks complete."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from hpclaunch import runtime

WRITER = r"""
import sys, time
from pathlib import Path
from hpclaunch import runtime

first, pause = int(sys.argv[1]), float(sys.argv[2])
for step in range(first, first + 10_000):
    def save(tmp, step=step):
        for name in ("a.bin", "b.bin", "c.bin"):
            (tmp / name).write_bytes(str(step).encode() * 20_000)
            time.sleep(pause)
    runtime.commit_checkpoint(step, save, keep=2)
"""


def writer(job: Path, first: int, pause: float) -> subprocess.Popen[bytes]:
    script = job / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, HPCLAUNCH_JOB_DIR=str(job))
    for name in ("HPCLAUNCH_CHECKPOINT_DIR", "HPCLAUNCH_CONTROL_DIR", "RANK", "SLURM_PROCID"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, str(script), str(first), str(pause)], env=env)


def wait_for(check: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def assert_sound(ckpt: runtime.Checkpoint) -> None:
    """Every file of the checkpoint holds the state of its own step."""
    for name in ("a.bin", "b.bin", "c.bin"):
        assert (ckpt.path / name).read_bytes() == str(ckpt.step).encode() * 20_000


def test_kill_during_write_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    proc = writer(tmp_path, 1, 10.0)  # each file takes 10 s: the first commit never ends
    wait_for(lambda: list(root.glob(".tmp-step-*/a.bin")))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert runtime.resume_point(root) is None  # nothing complete: a fresh start

    proc = writer(tmp_path, 1, 0.0)  # commits steps 1, 2, ... quickly
    wait_for(lambda: (root / "step-000000003").exists())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ckpt = runtime.resume_point(root)
    assert ckpt is not None
    assert ckpt.step >= 3
    assert_sound(ckpt)
    assert not list(root.glob(".tmp-step-000000001-*"))  # the first, abandoned write: cleaned


def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    rng = random.Random(5)
    last = 0
    for _ in range(8):
        proc = writer(tmp_path, last + 1, 0.002)
        wait_for(lambda: list(root.glob(f"step-{last + 1:09d}")))  # noqa: B023
        time.sleep(rng.uniform(0, 0.05))  # lands in a save, a manifest, a rename or a prune
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ckpt = runtime.resume_point(root)
        assert ckpt is not None
        assert ckpt.step > last
        assert_sound(ckpt)
        last = ckpt.step
    complete = [s for s, p in runtime.list_checkpoints(root) if runtime.verify_checkpoint(p)]
    assert complete[0] == last
