"""A trainer without torch for the tier tests: ``--steps`` steps of ``--sleep`` seconds that
resume from the newest committed checkpoint and commit one when the sidecar asks (and every
``--every`` steps, when given).

Rank 0 (``RANK``, set by the sidecar's srun launcher) reports progress and commits; other
ranks only keep time. Each attempt appends ``attempt A resumes at S`` and, at the end,
``done`` to the job's log, and rank 0 writes the steps it trained to
``<job dir>/steps-attempt-A.log``.

``--elastic``: a data-parallel job's timing in an elastic job (``elastic:``, launcher srun,
one rank per node): a step takes ``--sleep`` per micro-step of its batch plan (a fixed
global batch: half the ranks, twice the micro-steps) plus ``--sync`` seconds when it runs
on more than one rank, and reports its samples (the arbiter's speed-ups come from them).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from hpclaunch import runtime


def save(directory: Path, step: int) -> None:
    (directory / "state.json").write_text(json.dumps({"step": step}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--every", type=int, default=0, help="periodic commits (0: none)")
    parser.add_argument(
        "--ignore-requests", action="store_true", help="a job that cannot checkpoint on request"
    )
    parser.add_argument("--elastic", action="store_true", help="time steps by the batch plan")
    parser.add_argument("--sync", type=float, default=0.0, help="seconds per step on >1 rank")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    per_step, batch = args.sleep, 0
    if args.elastic:
        plan = runtime.batch_plan()
        per_step = args.sleep * plan.accumulation + (args.sync if plan.world_size > 1 else 0.0)
        batch = plan.global_batch
    attempt = os.environ.get("HPCLAUNCH_ATTEMPT", "0")
    ckpt = runtime.resume_point()
    start = ckpt.step if ckpt else 0
    print(f"rank {rank} attempt {attempt} resumes at {start}", flush=True)
    trained = Path(os.environ["HPCLAUNCH_JOB_DIR"]) / f"steps-attempt-{attempt}.log"
    for step in range(start + 1, args.steps + 1):
        time.sleep(per_step)
        if rank != 0:
            continue
        with trained.open("a") as fh:
            fh.write(f"{step}\n")
        runtime.report_progress(step, samples=step * batch if batch else None)
        if runtime.checkpoint_requested() and not args.ignore_requests:
            runtime.commit_checkpoint(step, lambda d, s=step: save(d, s))
            print(f"checkpointed at {step}", flush=True)
            time.sleep(60)  # the sidecar requeues the job and stops us
        elif args.every and step % args.every == 0:
            runtime.commit_checkpoint(step, lambda d, s=step: save(d, s))
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
