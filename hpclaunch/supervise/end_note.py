"""How an attempt's end is told: its ``attempt_end`` record in the ledger (steps reached,
committed and lost, the throughput at this size) and its last line in the attempt log (why it
stopped and what was kept)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch.runtime.checkpoint import resume_point
from hpclaunch.supervise import control
from hpclaunch.supervise.checkpoints import CheckpointWatch

__all__ = ["end_fields", "end_line"]

#: What an attempt's progress file says of its batch and gradient, kept at its end.
MEASURED = ("per_rank_batch", "accumulation", "global_batch", "lr_factor", "grad_sqr", "grad_var")


#: What stopped the attempt, as its last line says it.
_WHAT = {
    "preempted": "preemption",
    "time_limit": "the time limit",
    "requeued": "a requeue by Slurm",
    "node_failure": "a node failure",
    "cancelled": "a cancel",
    "stopped_idle": "the idle guard: the GPUs sat idle",
}


def end_fields(
    reason: str, watch: CheckpointWatch, control_dir: Path, attempt: int, extra: dict[str, Any]
) -> dict[str, Any]:
    """The ``attempt_end`` record's fields beside the reason, exit code and requeue: the
    steps reached and committed and the steps the next attempt redoes; the throughput at
    this size goes into ``extra`` (unless it says its own)."""
    last = watch.last_step()
    committed = watch.committed_step
    if committed is None:  # none asked for: the trainer's own schedule may have committed
        done = control.read_json(control_dir / jobdir.DONE) or {}
        if done.get("attempt") == attempt:  # cleared at each attempt's start
            committed = done.get("step")
    # Without a commit, a failed checkpoint named the resume point (checkpoint-failed.json).
    resume = committed if committed is not None else (watch.failed or {}).get("resume_step")
    lost = None
    if isinstance(last, int) and isinstance(resume, int) and reason != "success":
        lost = max(0, last - resume)  # what the next attempt redoes (none after success)
    progress = control.read_json(control_dir / jobdir.PROGRESS) or {}
    if progress.get("attempt") == attempt and "samples_per_s" in progress:
        # The throughput at this size (runtime.report_progress(samples=...)).
        extra.setdefault("samples_per_s", progress["samples_per_s"])
        extra.setdefault("world_size", progress.get("world_size"))
        # Its batch plan and gradient statistics: elastic.batch adaptive plans from them.
        for key in MEASURED:
            if key in progress:
                extra.setdefault(key, progress[key])
    return {
        "last_step": last,
        "committed_step": committed,
        "steps_lost": lost,
        "no_progress": watch.no_progress(),
    }


def end_line(
    reason: str,
    requeued: bool,
    why: str | None,
    *,
    watch: CheckpointWatch,
    checkpoint_dir: str,
    stop_log: Path,
    resized: tuple[int, int] | None = None,
) -> str:
    """The attempt's last line in its log: why it stopped and what was kept."""
    last = watch.last_step()
    what = _WHAT.get(reason, reason)
    if reason == "resized":
        what = "a resize from {} to {} nodes".format(*(resized or ("?", "?")))
    at = f" at step {last}" if last is not None else ""
    head = f"stopped for requeue{at} ({what})" if requeued else f"stopped{at} ({what})"
    if watch.committed_step is not None:
        kept = f"checkpoint step-{watch.committed_step} committed"
    elif watch.committed is not None:
        kept = "checkpoint committed"
    elif watch.failed is not None:  # the trainer said why (checkpoint-failed.json)
        failed = watch.failed
        resume = failed.get("resume_step")
        kept = (
            f"checkpoint of step {failed.get('step')} failed "
            f"({failed.get('errno_name') or 'error'}: {failed.get('error')}): "
            "the next attempt resumes from "
            + (f"step {resume}" if resume is not None else "the start")
        )
    else:
        kept = f"no checkpoint committed in time; {_resume_said(checkpoint_dir, requeued)}"
    tail = f"; not requeued: {why}" if why else ""
    return f"hpclaunch: {head}; {kept}{tail} (the launcher's shutdown output: {stop_log.name})"


def _resume_said(checkpoint_dir: str, requeued: bool) -> str:
    """Where the job would go on from: the newest complete checkpoint, or none."""
    found = resume_point(checkpoint_dir, verify="size", clean=False)
    if found is None:
        return (
            "the next attempt starts from the beginning"
            if requeued
            else f"there is no complete checkpoint in {checkpoint_dir}"
        )
    if requeued:
        return f"the next attempt resumes from step {found.step}"
    return f"the newest complete checkpoint is step {found.step}"
