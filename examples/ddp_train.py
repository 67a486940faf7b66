"""A tiny, exactly deterministic data-parallel trainer that checkpoints and resumes with
hpclaunch.runtime.

Run it uninterrupted, or stop it (a checkpoint request, a kill) and run it again: it resumes
from the newest complete checkpoint, and the final weights are bit-for-bit those of the
uninterrupted run. That is the proof the supervisor tests and the cluster tests make::

    torchrun --standalone --nproc_per_node=2 examples/ddp_train.py --hash-out final.sha256

What makes it exact on the CPU: one thread, ``torch.use_deterministic_algorithms(True)``,
data that is a function of the step and the rank only (no data loader state), dropout drawn
from each rank's global RNG whose state (every rank's) is saved in the checkpoint, with the
model and the optimizer (momentum) state, and gradients averaged one tensor at a time in a
fixed order (:func:`average_gradients`: DDP's buckets change the order after a resume).

Rank 0 appends each step it trains to ``<log dir>/steps-attempt-<HPCLAUNCH_ATTEMPT>.log`` so
a test can check that no committed step is trained twice and none is skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from hpclaunch import runtime

SEED = 1234
BATCH = 16


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="total training steps")
    parser.add_argument("--every", type=int, default=50, help="periodic checkpoint interval")
    parser.add_argument("--sleep", type=float, default=0.07, help="seconds of 'work' per step")
    parser.add_argument("--hash-out", type=Path, help="write the final weights' sha256 here")
    parser.add_argument("--log-dir", type=Path, help="default: $HPCLAUNCH_JOB_DIR or .")
    parser.add_argument("--ckpt-dir", type=Path, help="default: $HPCLAUNCH_CHECKPOINT_DIR")
    parser.add_argument(
        "--keep", type=int, default=3, help="complete checkpoints to keep; 0 keeps all"
    )
    parser.add_argument(
        "--save-sleep",
        type=float,
        default=0.0,
        help="test hook: sleep this long between the two files of an on-request checkpoint",
    )
    parser.add_argument(
        "--periodic-save-sleep",
        type=float,
        default=0.0,
        help="test hook: the same for the periodic checkpoints (a window to preempt into)",
    )
    parser.add_argument(
        "--ignore-requests",
        action="store_true",
        help="baseline (bench/preemption.py): never checkpoint on request, only every "
        "--every steps; on a request stop at once without saving, as a trainer that does "
        "not handle the preemption signal dies on it",
    )
    return parser.parse_args()


def build_model() -> torch.nn.Module:
    torch.manual_seed(SEED)  # the same initial weights on every rank
    return torch.nn.Sequential(
        torch.nn.Linear(8, 32),
        torch.nn.Tanh(),
        torch.nn.Dropout(p=0.1),
        torch.nn.Linear(32, 1),
    )


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The data of ``step`` on ``rank``: a pure function of both, so a resume replays it."""
    gen = torch.Generator().manual_seed(SEED * 1_000_003 + step * 101 + rank)
    x = torch.randn(BATCH, 8, generator=gen)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.05 * torch.randn(BATCH, 1, generator=gen)
    return x, y


def average_gradients(model: torch.nn.Module) -> None:
    """Data parallelism with a fixed reduction order: all-reduce each gradient on its own,
    in the model's parameter order, then divide by the world size.

    DistributedDataParallel reduces in buckets that it rebuilds after its first iteration,
    in the order the gradients became ready. With more than 2 ranks gloo's ring sums a
    float in an order that depends on its place in the bucket, so the first step after every
    resume (a fresh DDP, buckets not yet rebuilt) sums differently from the uninterrupted
    run and the weights drift in the last bits (measured: 4 ranks, gloo, torch 2.13, also
    with ``static_graph=True``; 2 ranks stay exact, as a + b == b + a). One tensor per
    all-reduce keeps the order the same at every step of every attempt.
    """
    world = dist.get_world_size()
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad)
            param.grad.div_(world)


def weights_sha256(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def all_rng_states() -> list[torch.Tensor]:
    """Every rank's RNG state, in rank order (collective when distributed)."""
    mine = torch.get_rng_state()
    if not dist.is_initialized():
        return [mine]
    states: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(states, mine)
    return states


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    # torchrun/accelerate set RANK and WORLD_SIZE; plain srun tasks have SLURM_PROCID and
    # SLURM_NTASKS (runtime.rank()/world_size() read either); MASTER_ADDR/PORT come from
    # the launcher (the hpclaunch sidecar sets them for srun tasks).
    world = runtime.world_size()
    distributed = world > 1
    if distributed:
        dist.init_process_group("gloo", rank=runtime.rank(), world_size=world)
    try:
        train(args, distributed)
    finally:
        if distributed:
            dist.destroy_process_group()


def train(args: argparse.Namespace, distributed: bool) -> None:
    rank = runtime.rank()
    log_dir = args.log_dir or runtime.job_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    steps_log = log_dir / f"steps-attempt-{runtime.attempt()}.log"

    model = build_model()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(SEED + 1 + rank)  # dropout differs per rank, reproducibly
    start = 0
    resumed = runtime.resume_point(args.ckpt_dir)
    if resumed is not None:
        model.load_state_dict(torch.load(resumed.path / "model.pt", weights_only=True))
        extra = torch.load(resumed.path / "train.pt", weights_only=True)
        optimiser.load_state_dict(extra["optimiser"])
        torch.set_rng_state(extra["rng"][rank])
        start = resumed.step
    if rank == 0:
        print(f"attempt {runtime.attempt()}: starting after step {start}", flush=True)

    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank)
        optimiser.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call, unused-ignore]
        if distributed:
            average_gradients(model)
        optimiser.step()
        time.sleep(args.sleep)
        if rank == 0:
            with steps_log.open("a") as fh:
                fh.write(f"{step}\n")
            if step % 20 == 0:
                print(f"step {step}/{args.steps} loss {loss.item():.5f}", flush=True)
        runtime.report_progress(step, total=args.steps)
        if runtime.should_checkpoint(step, every=args.every):  # every rank, every step
            requested = runtime.checkpoint_requested()
            if requested and args.ignore_requests:
                if rank == 0:
                    print(f"checkpoint requested: ignored, stopping after step {step}", flush=True)
                break  # all ranks agree (should_checkpoint is collective): stop together
            rng = all_rng_states()
            slow = args.save_sleep if requested else args.periodic_save_sleep

            def save(tmp: Path, rng: list[torch.Tensor] = rng, slow: float = slow) -> None:
                torch.save(model.state_dict(), tmp / "model.pt")
                time.sleep(slow)  # test hook: a kill lands between the two files
                torch.save({"optimiser": optimiser.state_dict(), "rng": rng}, tmp / "train.pt")

            try:
                path = runtime.commit_checkpoint(step, save, ckpt_dir=args.ckpt_dir, keep=args.keep)
            except runtime.CheckpointWriteError as exc:  # disk full, quota: on every rank
                # Nothing was committed; the newest complete checkpoint stays the resume
                # point. Train on (a later one may fit), or stop if this one was asked for.
                if rank == 0:
                    print(f"checkpoint step {step} not written: {exc}", flush=True)
                if requested:
                    break
                continue
            if rank == 0:
                print(f"checkpoint step {step} -> {path}", flush=True)
            if requested:
                if rank == 0:
                    print(f"checkpoint requested: stopping after step {step}", flush=True)
                break
    else:  # the last step's report reaches progress.json when the process ends (no force=)
        if rank == 0:
            digest = weights_sha256(model)
            print(f"done: {args.steps} steps, weights sha256 {digest}", flush=True)
            if args.hash_out is not None:
                args.hash_out.write_text(digest + "\n")


if __name__ == "__main__":
    main()
