"""The trainer of the adaptive-sweep cluster tests: ``val_loss`` at step s is
``(x - 0.3)**2 + 1/s`` (a trial far from 0.3 is behind at every step), reported every
step; a checkpoint every step; stops when the study says so.

``--hold STEP``: attempt 0 of task 0 writes ``holding`` in its job directory at that step and
waits there (the test requeues it). ``--die STEP``: attempt 0 of task 0 kills its sidecar
and itself with SIGKILL at that step: the whole task dies without a word, as when its
node crashes or the kernel kills it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

from hpclaunch import runtime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--hold", type=int, default=0)
    parser.add_argument("--die", type=int, default=0)
    args = parser.parse_args()
    job_dir = Path(os.environ["HPCLAUNCH_JOB_DIR"])
    attempt = runtime.attempt()
    ckpt = runtime.resume_point()
    start = ckpt.step if ckpt else 0
    print(f"trial {runtime.trial_number()} attempt {attempt} resumes at {start}", flush=True)
    loss = float("nan")
    for step in range(start + 1, args.steps + 1):
        time.sleep(args.sleep)
        loss = (args.x - 0.3) ** 2 + 1 / step
        with (job_dir / f"steps-attempt-{attempt}.log").open("a") as fh:
            fh.write(f"{step}\n")
        runtime.report_progress(step, metrics={"val_loss": loss}, force=True)
        runtime.commit_checkpoint(step, lambda d, s=step: (d / "s.json").write_text(json.dumps(s)))
        if runtime.should_stop():
            print(f"stopped by the study at step {step}", flush=True)
            return
        first = attempt == 0 and os.environ["HPCLAUNCH_SWEEP_INDEX"] == "0"
        if args.die == step and first:
            _kill_sidecar_and_self(f"--x {args.x}".encode())
        if args.hold == step and first:
            (job_dir / "holding").touch()
            time.sleep(120)  # the test requeues the task meanwhile
    runtime.report_metrics({"val_loss": loss})


def _kill_sidecar_and_self(mark: bytes) -> None:
    """SIGKILL the sidecar of this task (on this node: a one-node task), found by its command
    line (``python -m hpclaunch.supervise run ... --x <x>``), then this process."""
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path("/proc", pid, "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"hpclaunch.supervise run" in cmdline and mark in cmdline:
            os.kill(int(pid), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
