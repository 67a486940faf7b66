"""What training code imports: checkpoint requests, atomic checkpoints, the resume point.

Inside an hpclaunch job the sidecar turns preemption and time-limit signals into a *request
file* (see :mod:`hpclaunch.runtime.control`); the training loop polls it cheaply, all ranks
agree on the step, rank 0 commits the checkpoint atomically, and the sidecar requeues the
job once ``checkpoint-done.json`` appears. On restart, :func:`resume_point` returns the
newest *complete* checkpoint: a half-written one is never picked up. Outside hpclaunch the
same code works: each run writes to a new ``./hpclaunch-local/<run>`` directory (said on
stderr), and resumes an earlier run only when ``HPCLAUNCH_JOB_DIR`` names its directory::

    import torch
    from hpclaunch import runtime

    model, opt = build_model(), build_optimizer()
    start = 0
    if (ckpt := runtime.resume_point()) is not None:   # newest complete checkpoint
        state = torch.load(ckpt.path / "state.pt")
        model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"])
        start = ckpt.step
    for step in range(start + 1, total_steps + 1):
        train_one_step(model, opt, step)
        runtime.report_progress(step, total=total_steps)  # rank 0, at most every 2 s
        if runtime.should_checkpoint(step, every=500): # collective: call on every rank
            state = {"model": model.state_dict(), "opt": opt.state_dict()}
            runtime.commit_checkpoint(step, lambda d: torch.save(state, d / "state.pt"))
            if runtime.checkpoint_requested():         # the job is being stopped
                break

Rules: call :func:`should_checkpoint` on every rank at every step (it is a collective when
torch.distributed is initialized), and :func:`commit_checkpoint` on every rank at the same
step (rank 0 writes, the others wait). Nothing here imports torch unless the training code
already did. Adapters: :mod:`hpclaunch.runtime.adapters.torch` (``save_torch``/``load_torch``),
:mod:`~hpclaunch.runtime.adapters.hf` (``HpclaunchCallback`` for the HF Trainer) and
:mod:`~hpclaunch.runtime.adapters.lightning` (``HpclaunchCheckpoint``).

In an elastic job (the spec's ``elastic:``), :func:`batch_plan` gives this attempt's world
size, per-rank batch, accumulation and learning-rate factor, and :class:`ElasticSampler`
cuts the same samples into each global step at any size (:mod:`hpclaunch.runtime.elastic`).
With ``batch: adaptive`` the plan is chosen at each restart from the speeds and the gradient
statistics (:func:`gradient_noise`) earlier attempts reported, and again every so many steps
with :func:`replan_batch` (:mod:`hpclaunch.runtime.adaptive`).

In a sweep task (``hpclaunch sweep``), :func:`sweep_params` returns the task's point and
:func:`report_metrics` records its final metrics for ``hpclaunch sweep status``. In an
adaptive sweep (``metric:``) ``report_progress(step, metrics={...})`` also reports the
metric to the study, and :func:`should_stop` says when its pruner stopped the trial
(:mod:`hpclaunch.runtime.trial`).

With the spec's ``tracking:``, ``report_progress(step, metrics={...})`` logs to the job's
W&B, MLflow and TensorBoard runs, one run per job across requeues and each step once
(:mod:`hpclaunch.runtime.tracking`; :func:`tensorboard_dir`, :func:`tracked_step`).

Environment read: ``HPCLAUNCH_JOB_DIR``, ``HPCLAUNCH_CONTROL_DIR``, ``HPCLAUNCH_CHECKPOINT_DIR``,
``HPCLAUNCH_ATTEMPT``, and the rank from torch.distributed, ``RANK`` or ``SLURM_PROCID``.
"""

from __future__ import annotations

from hpclaunch.runtime._dist import barrier, is_distributed, rank, world_size
from hpclaunch.runtime.adaptive import replan_batch
from hpclaunch.runtime.checkpoint import (
    Checkpoint,
    CheckpointWriteError,
    checkpoint,
    commit_checkpoint,
    list_checkpoints,
    resume_point,
    verify_checkpoint,
)
from hpclaunch.runtime.control import (
    CheckpointRequest,
    attempt,
    checkpoint_dir,
    checkpoint_requested,
    control_dir,
    current_request,
    job_dir,
    mark_checkpoint_done,
    report_progress,
    should_checkpoint,
)
from hpclaunch.runtime.elastic import (
    BatchPlan,
    ElasticSampler,
    batch_plan,
    gradient_noise,
    step_digest,
)
from hpclaunch.runtime.sweep import report_metrics, sweep_params
from hpclaunch.runtime.tracking import tensorboard_dir, tracked_step
from hpclaunch.runtime.trial import should_stop, trial_number

__all__ = [
    "BatchPlan",
    "Checkpoint",
    "CheckpointRequest",
    "CheckpointWriteError",
    "ElasticSampler",
    "attempt",
    "barrier",
    "batch_plan",
    "checkpoint",
    "checkpoint_dir",
    "checkpoint_requested",
    "commit_checkpoint",
    "control_dir",
    "current_request",
    "gradient_noise",
    "is_distributed",
    "job_dir",
    "list_checkpoints",
    "mark_checkpoint_done",
    "rank",
    "replan_batch",
    "report_metrics",
    "report_progress",
    "resume_point",
    "should_checkpoint",
    "should_stop",
    "step_digest",
    "sweep_params",
    "tensorboard_dir",
    "tracked_step",
    "trial_number",
    "verify_checkpoint",
    "world_size",
]
