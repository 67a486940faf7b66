"""An elastic data-parallel trainer: the same training at any node count (``elastic:``).

``hpclaunch resize JOB --nodes K`` restarts it at K nodes from its last checkpoint; with the
spec's ``batch: fixed`` every optimizer step takes the same samples at every size
(:class:`hpclaunch.runtime.ElasticSampler`, a global sample cursor saved in each checkpoint)
and the weights differ from an uninterrupted run only by the order of float sums. In float64
on the CPU that is far below 1e-9 relative, which ``tests/integration/test_elastic_on_cluster.py``
checks against a twin that is never resized.

With ``batch: adaptive`` (and ``max_global_batch``) each restart plans a batch from the
speeds and gradient statistics earlier attempts measured: this trainer measures them each
step (:func:`gradient_statistics`, an all-reduce of one number) and reports them with its
samples; its learning rate is the base rate times ``plan.lr_factor``.

Per step, rank 0 appends ``<step> <world> <digest>`` to ``<log dir>/samples.log``: the digest
of the sorted sample ids every rank actually trained on (gathered), so a test compares runs
step by step. At the end rank 0 writes ``weights.json`` (every weight, float64) there.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist

from hpclaunch import runtime

SEED = 4321
BASE_LR = 0.05
SAMPLES = 4096


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps in all")
    parser.add_argument("--every", type=int, default=25, help="periodic checkpoint interval")
    parser.add_argument(
        "--sleep",
        type=float,
        default=0.05,
        help="seconds of 'work' per micro-step of a rank (a step at half the ranks takes two "
        "micro-steps: twice as long, the linear speed-up data parallelism roughly has)",
    )
    parser.add_argument("--log-dir", type=Path, help="default: $HPCLAUNCH_JOB_DIR or .")
    parser.add_argument(
        "--replan-every",
        type=int,
        default=50,
        help="with batch: adaptive, choose the batch again every this many steps",
    )
    return parser.parse_args()


def dataset() -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed regression dataset, the same on every rank."""
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(SAMPLES, 8, generator=gen, dtype=torch.float64)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.05 * torch.randn(
        SAMPLES, 1, generator=gen, dtype=torch.float64
    )
    return x, y


def build_model() -> torch.nn.Module:
    torch.manual_seed(SEED)  # the same initial weights on every rank and at every size
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    return model.double()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    world = runtime.world_size()
    if world > 1:
        dist.init_process_group("gloo", rank=runtime.rank(), world_size=world)
    try:
        train(args, world)
    finally:
        if world > 1:
            dist.destroy_process_group()


def train(args: argparse.Namespace, world: int) -> None:
    rank = runtime.rank()
    log_dir = args.log_dir or runtime.job_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    plan = runtime.batch_plan(global_batch=16, max_batch_per_gpu=4)
    x, y = dataset()
    model = build_model()
    optimiser = torch.optim.SGD(model.parameters(), lr=BASE_LR * plan.lr_factor, momentum=0.9)
    start, cursor = 0, 0
    resumed = runtime.resume_point()
    if resumed is not None:
        state = torch.load(resumed.path / "state.pt", weights_only=True)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        start, cursor = resumed.step, int(state["cursor"])
        set_lr(optimiser, plan)  # the saved one is the last size's
    if rank == 0:
        print(
            f"attempt {runtime.attempt()}: {world} ranks x {plan.per_rank_batch} samples x "
            f"{plan.accumulation} micro-steps (global {plan.global_batch}), from step {start}",
            flush=True,
        )
    sampler = runtime.ElasticSampler(SAMPLES, plan, seed=SEED, cursor=cursor)
    for step in range(start + 1, args.steps + 1):
        batch = sampler.step_at(sampler.cursor)
        sampler.cursor = batch.cursor_after
        optimiser.zero_grad()
        for ids in batch.micro_batches:
            index = torch.tensor(ids)
            # Summed, over the global batch: accumulation and ranks add up to the mean.
            loss = ((model(x[index]) - y[index]) ** 2).sum() / plan.global_batch
            loss.backward()  # type: ignore[no-untyped-call, unused-ignore]
        gradient = None
        if plan.policy == "adaptive":
            gradient = gradient_statistics(model, plan, world)
        elif world > 1:
            all_reduce(model)
        optimiser.step()
        _log_samples(log_dir, step, world, batch.micro_batches)
        time.sleep(args.sleep * len(batch.micro_batches))
        runtime.report_progress(step, samples=batch.cursor_after, gradient=gradient)
        if runtime.should_checkpoint(step, every=args.every):
            requested = runtime.checkpoint_requested()
            state = {
                "model": model.state_dict(),
                "optimiser": optimiser.state_dict(),
                "cursor": batch.cursor_after,
            }
            runtime.commit_checkpoint(step, lambda d, s=state: torch.save(s, d / "state.pt"))
            if requested:
                if rank == 0:
                    print(f"checkpoint requested: stopping after step {step}", flush=True)
                return
        if (new := runtime.replan_batch(step, every=args.replan_every)) is not None:
            plan = new  # batch: adaptive chose another batch; the cursor goes on
            sampler = runtime.ElasticSampler(SAMPLES, plan, seed=SEED, cursor=sampler.cursor)
            set_lr(optimiser, plan)
            if rank == 0:
                print(f"step {step}: global batch {plan.global_batch}", flush=True)
    runtime.report_progress(args.steps, samples=sampler.cursor, force=True)
    if rank == 0:
        weights = [v.flatten().tolist() for _, v in sorted(model.state_dict().items())]
        (log_dir / "weights.json").write_text(json.dumps(weights))
        print(f"done: {args.steps} steps", flush=True)


def set_lr(optimiser: torch.optim.Optimizer, plan: runtime.BatchPlan) -> None:
    """The base learning rate times the plan's factor (linear, sqrt, adaptive)."""
    for group in optimiser.param_groups:
        group["lr"] = BASE_LR * plan.lr_factor


def all_reduce(model: torch.nn.Module) -> None:
    """Sum the ranks' gradients (each already over the global batch: the mean)."""
    for param in model.parameters():  # one tensor at a time: a fixed order
        dist.all_reduce(param.grad)


def gradient_statistics(
    model: torch.nn.Module, plan: runtime.BatchPlan, world: int
) -> tuple[float, float] | None:
    """All-reduce the gradients, and estimate the gradient's squared norm and variance
    from its squared norm over this rank's samples and over the global batch."""
    local = plan.per_rank_batch * plan.accumulation
    # Before the all-reduce each rank holds its samples' gradient sum / global batch.
    mine = sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)
    local_sq = torch.tensor([mine * (plan.global_batch / local) ** 2], dtype=torch.float64)
    if world > 1:
        all_reduce(model)
        dist.all_reduce(local_sq)
    overall = sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)
    return runtime.gradient_noise(float(local_sq) / world, overall, local, plan.global_batch)


def _log_samples(
    log_dir: Path, step: int, world: int, micro_batches: tuple[tuple[int, ...], ...]
) -> None:
    """Rank 0 logs the digest of the samples every rank trained on at ``step``."""
    mine = [i for ids in micro_batches for i in ids]
    every: list[list[int]] = [mine]
    if world > 1:
        every = [[] for _ in range(world)]
        dist.all_gather_object(every, mine)
    if runtime.rank() == 0:
        digest = runtime.step_digest(sorted(i for ids in every for i in ids))
        with (log_dir / "samples.log").open("a") as fh:
            fh.write(f"{step} {world} {digest}\n")


if __name__ == "__main__":
    main()
