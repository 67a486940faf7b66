"""What an elastic job's training code asks: its batch at this attempt's size, and which
samples each global step takes, the same at every size.

A resize restarts the job at another node count (``hpclaunch resize``); the trainer reloads
its checkpoint and asks again::

    from hpclaunch import runtime

    plan = runtime.batch_plan()                 # world size, per-rank batch, accumulation
    state = load(ckpt) if (ckpt := runtime.resume_point()) else None
    cursor = state["cursor"] if state else 0    # samples consumed so far, all ranks together
    sampler = runtime.ElasticSampler(len(dataset), plan, seed=0, cursor=cursor)
    for step in sampler.steps():                # one optimizer step each
        for ids in step.micro_batches:          # this rank's, plan.accumulation of them
            loss = model(batch(ids)).sum() / plan.global_batch
            loss.backward()
        all_reduce_grads(); opt.step(); opt.zero_grad()
        save({"cursor": step.cursor_after, ...})

The stream of samples is one seeded shuffle per epoch, cut into consecutive global batches by
a cursor; a global batch is split over ranks and micro-steps in a fixed order. So with the
``fixed`` policy, a step takes the same samples at 4 nodes as at 2 (hash them to check:
:func:`step_digest`), and only the order of float reductions differs.

Outside an elastic job (``HPCLAUNCH_ELASTIC`` unset) :func:`batch_plan` needs the batch
given as arguments, and plans for the current world size.

With ``batch: adaptive`` the plan is chosen at each attempt's start from what earlier
attempts measured (:mod:`hpclaunch.scheduling.adaptive_batch`): the trainer reports its
samples and its gradient statistics, and scales its learning rate by ``plan.lr_factor``::

    local = sum(p.grad.pow(2).sum() for p in params)    # this rank's gradient, before
    all_reduce_grads()                                   # the average over ranks
    overall = sum(p.grad.pow(2).sum() for p in params)
    local = all_reduce_mean(local)                       # mean over ranks
    stats = runtime.gradient_noise(local, overall, plan.per_rank_batch * plan.accumulation,
                                   plan.global_batch)
    runtime.report_progress(step, samples=step.cursor_after, gradient=stats)
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hpclaunch.jobspec.batchplan import BatchPlan, BatchPolicy, plan_batch
from hpclaunch.runtime import _dist
from hpclaunch.runtime._paths import job_dir
from hpclaunch.scheduling.adaptive_batch import Adaptive, measured_in
from hpclaunch.supervise.ledger import read_ledger

__all__ = [
    "BatchPlan",
    "ElasticSampler",
    "GlobalStep",
    "batch_plan",
    "current_plan",
    "gradient_noise",
    "sample_ids",
    "step_digest",
]

ENV = "HPCLAUNCH_ELASTIC"


def batch_plan(
    *,
    global_batch: int | None = None,
    max_batch_per_gpu: int | None = None,
    batch: BatchPolicy = "fixed",
    world_size: int | None = None,
) -> BatchPlan:
    """This attempt's batch plan.

    Inside an elastic job the spec's ``elastic:`` block (``HPCLAUNCH_ELASTIC``) decides and
    the arguments are ignored but ``world_size``; outside one, ``global_batch`` and
    ``max_batch_per_gpu`` are needed and the current world is the base size.

    Args:
        world_size: Ranks training together; default: torch.distributed's, else
            ``WORLD_SIZE``/``SLURM_NTASKS``, else 1.

    Raises:
        ValueError: Outside an elastic job without the batch given, or a batch that the
            world size cannot split.
    """
    world = world_size or _dist.world_size()
    plan = _plan(world, global_batch, max_batch_per_gpu, batch)
    global _CURRENT
    _CURRENT = plan
    return plan


#: The plan :func:`batch_plan` gave last (what ``report_progress`` records beside a speed).
_CURRENT: BatchPlan | None = None


def current_plan() -> BatchPlan | None:
    """The plan :func:`batch_plan` (or a re-plan) gave last in this process (``None``:
    not asked)."""
    return _CURRENT


def set_current_plan(plan: BatchPlan) -> None:
    """Record a re-plan's ``plan`` (:mod:`hpclaunch.runtime.adaptive`)."""
    global _CURRENT
    _CURRENT = plan


def _plan(
    world: int, global_batch: int | None, max_batch_per_gpu: int | None, batch: BatchPolicy
) -> BatchPlan:
    raw = os.environ.get(ENV)
    if raw:
        block = json.loads(raw)
        if block["batch"] == "adaptive":
            return adaptive_plan(block, world)
        return plan_batch(
            global_batch=int(block["global_batch"]),
            max_batch_per_gpu=int(block["max_batch_per_gpu"]),
            policy=block["batch"],
            base_world=int(block["base_nodes"]) * int(block["ranks_per_node"]),
            world=world,
            max_lr_factor=float(block["max_lr_factor"]),
        )
    if global_batch is None or max_batch_per_gpu is None:
        raise ValueError(
            f"not in an elastic job ({ENV} is unset): pass global_batch and max_batch_per_gpu "
            "to runtime.batch_plan, or add an elastic: block to the job spec"
        )
    return plan_batch(
        global_batch=global_batch,
        max_batch_per_gpu=max_batch_per_gpu,
        policy=batch,
        base_world=world,
        world=world,
    )


def adaptive_plan(block: dict[str, object], world: int) -> BatchPlan:
    """The adaptive plan from the measurements in this job's ledger: at an attempt's start,
    every rank reads the same lines (the ended attempts'; the running attempt's end is not
    written yet); a re-plan (:mod:`hpclaunch.runtime.adaptive`) reads them on rank 0."""
    ranks = int(str(block["ranks_per_node"]))
    adaptive = Adaptive(
        global_batch=int(str(block["global_batch"])),
        max_global_batch=int(str(block["max_global_batch"])),
        max_batch_per_gpu=int(str(block["max_batch_per_gpu"])),
        max_lr_factor=float(str(block["max_lr_factor"])),
        measured=tuple(measured_in(read_ledger(job_dir()), ranks)),
    )
    return adaptive.plan(world, max(1, world // ranks))


def gradient_noise(
    local_sqnorm: float, global_sqnorm: float, local_batch: int, global_batch: int
) -> tuple[float, float] | None:
    """The gradient's squared norm and per-sample variance, estimated from the squared norms
    of the gradient over ``local_batch`` samples (one rank's, averaged over ranks) and over
    the ``global_batch`` (after the all-reduce): McCandlish et al. 2018, appendix A.1, as
    Pollux measures them. ``None`` when the two batches are the same (one rank without
    accumulation measured nothing). Pass the result to ``report_progress(gradient=...)``.
    """
    small, big = float(local_batch), float(global_batch)
    if not 0 < small < big:
        return None
    sqr = (big * float(global_sqnorm) - small * float(local_sqnorm)) / (big - small)
    var = (float(local_sqnorm) - float(global_sqnorm)) / (1.0 / small - 1.0 / big)
    return sqr, var


def sample_ids(cursor: int, count: int, dataset_size: int, seed: int) -> list[int]:
    """Samples ``cursor`` .. ``cursor + count - 1`` of the stream: epoch ``e`` is the
    dataset in the order of ``random.Random(f"{seed}:{e}")``'s shuffle (stable across
    CPython versions and machines)."""
    if dataset_size < 1:
        raise ValueError("dataset_size must be at least 1")
    out: list[int] = []
    while len(out) < count:
        epoch, offset = divmod(cursor + len(out), dataset_size)
        order = _epoch_order(dataset_size, seed, epoch)
        out += order[offset : offset + count - len(out)]
    return out


_ORDER_CACHE: dict[tuple[int, int, int], list[int]] = {}


def _epoch_order(dataset_size: int, seed: int, epoch: int) -> list[int]:
    key = (dataset_size, seed, epoch)
    if key not in _ORDER_CACHE:
        order = list(range(dataset_size))
        random.Random(f"{seed}:{epoch}").shuffle(order)
        _ORDER_CACHE.clear()  # one epoch at a time: a big dataset's order is not kept twice
        _ORDER_CACHE[key] = order
    return _ORDER_CACHE[key]


@dataclass(frozen=True)
class GlobalStep:
    """One optimizer step, as one rank sees it.

    Attributes:
        cursor: Samples consumed before this step (all ranks together).
        cursor_after: Samples consumed after it: what a checkpoint taken after the step saves.
        global_ids: Every sample of the step, in order (the same on every rank).
        micro_batches: This rank's samples, one list per micro-step.
    """

    cursor: int
    cursor_after: int
    global_ids: tuple[int, ...]
    micro_batches: tuple[tuple[int, ...], ...]


class ElasticSampler:
    """The global steps of one rank from a cursor on (see the module's docstring).

    Args:
        dataset_size: Samples in the dataset.
        plan: This attempt's :class:`BatchPlan`.
        seed: The shuffle's seed (keep it across attempts).
        cursor: Samples consumed before (from the checkpoint; 0 at the start).
        rank: This process's rank; default: :func:`hpclaunch.runtime.rank`.
    """

    def __init__(
        self,
        dataset_size: int,
        plan: BatchPlan,
        *,
        seed: int = 0,
        cursor: int = 0,
        rank: int | None = None,
    ) -> None:
        self.dataset_size = dataset_size
        self.plan = plan
        self.seed = seed
        self.cursor = cursor
        self.rank = _dist.rank() if rank is None else rank
        if not 0 <= self.rank < plan.world_size:
            raise ValueError(f"rank {self.rank} is outside a world of {plan.world_size}")

    def step_at(self, cursor: int) -> GlobalStep:
        """The global step that starts at ``cursor``."""
        plan = self.plan
        ids = sample_ids(cursor, plan.global_batch, self.dataset_size, self.seed)
        b, world = plan.per_rank_batch, plan.world_size
        micro = tuple(
            tuple(ids[(j * world + self.rank) * b : (j * world + self.rank + 1) * b])
            for j in range(plan.accumulation)
        )
        return GlobalStep(cursor, cursor + plan.global_batch, tuple(ids), micro)

    def steps(self, count: int | None = None) -> Iterator[GlobalStep]:
        """The next ``count`` global steps (endless when ``None``); the cursor moves on as
        each is taken."""
        taken = 0
        while count is None or taken < count:
            step = self.step_at(self.cursor)
            self.cursor = step.cursor_after
            taken += 1
            yield step

    def __iter__(self) -> Iterator[list[int]]:
        """This rank's micro-batches in order (for ``DataLoader(batch_sampler=...)``);
        every ``plan.accumulation`` of them make one optimizer step."""
        for step in self.steps():
            for ids in step.micro_batches:
                yield list(ids)


def step_digest(ids: Sequence[int]) -> str:
    """A short hash of a step's sample ids, to compare runs at different sizes."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]
