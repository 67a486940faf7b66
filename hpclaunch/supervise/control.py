"""The control directory: how the sidecar and the trainer talk, whatever the launcher.

``$HPCLAUNCH_CONTROL_DIR`` (``$HPCLAUNCH_JOB_DIR/control``, mode 0700) holds three small
JSON files, each written atomically (temp file + fsync + rename):

``checkpoint-request.json`` (sidecar → every rank)
    ``{"reason": "preemption"|"time_limit"|"cancel"|"manual", "requested_at": ts,
    "deadline": ts}``.
    Ranks poll for it (one ``stat`` per step): a file on the shared job directory reaches
    every rank under torchrun, DeepSpeed, accelerate and srun alike, where a signal would
    not (torchrun forwards only some signals and kills workers 30 s after SIGTERM;
    DataLoader workers die on SIGTERM).
``checkpoint-done.json`` (rank 0 → sidecar, after the atomic commit)
    ``{"step": N, "path": "...", "seconds": t, "committed_at": ts, "reason": r}``: ``r`` is
    the request's reason when rank 0 knew of a request at the commit, else
    :data:`PERIODIC` (the trainer's own schedule; it has not seen the request yet).
``checkpoint-failed.json`` (rank 0 → sidecar, when a checkpoint could not be written)
    ``{"step", "errno", "errno_name", "error", "dir", "resume_step", "failed_at", ...}``:
    the sidecar records it as ``checkpoint_failed``.
``resize-request.json`` (``hpclaunch resize`` → sidecar, elastic jobs)
    ``{"nodes": K, "why": "...", "by": "...", "requested_at": ts, "force": bool}``:
    the sidecar takes it, asks for a checkpoint and restarts the job at K nodes.
``progress.json`` (rank 0, now and then)
    ``{"step": N, "updated_at": ts, ...}``: the crash-loop breaker and "steps lost" read it.

The file names and the atomic write are the runtime's (:mod:`hpclaunch.runtime.control`,
:mod:`hpclaunch._fs`): one definition of the contract for both sides.

Request, done and failed files of an earlier attempt are stale: the sidecar records and removes them
before an attempt starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpclaunch import _fs, jobdir
from hpclaunch._private import make_private_dirs

__all__ = [
    "PERIODIC",
    "clear_stale",
    "prepare",
    "read_json",
    "read_step",
    "write_json_atomic",
]

#: The done file's ``reason`` for a commit made without knowing of a request
#: (:func:`hpclaunch.runtime.control.mark_checkpoint_done`).
PERIODIC = "periodic"


def prepare(control_dir: str | Path) -> Path:
    """Create the control directory (0700) if needed and return it."""
    path = Path(control_dir)
    make_private_dirs(path)
    return path


def write_json_atomic(path: str | Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    _fs.write_json_atomic(Path(path), data)


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` if it is missing or not an object."""
    value = _fs.read_json(Path(path))
    return value if isinstance(value, dict) else None


def read_step(path: str | Path) -> int | None:
    """The ``step`` of a progress/done file, or ``None``."""
    data = read_json(path)
    step = None if data is None else data.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def clear_stale(control_dir: str | Path) -> list[tuple[str, dict[str, Any] | None]]:
    """Remove the request, done, failed and seen files left by an earlier attempt; return
    what they held."""
    removed = []
    # A resize asked of an earlier attempt is stale too: the job may be at that size now.
    for name in (jobdir.REQUEST, jobdir.DONE, jobdir.FAILED, jobdir.SEEN, jobdir.RESIZE):
        path = Path(control_dir) / name
        if path.exists():
            removed.append((name, read_json(path)))
            path.unlink(missing_ok=True)
    return removed
