"""The job's tracker runs as the trainer logs to them: W&B, MLflow and TensorBoard, each step
once and in order across requeues (the adaptor that imports the trackers, lazily).

The spec's ``tracking:`` names the trackers (``HPCLAUNCH_TRACKING``); the sidecar exported
each one's run (W&B's id with ``resume=allow``, MLflow's run made at submit). Every
``runtime.report_progress(step, metrics={...})`` on rank 0 logs ``metrics`` at ``step``
to each of them, starting them at the first call (a run the trainer started itself,
``wandb.init()`` or ``mlflow.start_run()``, is used as it is).

After a requeue the trainer resumes from its last checkpoint and reports again the steps
that the attempt which died had already logged after it. Each tracker takes a step only
past the last one it keeps:

- MLflow: its run's metric history says (a store written at each call);
- TensorBoard: ``tracked-step.json`` in the job directory, written after the event file
  was flushed; the writer starts with ``purge_step`` one past it, so any event written
  later by an attempt that died is dropped;
- W&B: ``tracked-step.json`` too, written once ``wandb.finish()`` returned at the
  attempt's end (an attempt stopped for a preemption or the time limit ends so: Slurm's
  warning, ``--signal``, reaches the sidecar, which asks the trainer to stop). A W&B run
  whose processes were killed (SIGKILL, a node failure, or a SIGTERM to the whole step: a
  preemption without warning, ``scontrol requeue``) never wrote what it held; the next attempt
  logs again every step after the kept one that it retrains. Offline, each attempt's run
  directory holds the steps it added, and ``hpclaunch sync`` uploads them in order into
  the one run (online, a resumed run refuses a step below its own too).

So each tracker shows each step once, in order, with the values of the attempt that first
logged it and lived to keep it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch._fs import write_json_atomic
from hpclaunch.runtime._paths import job_dir
from hpclaunch.supervise.tracker_env import tracked

__all__ = ["log_metrics", "tensorboard_dir", "tracked_step"]


def tensorboard_dir() -> Path:
    """Where the job's (the sweep task's) TensorBoard event files go: ``<job dir>/tensorboard``
    (``hpclaunch forward JOB 6006`` and ``tensorboard --logdir`` there)."""
    return job_dir() / jobdir.TENSORBOARD


def tracked_step(tracker: str) -> int | None:
    """The last step ``tracker`` (``wandb``, ``tensorboard``) keeps from earlier attempts
    (``None``: none yet)."""
    step = _kept().get(tracker)
    return step if isinstance(step, int) else None


def _kept() -> dict[str, Any]:
    try:
        data = json.loads((job_dir() / jobdir.TRACKED_STEP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _keep(tracker: str, step: int) -> None:
    write_json_atomic(job_dir() / jobdir.TRACKED_STEP, {**_kept(), tracker: step})


class _Runs:
    def __init__(self) -> None:
        self.started = False
        self.last: dict[str, int | None] = {}  # each tracker's last step kept
        self.wandb: Any = None
        self.mlflow: Any = None
        self.mlflow_checked: dict[str, int | None] = {}  # each metric's last step kept
        self.writer: Any = None
        self.ours: list[Any] = []  # what to end at exit: the runs this module started
        self.logged: dict[str, int] = {}  # each tracker's last step logged by this attempt


_RUNS = _Runs()


def _params() -> dict[str, Any]:
    raw = os.environ.get("HPCLAUNCH_SWEEP_PARAMS")
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _start(trackers: set[str]) -> None:
    _RUNS.started = True
    _RUNS.last = {name: tracked_step(name) for name in ("wandb", "tensorboard")}
    params = _params()
    if "wandb" in trackers:
        with _needs("wandb"):
            import wandb  # noqa: PLC0415 (heavy, optional: only for a job tracked by W&B)

        _RUNS.wandb = wandb.run
        if _RUNS.wandb is None:  # its id, resume, mode, dir, name: the sidecar's variables
            _RUNS.wandb = wandb.init(config=params or None)
            _RUNS.ours.append(_finish_wandb)
    if "mlflow" in trackers:
        with _needs("mlflow"):
            import mlflow  # noqa: PLC0415 (heavy, optional: only for a job tracked by MLflow)

        _RUNS.mlflow = mlflow
        if mlflow.active_run() is None:  # MLFLOW_RUN_ID: the run the submit made
            mlflow.start_run()
            _RUNS.ours.append(mlflow.end_run)
        if params:
            # Logged at submit, or by an earlier attempt: MLflow refuses a second time.
            with contextlib.suppress(Exception):
                mlflow.log_params(params)
    if "tensorboard" in trackers:
        with _needs("tensorboard"):
            from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 (heavy, optional)

        last = _RUNS.last["tensorboard"]
        purge = None if last is None else last + 1
        _RUNS.writer = SummaryWriter(str(tensorboard_dir()), purge_step=purge)
        _RUNS.ours.append(_RUNS.writer.close)
    atexit.register(_end)


def _finish_wandb() -> None:
    """End the W&B run, then keep its last step: only now is it in the run's files."""
    _RUNS.wandb.finish()
    if (step := _RUNS.logged.get("wandb")) is not None:
        _keep("wandb", step)


@contextlib.contextmanager
def _needs(tracker: str) -> Iterator[None]:
    """Say which tracker of the spec lacks its package here, and how to install it."""
    try:
        yield
    except ImportError as exc:
        raise RuntimeError(
            f"hpclaunch: the job's tracking: names {tracker}, but this Python "
            f"({sys.executable}) cannot import it ({exc}): pip install 'hpclaunch[tracking]' "
            "into the job's environment"
        ) from exc


def _end() -> None:
    for end in reversed(_RUNS.ours):
        with contextlib.suppress(Exception):  # no tracker's end fails the trainer's exit
            end()
    _RUNS.ours.clear()


def _mlflow_last(keys: list[str]) -> int | None:
    """The last step the MLflow run keeps of ``keys``: asked of its store once per key (an
    earlier attempt's), then this attempt's own."""
    new = [key for key in keys if key not in _RUNS.mlflow_checked]
    if new:
        run = _RUNS.mlflow.active_run()
        client = _RUNS.mlflow.tracking.MlflowClient()
        for key in new:
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            _RUNS.mlflow_checked[key] = max(steps, default=None)
    known = [_RUNS.mlflow_checked[key] for key in keys]
    return max((s for s in known if s is not None), default=None)


def log_metrics(step: int, metrics: Mapping[str, Any]) -> bool:
    """Log ``metrics`` at ``step`` to the job's trackers (rank 0; ``report_progress`` calls
    it); whether they were logged (not: no tracker, a non-numeric value only, or a step an
    earlier attempt already logged)."""
    trackers = tracked(os.environ)
    if not trackers:  # most jobs: one lookup, nothing more on the training loop's path
        return False
    values = {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }
    if not values:
        return False
    if not _RUNS.started:
        _start(trackers)
    step = int(step)
    logged = False
    if _RUNS.wandb is not None and _new(step, _RUNS.last["wandb"]):
        _RUNS.wandb.log(values, step=step)
        _RUNS.logged["wandb"] = step
        logged = True
    if _RUNS.mlflow is not None and _new(step, _mlflow_last(list(values))):
        _RUNS.mlflow.log_metrics(values, step=step)
        _RUNS.mlflow_checked.update(dict.fromkeys(values, step))
        logged = True
    if _RUNS.writer is not None and _new(step, _RUNS.last["tensorboard"]):
        for key, value in values.items():
            _RUNS.writer.add_scalar(key, value, step)
        _RUNS.writer.flush()  # on disk before the step is kept
        _keep("tensorboard", step)
        logged = True
    return logged


def _new(step: int, last: int | None) -> bool:
    return last is None or step > last
