"""Every file of a job's directory, named in one place (as submitit's ``JobPaths``): the
planner writes them, the sidecar and the trainer's runtime use them inside the job, and
the commands read them back (status, logs, events, report, results, clean, the arbiter).

The names are relative: a job directory may be on this machine or on a login node reached
over SSH, so :class:`JobDir` joins them with ``/`` and returns text. This module imports
nothing of hpclaunch's: it is read inside the job before anything else.

::

    <job_root>/<submission id>/         JobDir(root)
        job.sbatch                      SCRIPT (job-overquota.sbatch: a split sweep's part)
        events.jsonl                    LEDGER: the sidecar's record of every attempt
        metrics.jsonl                   GPU_METRICS: the nodes' GPU samples
        start-failure.txt               START_FAILURE: why the batch script could not start
        sweep-params.jsonl              SWEEP_PARAMS: one line of parameters a sweep task
        final-metrics.json              FINAL_METRICS: a sweep task's last metrics
        checkpoints/                    CHECKPOINTS: step-N/ directories
        call/call.pkl, call/result.pkl  CALL, RESULT: a function's call and its outcome
        notify/config.json              NOTIFY_CONFIG: where the job's events are told
        tracking.json                   TRACKING_RUNS: the MLflow run(s) made at submit
        tracked-step.json               TRACKED_STEP: the last step logged to the trackers
        tensorboard/                    TENSORBOARD: the job's TensorBoard event files
        wandb/                          (W&B's own: offline runs wait here for a sync)
        control/                        CONTROL: the sidecar and the trainer talk here
            checkpoint-request.json     REQUEST   (the sidecar asks for a checkpoint)
            checkpoint-seen.json        SEEN      (the trainer saw the request)
            checkpoint-done.json        DONE      (the trainer committed one)
            checkpoint-failed.json      FAILED    (the trainer's checkpoint failed, and why)
            progress.json               PROGRESS  (the trainer's step, total, throughput)
            resize-request.json         RESIZE    (hpclaunch resize asks for another size)
            idle-guard-off              GUARD_OFF (nodes that sample no GPU say why)
            idle/                       IDLE      (each node's idle state)
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

__all__ = [
    "CALL",
    "CALL_DIR",
    "CHECKPOINTS",
    "CONTROL",
    "DONE",
    "FAILED",
    "FINAL_METRICS",
    "GPU_METRICS",
    "GUARD_OFF",
    "IDLE",
    "LEDGER",
    "NOTIFY_CONFIG",
    "NOTIFY_DIR",
    "OVERQUOTA_SCRIPT",
    "PROGRESS",
    "REQUEST",
    "RESIZE",
    "RESULT",
    "SCRIPT",
    "SEEN",
    "START_FAILURE",
    "SWEEP_PARAMS",
    "TENSORBOARD",
    "TRACKED_STEP",
    "TRACKING_RUNS",
    "JobDir",
    "in_control",
]

SCRIPT = "job.sbatch"
OVERQUOTA_SCRIPT = "job-overquota.sbatch"
LEDGER = "events.jsonl"
GPU_METRICS = "metrics.jsonl"
START_FAILURE = "start-failure.txt"
SWEEP_PARAMS = "sweep-params.jsonl"
FINAL_METRICS = "final-metrics.json"
CHECKPOINTS = "checkpoints"
CALL_DIR = "call"
#: In :data:`CALL_DIR`.
CALL = "call.pkl"
#: In :data:`CALL_DIR`.
RESULT = "result.pkl"
NOTIFY_DIR = "notify"
NOTIFY_CONFIG = f"{NOTIFY_DIR}/config.json"
TRACKING_RUNS = "tracking.json"
#: Kept outside CONTROL: the sidecar clears the control files each attempt leaves.
TRACKED_STEP = "tracked-step.json"
TENSORBOARD = "tensorboard"
CONTROL = "control"
# In CONTROL:
REQUEST = "checkpoint-request.json"
#: Written once the trainer has seen the request: an exit 0 after it is a stop for the
#: request, not the end of the work (the sidecar requeues it).
SEEN = "checkpoint-seen.json"
DONE = "checkpoint-done.json"
FAILED = "checkpoint-failed.json"
PROGRESS = "progress.json"
RESIZE = "resize-request.json"
GUARD_OFF = "idle-guard-off"
IDLE = "idle"
#: An adaptive sweep's trial stopped by the study's pruner (runtime/trial.py writes it).
TRIAL_PRUNED = "trial-pruned.json"


def in_control(name: str) -> str:
    """``name`` of the control directory, relative to the job directory."""
    return f"{CONTROL}/{name}"


class _Entry:
    """A file of every job directory as a read-only attribute: ``JobDir(root).ledger`` is
    ``JobDir(root).file(LEDGER)``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, jobdir: JobDir, owner: type[JobDir] | None = None) -> str:
        return jobdir.file(self.name)


@dataclass(frozen=True)
class JobDir:
    """One job's directory (``HPCLAUNCH_JOB_DIR``), here or on the login node: each path
    as text, joined with ``/``."""

    root: str

    def file(self, name: str) -> str:
        """``name`` (relative, e.g. :data:`LEDGER` or ``in_control(PROGRESS)``) in it."""
        return posixpath.join(self.root, name)

    script = _Entry(SCRIPT)
    ledger = _Entry(LEDGER)
    control = _Entry(CONTROL)
    checkpoints = _Entry(CHECKPOINTS)
    call_dir = _Entry(CALL_DIR)
    #: The pickled call of a function's job.
    call = _Entry(f"{CALL_DIR}/{CALL}")
    #: What the function returned or raised (``calls/payload.py``'s format).
    result = _Entry(f"{CALL_DIR}/{RESULT}")
