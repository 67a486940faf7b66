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
``--per-sample`` adds seconds per sample of a rank's micro-step (a pass's compute), and
``--noise`` reports gradient statistics of that noise scale (squared norm 1, variance
``--noise``) through ``runtime.gradient_noise``, for ``elastic.batch: adaptive``. An
elastic job keeps its sample cursor in its checkpoints and rank 0 writes ``<step> <cursor
before> <cursor after>`` per step to ``<job dir>/cursor-attempt-A.log``; with
``--replan-every N`` every rank calls ``runtime.replan_batch`` every N steps.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from hpclaunch import runtime


def save(directory: Path, step: int, cursor: int = 0) -> None:
    (directory / "state.json").write_text(json.dumps({"step": step, "cursor": cursor}))


def timing(
    plan: runtime.BatchPlan, args: argparse.Namespace, rank: int, what: str
) -> tuple[float, int, int]:
    """(Seconds per step, global batch, samples behind one rank's gradient) of ``plan``;
    rank 0 says the plan."""
    compute = args.sleep + args.per_sample * plan.per_rank_batch
    per_step = compute * plan.accumulation + (args.sync if plan.world_size > 1 else 0.0)
    if rank == 0:
        print(
            f"{what}: {plan.world_size} ranks x {plan.per_rank_batch} x {plan.accumulation} = "
            f"{plan.global_batch}, lr x{plan.lr_factor:.4f}",
            flush=True,
        )
    return per_step, plan.global_batch, plan.per_rank_batch * plan.accumulation


def report(args: argparse.Namespace, step: int, cursor: int, batch: int, local: int) -> None:
    """Rank 0: progress (and gradient statistics), and a checkpoint when due or asked."""
    gradient = None
    if args.noise and local < batch:  # the norms a rank and the all-reduce would see
        gradient = runtime.gradient_noise(
            1.0 + args.noise / local, 1.0 + args.noise / batch, local, batch
        )
    runtime.report_progress(step, samples=cursor if batch else None, gradient=gradient)
    if runtime.checkpoint_requested() and not args.ignore_requests:
        runtime.commit_checkpoint(step, lambda d: save(d, step, cursor))
        print(f"checkpointed at {step}", flush=True)
        time.sleep(60)  # the sidecar requeues the job and stops us
    elif args.every and step % args.every == 0:
        runtime.commit_checkpoint(step, lambda d: save(d, step, cursor))


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
    parser.add_argument("--per-sample", type=float, default=0.0, help="seconds per sample")
    parser.add_argument("--noise", type=float, default=0.0, help="gradient noise to report")
    parser.add_argument("--replan-every", type=int, default=0, help="runtime.replan_batch")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    per_step, batch, local = args.sleep, 0, 0
    if args.elastic:
        per_step, batch, local = timing(runtime.batch_plan(), args, rank, "plan")
    attempt = os.environ.get("HPCLAUNCH_ATTEMPT", "0")
    ckpt = runtime.resume_point()
    start = ckpt.step if ckpt else 0
    cursor = json.loads((ckpt.path / "state.json").read_text()).get("cursor", 0) if ckpt else 0
    print(f"rank {rank} attempt {attempt} resumes at {start}", flush=True)
    job_dir = Path(os.environ["HPCLAUNCH_JOB_DIR"])
    trained = job_dir / f"steps-attempt-{attempt}.log"
    cursors = job_dir / f"cursor-attempt-{attempt}.log"
    for step in range(start + 1, args.steps + 1):
        time.sleep(per_step)
        before, cursor = cursor, cursor + batch
        if rank == 0:
            with trained.open("a") as fh:
                fh.write(f"{step}\n")
            if batch:
                with cursors.open("a") as fh:
                    fh.write(f"{step} {before} {cursor}\n")
            report(args, step, cursor, batch, local)
        if args.replan_every and (new := runtime.replan_batch(step, every=args.replan_every)):
            per_step, batch, local = timing(new, args, rank, f"replan at step {step}")
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
