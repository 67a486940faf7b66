"""A tiny stand-in trainer for the supervise tests (no torch): counts steps, reports
progress, answers checkpoint requests through the control files, and can misbehave.

    python trainer.py --steps N [--fail] [--ignore-term] [--grandchild] [--no-checkpoint]
                      [--pids FILE] [--disk-full [--stop-on-failed-checkpoint]]
                      [--stop-on-request]

--disk-full: checkpoints with hpclaunch.runtime.commit_checkpoint into <job dir>/ckpt, a
complete one every 2 steps; the one a request asks for finds the disk full (its save writes
through a link to /dev/full: the kernel's ENOSPC) and the trainer dies of the error, or with
--stop-on-failed-checkpoint stops there with exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def write(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--grandchild", action="store_true")
    parser.add_argument("--no-checkpoint", action="store_true")
    parser.add_argument("--pids", type=Path)
    parser.add_argument("--noisy-term", action="store_true")
    parser.add_argument("--disk-full", action="store_true")
    parser.add_argument("--stop-on-failed-checkpoint", action="store_true")
    parser.add_argument("--stop-on-request", action="store_true")
    args = parser.parse_args()
    control = Path(os.environ["HPCLAUNCH_CONTROL_DIR"])
    pids = [os.getpid()]
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.noisy_term:  # like torchrun's agent: a traceback on SIGTERM, exit 1
        signal.signal(signal.SIGTERM, _noisy_term)
    if args.grandchild:
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
        pids.append(subprocess.Popen([sys.executable, "-c", code]).pid)
    if args.pids:
        args.pids.write_text(" ".join(map(str, pids)))
    print(f"env RANK={os.environ.get('RANK')} WORLD_SIZE={os.environ.get('WORLD_SIZE')}")
    print(f"attempt {os.environ.get('HPCLAUNCH_ATTEMPT')}", flush=True)
    for step in range(1, args.steps + 1):
        time.sleep(args.sleep)
        write(control / "progress.json", {"step": step, "at": time.time()})
        if args.fail and step == 3:
            raise ValueError("boom at step 3")
        request = control / "checkpoint-request.json"
        if args.stop_on_request:
            from hpclaunch.runtime import checkpoint_requested

            if checkpoint_requested(min_interval=0):
                print(f"stopped at {step} for the request, nothing saved", flush=True)
                return  # exit 0 without a checkpoint: the sidecar requeues it
            continue
        if args.disk_full:
            from hpclaunch.runtime import checkpoint_requested

            try:  # through the runtime, as a real trainer: its commit says "on request"
                full = checkpoint_requested(min_interval=0)
                _real_checkpoint(control.parent / "ckpt", step, full=full)
            except OSError:
                if not args.stop_on_failed_checkpoint:
                    raise
                print(f"stopped at {step}: the requested checkpoint failed", flush=True)
                return  # exit 0, as examples/ddp_train.py does: the sidecar requeues it
            continue
        if request.exists() and not args.no_checkpoint:
            write(
                control / "checkpoint-done.json",
                {"step": step, "path": "ckpt", "seconds": 0.01, "committed_at": time.time()},
            )
            print(f"checkpointed at {step}", flush=True)
            time.sleep(30)  # wait to be stopped, like a trainer under torchrun would
    print("done", flush=True)


def _real_checkpoint(ckpt_dir: Path, step: int, *, full: bool) -> None:
    from hpclaunch.runtime import commit_checkpoint

    def save(tmp: Path) -> None:
        (tmp / "meta.json").write_text(json.dumps({"step": step}))
        if full:
            (tmp / "model.pt").symlink_to("/dev/full")
        with open(tmp / "model.pt", "wb") as f:
            f.write(b"w" * 4096)
            f.flush()

    if full or step % 2 == 0:
        commit_checkpoint(step, save, ckpt_dir=ckpt_dir)


def _noisy_term(signum: int, frame: object) -> None:
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "launcher.py", line {n}, in run' for n in range(24)]
    lines.append(f"SignalException: Process {os.getpid()} got signal: {signum}")
    print("\n".join(lines), file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    main()
