"""An adaptive batch chosen again within an attempt (``elastic.batch: adaptive``).

:func:`~hpclaunch.runtime.batch_plan` chooses at the attempt's start; a job that runs for
hours would keep that batch while its gradient noise grows and its measurements improve.
:func:`replan_batch`, called every step on every rank, chooses again every ``every`` steps::

    plan = runtime.batch_plan()
    sampler = runtime.ElasticSampler(len(data), plan, seed=0, cursor=cursor)
    for step in range(start + 1, total + 1):
        batch = sampler.step_at(sampler.cursor); sampler.cursor = batch.cursor_after
        ...train on batch.micro_batches, report_progress(step, samples=..., gradient=...)
        if (new := runtime.replan_batch(step, every=200)) is not None:
            plan = new                                   # same cursor, new batch
            sampler = runtime.ElasticSampler(len(data), plan, seed=0, cursor=sampler.cursor)
            for group in opt.param_groups: group["lr"] = base_lr * plan.lr_factor

At a re-plan rank 0 records what the batch it ran since the last choice measured (a
``batch_measured`` line in the ledger: the shape, samples per second and gradient
statistics of ``report_progress``), chooses from every measurement the job has, and gives
the plan to the other ranks: a broadcast with torch.distributed, else a file in the control
directory they wait for. Choose ``every`` so that a re-plan comes about every minute: the
simulator re-plans every minute (:class:`hpclaunch.scheduling.simulate.measured.jobs.
Elastic`, whose docstring has the figures: every 2 minutes lost the gain at low load, and
only at restarts the adaptive batch did worse than a fixed one).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

from hpclaunch._fs import read_json, write_json_atomic
from hpclaunch.jobspec.batchplan import BatchPlan
from hpclaunch.runtime import _dist, control, elastic
from hpclaunch.runtime._paths import job_dir
from hpclaunch.supervise.ledger import Ledger

__all__ = ["replan_batch"]

#: The control file through which rank 0 gives its plan without torch.distributed.
PLAN_FILE = "batch-plan.json"
#: Seconds the other ranks wait for it.
PLAN_WAIT = 120.0


def replan_batch(step: int, *, every: int) -> BatchPlan | None:
    """The new batch plan after ``step`` when an adaptive job's choice changed, else ``None``.

    Does anything only at steps that are multiples of ``every`` in a job whose spec says
    ``batch: adaptive`` (elsewhere: ``None`` at once, on every rank alike). There it is
    **collective**: every rank must call it at that step (see the module docstring).
    """
    raw = os.environ.get(elastic.ENV)
    if not raw or every <= 0 or step % every:
        return None
    block = json.loads(raw)
    if block.get("batch") != "adaptive":
        return None
    text = _choose_on_rank0(block, step) if _dist.rank() == 0 else ""
    plan = BatchPlan(**json.loads(_share(text, step)))
    if plan == elastic.current_plan():
        return None
    elastic.set_current_plan(plan)
    control.new_measurement_window()  # the next speed and statistics are the new batch's
    return plan


def _choose_on_rank0(block: dict[str, object], step: int) -> str:
    window = control.measurement_window()
    if window:
        Ledger(job_dir(), control.attempt()).append("batch_measured", step=int(step), **window)
        control.new_measurement_window()  # each line its own window, not a running total
    world = _dist.world_size()
    plan = elastic.adaptive_plan(block, world)
    return json.dumps(asdict(plan))


def _share(text: str, step: int) -> str:
    """Rank 0's ``text`` on every rank: a broadcast, or the control file (several ranks
    without a process group, as srun's tasks are)."""
    if _dist.is_distributed() or _dist.world_size() == 1:
        return _dist.broadcast_str(text)
    path = control.control_dir() / PLAN_FILE
    if _dist.rank() == 0:
        write_json_atomic(path, {"step": step, "attempt": control.attempt(), "plan": text})
        return text
    deadline = time.monotonic() + PLAN_WAIT
    while time.monotonic() < deadline:
        found = read_json(path) or {}
        if found.get("step") == step and found.get("attempt") == control.attempt():
            return str(found["plan"])
        time.sleep(0.05)
    raise TimeoutError(
        f"rank {_dist.rank()} waited {PLAN_WAIT:.0f} s for rank 0's batch plan of step {step} "
        f"in {path}: call runtime.replan_batch at the same steps on every rank"
    )
