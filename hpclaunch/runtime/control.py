"""The control channel between the sidecar and the training processes.

The sidecar and the trainer talk through small JSON files in ``$HPCLAUNCH_CONTROL_DIR`` (on a
filesystem every node of the job shares), each written atomically (temp file + rename):

==========================  =========  =====================================================
file                        writer     content
==========================  =========  =====================================================
``checkpoint-request.json``  sidecar    ``{"reason", "requested_at", "deadline"}``
``checkpoint-done.json``     rank 0     ``{"step", "path", "seconds", "committed_at", ...}``
``progress.json``            rank 0     ``{"step", "updated_at", "attempt", ...}``
``checkpoint-failed.json``   rank 0     ``{"step", "errno", "errno_name", "error", "dir", ...}``
==========================  =========  =====================================================

A file rather than a signal, because a signal does not reliably reach the training loop:
torchrun forwards only a few signals and SIGKILLs its workers ~30 s after SIGTERM, DataLoader
workers die on SIGTERM, and ``deepspeed``/``accelerate``/``srun`` each differ. Every rank polls
the file itself (a cached ``stat``), then the ranks agree in :func:`should_checkpoint`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch._fs import read_json, write_json_atomic
from hpclaunch.runtime import _dist
from hpclaunch.runtime._paths import (
    attempt,
    checkpoint_dir,
    control_dir,
    job_dir,
    local_run_dir,
)
from hpclaunch.runtime.elastic import BatchPlan, current_plan
from hpclaunch.runtime.tracking import log_metrics
from hpclaunch.runtime.trial import report_trial
from hpclaunch.supervise.ledger import Ledger

__all__ = [
    "CheckpointRequest",
    "attempt",
    "checkpoint_dir",
    "checkpoint_requested",
    "control_dir",
    "current_request",
    "job_dir",
    "local_run_dir",
    "mark_checkpoint_done",
    "mark_checkpoint_failed",
    "report_progress",
    "should_checkpoint",
]


@dataclass(frozen=True)
class CheckpointRequest:
    """A checkpoint request written by the sidecar.

    Attributes:
        reason: ``"preemption"``, ``"time_limit"``, ``"cancel"``, ``"idle"`` (the idle guard
            stops the job) or ``"manual"``.
        requested_at: Unix time the sidecar wrote the request.
        deadline: Unix time by which the checkpoint must be committed (the sidecar kills the
            job then); ``None`` if the file did not say.
    """

    reason: str
    requested_at: float
    deadline: float | None = None

    @property
    def seconds_left(self) -> float | None:
        """Seconds until the deadline (negative once it passed), ``None`` without one."""
        return None if self.deadline is None else self.deadline - time.time()


class _RequestWatcher:
    """Stats the request file at most every ``min_interval`` seconds; sticky once seen."""

    def __init__(self) -> None:
        self.request: CheckpointRequest | None = None
        self._env: tuple[str | None, str | None] | None = None
        self._checked_at = float("-inf")

    def poll(self, min_interval: float) -> CheckpointRequest | None:
        # Two dict lookups per call; the path is only built when it is time to stat.
        env = (os.environ.get("HPCLAUNCH_CONTROL_DIR"), os.environ.get("HPCLAUNCH_JOB_DIR"))
        if env != self._env:  # a new control dir (tests, or env changed): start over
            self._env, self.request, self._checked_at = env, None, float("-inf")
        if self.request is not None:
            return self.request
        now = time.monotonic()
        if now - self._checked_at < min_interval:
            return None
        self._checked_at = now
        path = control_dir() / jobdir.REQUEST
        if not path.exists():
            return None
        self.request = _parse_request(read_json(path))
        _mark_seen(self.request)
        return self.request

    def force(self, reason: str) -> None:
        """Mark a request as seen (another rank saw it first)."""
        if self.request is None:
            self.request = CheckpointRequest(reason=reason, requested_at=time.time())
            _mark_seen(self.request)


def _mark_seen(request: CheckpointRequest) -> None:
    """Tell the sidecar the trainer knows of the request (best effort: never fails a step)."""
    data = {"seen_at": time.time(), "reason": request.reason, "pid": os.getpid()}
    with contextlib.suppress(OSError):
        write_json_atomic(control_dir() / jobdir.SEEN, data)


def _parse_request(data: Any) -> CheckpointRequest:
    # The file exists: it is a request even if it cannot be read (a sidecar must never be
    # ignored because of a format slip); the defaults then say so.
    if not isinstance(data, dict):
        return CheckpointRequest(reason="unknown", requested_at=time.time())
    deadline = data.get("deadline")
    return CheckpointRequest(
        reason=str(data.get("reason", "unknown")),
        requested_at=float(data.get("requested_at") or time.time()),
        deadline=float(deadline) if isinstance(deadline, (int, float)) else None,
    )


_WATCHER = _RequestWatcher()


def current_request(*, min_interval: float = 0.5) -> CheckpointRequest | None:
    """The sidecar's checkpoint request, or ``None`` if there is none (yet).

    Cheap enough to call every step: the file is stat'ed at most every ``min_interval``
    seconds; once a request was seen it is returned from memory for the rest of the process.
    """
    return _WATCHER.poll(min_interval)


def checkpoint_requested(*, min_interval: float = 0.5) -> bool:
    """Whether the sidecar asked for a checkpoint (then the job will be stopped soon).

    Local to this rank and not collective; use :func:`should_checkpoint` to decide *when* to
    checkpoint so that all ranks agree. Once True, stays True for the life of the process.
    """
    return current_request(min_interval=min_interval) is not None


def should_checkpoint(
    step: int, *, every: int | None = None, min_interval: float = 0.5, sync_every: int = 1
) -> bool:
    """Whether to checkpoint after ``step``: on the periodic schedule, or on request.

    **Collective** when torch.distributed is initialized: every rank must call it at every
    step (same ``step`` and ``every``), or the ranks hang. The ranks reduce their local flags
    with MAX, so if any rank has seen the request file all of them checkpoint at this step,
    and :func:`checkpoint_requested` is then True on every rank (so they all stop together).
    Without torch or a process group it decides for this process alone.

    Args:
        step: The step just finished.
        every: Checkpoint when ``step % every == 0``; ``None`` or 0 for on-request only.
        min_interval: Passed on to :func:`current_request`.
        sync_every: Look at requests (and reduce across ranks) only at steps that are a
            multiple of this; the periodic schedule needs no collective. For very short
            steps: one gloo all_reduce of 2 ranks costs ~0.5 ms on a busy 2-core host.
    """
    periodic = every is not None and every > 0 and step % every == 0
    if sync_every > 1 and step % sync_every:
        return periodic  # every rank computes the same: no collective needed
    requested = current_request(min_interval=min_interval) is not None
    periodic_any, requested_any = _dist.all_reduce_max([int(periodic), int(requested)])
    if requested_any and not requested and current_request(min_interval=0) is None:
        # Another rank saw the request first (each looks at the file at most every
        # min_interval): this rank reads it now for its reason (a preemption, a time limit),
        # which rank 0 records with a failed or committed checkpoint; "peer" only where the
        # file cannot be seen here (a control directory not shared with that rank).
        _WATCHER.force("peer")
    return bool(periodic_any or requested_any)


class _Progress:
    def __init__(self) -> None:
        self.written_at = float("-inf")
        self.step: int | None = None
        self.first: tuple[float, int] | None = None  # (time, samples) of the first report
        self.last: tuple[float, int] | None = None  # and of the newest
        self.first_step: tuple[float, int] | None = None  # (unix time, step) of the first
        self.total: int | None = None  # the last total given (a commit's report has none)
        #: The newest report not yet written (within min_interval of the last write): written
        #: when the process ends, so the file has the last step (a 10-step run showed 8).
        self.pending: dict[str, int | None] | None = None
        self.flush_at_exit = False
        #: Sums and count of the gradient statistics reported (their mean is written).
        self.gradient = (0.0, 0.0, 0)
        #: What the last report with samples wrote of them (speed, world, plan): kept by a
        #: report without (a commit's); else an attempt that ends after a commit loses its
        #: speed (seen on the cluster: the ends of resized attempts had none).
        self.sample_fields: dict[str, Any] = {}


_PROGRESS = _Progress()


def report_progress(
    step: int,
    *,
    total: int | None = None,
    samples: int | None = None,
    metrics: Mapping[str, Any] | None = None,
    gradient: tuple[float, float] | None = None,
    min_interval: float = 2.0,
    force: bool = False,
) -> None:
    """Tell the sidecar how far training got (rank 0 only; a no-op on other ranks).

    ``metrics``: values measured at ``step`` (``{"val_loss": 0.31}``). In an adaptive
    sweep the study's metric among them is reported to the study at once, whatever
    ``min_interval`` (:mod:`hpclaunch.runtime.trial`: its pruner may stop the trial;
    :func:`~hpclaunch.runtime.should_stop` then says so). With the spec's ``tracking:``
    they are logged at ``step`` to its W&B, MLflow and TensorBoard runs, each step once
    across requeues (:mod:`hpclaunch.runtime.tracking`).

    ``total``: the step training ends at: ``hpclaunch status`` and ``report`` then say when
    the job should end (from this attempt's steps per second), and whether before its time
    limit (``SLURM_JOB_END_TIME``, kept in the file).

    ``samples``: the samples trained so far, all ranks together (an elastic job's cursor):
    the file then also says this attempt's samples per second and world size, which the
    ledger keeps at the attempt's end (the job's throughput at each size), with this
    process's batch plan (:func:`~hpclaunch.runtime.batch_plan`) when it asked for one.

    ``gradient``: the gradient's squared norm and per-sample variance measured at ``step``
    (:func:`~hpclaunch.runtime.gradient_noise`); their mean over the attempt is written
    and kept by the ledger: ``elastic.batch: adaptive`` chooses the next attempt's batch
    from them.

    Writes ``progress.json`` at most every ``min_interval`` seconds (``force`` to write now);
    the newest report that the interval held back is written when the process exits, so the
    file ends at the last step reported.
    The sidecar uses it to see that an attempt made progress (crash-loop breaker) and how
    many steps a kill lost.
    """
    if _dist.rank() != 0:
        return
    now = time.monotonic()
    if samples is not None:  # every report counts, written or held back by the interval
        if _PROGRESS.first is None:
            _PROGRESS.first = (now, samples)
        _PROGRESS.last = (now, samples)
    if gradient is not None and all(math.isfinite(v) for v in gradient):
        sqr, var, count = _PROGRESS.gradient
        _PROGRESS.gradient = (sqr + gradient[0], var + gradient[1], count + 1)
    if metrics:
        report_trial(step, metrics)
        log_metrics(step, metrics)
    if not force and now - _PROGRESS.written_at < min_interval:
        _PROGRESS.pending = {"step": step, "total": total, "samples": samples}
        if not _PROGRESS.flush_at_exit:
            _PROGRESS.flush_at_exit = True
            atexit.register(_flush_progress)
        return
    _PROGRESS.pending = None
    data: dict[str, Any] = {
        "step": int(step),
        "updated_at": time.time(),
        "attempt": attempt(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    wall = float(data["updated_at"])
    if _PROGRESS.first_step is None:
        _PROGRESS.first_step = (wall, int(step))
    first_at, first_step = _PROGRESS.first_step
    if wall > first_at and step > first_step:
        data["steps_per_s"] = round((step - first_step) / (wall - first_at), 4)
    if total is not None:
        _PROGRESS.total = int(total)
    if _PROGRESS.total is not None:  # kept when a call without it (commit_checkpoint's) writes
        data["total"] = _PROGRESS.total
    end = os.environ.get("SLURM_JOB_END_TIME", "")
    if end.isdigit():  # set by slurmd in the batch environment (24.11+; not after an update)
        data["job_end"] = int(end)
    if samples is not None:
        _PROGRESS.sample_fields = _sample_fields(samples, now)
    data |= _PROGRESS.sample_fields  # a report without samples (a commit's) keeps them
    data |= _gradient_fields()
    write_json_atomic(control_dir() / jobdir.PROGRESS, data)
    _PROGRESS.written_at, _PROGRESS.step = now, step


def measurement_window() -> dict[str, Any]:
    """What this process measured of its current batch since its window began (rank 0's:
    samples per second, world size, batch plan, mean gradient statistics); ``{}`` before a
    speed was measured."""
    plan, first, last = current_plan(), _PROGRESS.first, _PROGRESS.last
    if plan is None or first is None or last is None or last[0] <= first[0]:
        return {}
    speed = round((last[1] - first[1]) / (last[0] - first[0]), 3)
    out = {"world_size": _dist.world_size(), "samples_per_s": speed}
    return out | _plan_fields(plan) | _gradient_fields()


def _plan_fields(plan: BatchPlan) -> dict[str, Any]:
    """A batch plan as the progress file and the ledger keep it."""
    return {
        "per_rank_batch": plan.per_rank_batch,
        "accumulation": plan.accumulation,
        "global_batch": plan.global_batch,
        "lr_factor": round(plan.lr_factor, 6),
    }


def _gradient_fields() -> dict[str, float]:
    """The mean of the gradient statistics reported in this window (``{}``: none)."""
    sqr, var, count = _PROGRESS.gradient
    return {"grad_sqr": sqr / count, "grad_var": var / count} if count else {}


def new_measurement_window() -> None:
    """Start measuring anew (the batch changed): speed and gradient statistics from now."""
    _PROGRESS.first = _PROGRESS.last = None
    _PROGRESS.gradient = (0.0, 0.0, 0)
    _PROGRESS.sample_fields = {}


def _sample_fields(samples: int, now: float) -> dict[str, Any]:
    """The samples so far, this attempt's samples per second, the world size and the batch
    plan (:func:`~hpclaunch.runtime.batch_plan`'s last)."""
    assert _PROGRESS.first is not None  # set by report_progress
    since, done = now - _PROGRESS.first[0], samples - _PROGRESS.first[1]
    out: dict[str, Any] = {"samples": int(samples), "world_size": _dist.world_size()}
    if since > 0:
        out["samples_per_s"] = round(done / since, 3)
    plan = current_plan()
    return out if plan is None else out | _plan_fields(plan)


def _flush_progress() -> None:
    """At the process's end: write the newest report that the interval held back."""
    pending = _PROGRESS.pending
    if pending is not None:
        with contextlib.suppress(OSError):  # the job directory may be gone: nothing to tell
            report_progress(
                int(pending["step"] or 0),
                total=pending["total"],
                samples=pending["samples"],
                force=True,
            )


def mark_checkpoint_done(step: int, path: Path, *, seconds: float) -> None:
    """Write ``checkpoint-done.json`` (rank 0): the sidecar may now stop and requeue the job.

    :func:`~hpclaunch.runtime.commit_checkpoint` calls it; adapters whose framework writes its
    own checkpoints (HF Trainer) call it after the framework's save.
    """
    if _dist.rank() != 0:
        return
    request = _WATCHER.request
    data = {
        "step": int(step),
        "path": str(path),
        "seconds": round(seconds, 6),
        "committed_at": time.time(),
        "attempt": attempt(),
        "reason": request.reason if request is not None else "periodic",
    }
    write_json_atomic(control_dir() / jobdir.DONE, data)
    job = os.environ.get("HPCLAUNCH_JOB_DIR")
    if request is None and job:
        # The sidecar logs the checkpoints it asked for; the trainer's own schedule is
        # logged here, so the report counts every commit (it showed 0 for periodic ones).
        with contextlib.suppress(OSError):
            Ledger(job, attempt()).append(
                "checkpoint_periodic", step=int(step), seconds=round(seconds, 6), path=str(path)
            )


def mark_checkpoint_failed(
    step: int, ckpt_dir: Path, error: OSError, resume_step: int | None
) -> None:
    """Write ``checkpoint-failed.json`` (rank 0): the sidecar records ``checkpoint_failed``.

    :func:`~hpclaunch.runtime.commit_checkpoint` calls it when writing a checkpoint fails
    (disk full, quota, I/O error); ``resume_step`` is the newest complete checkpoint's step,
    which stays the resume point. Never raises: the job directory may be full too.
    """
    if _dist.rank() != 0:
        return
    request = _WATCHER.request
    number = error.errno
    data = {
        "step": int(step),
        "dir": str(ckpt_dir),
        "errno": number,
        "errno_name": errno.errorcode.get(number, "") if number is not None else "",
        "error": error.strerror or str(error),
        "resume_step": resume_step,
        "failed_at": time.time(),
        "attempt": attempt(),
        "reason": request.reason if request is not None else "periodic",
    }
    with contextlib.suppress(OSError):
        write_json_atomic(control_dir() / jobdir.FAILED, data)
