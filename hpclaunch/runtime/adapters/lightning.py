"""Lightning: checkpoint through the atomic commit, on schedule or on request, then stop.

::

    from hpclaunch.runtime.adapters.lightning import HpclaunchCheckpoint, resume_ckpt_path

    trainer = L.Trainer(..., callbacks=[HpclaunchCheckpoint(every=500)])
    trainer.fit(model, ckpt_path=resume_ckpt_path())

``trainer.save_checkpoint`` is itself collective under DDP (rank 0 writes, then a barrier),
so every rank calls it, into the same temporary directory (``all_ranks=True``); the commit
then renames it to ``step-<step>``. ``lightning`` (or ``pytorch_lightning``) is imported only
when ``HpclaunchCheckpoint`` is first used.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.runtime.checkpoint import commit_checkpoint, resume_point
from hpclaunch.runtime.control import checkpoint_requested, report_progress, should_checkpoint

if TYPE_CHECKING:
    HpclaunchCheckpoint: type  # built on first access by __getattr__ (imports the framework)

__all__ = ["CKPT_FILE", "CheckpointOnRequest", "HpclaunchCheckpoint", "resume_ckpt_path"]

CKPT_FILE = "model.ckpt"


class CheckpointOnRequest:
    """The callback's logic, independent of Lightning (``HpclaunchCheckpoint`` adds the base).

    Args:
        every: Also checkpoint every this many optimizer steps (``None``: on request only).
        ckpt_dir: Default ``$HPCLAUNCH_CHECKPOINT_DIR``.
        keep: Complete checkpoints to keep.
    """

    def __init__(
        self, every: int | None = None, *, ckpt_dir: Path | str | None = None, keep: int = 3
    ) -> None:
        self.every = every
        self.ckpt_dir = ckpt_dir
        self.keep = keep
        self._last_step: int | None = None

    def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
        step = int(trainer.global_step)
        if step == self._last_step:  # gradient accumulation: the same optimizer step again
            return
        self._last_step = step
        report_progress(step)
        if not should_checkpoint(step, every=self.every):  # every rank, every step
            return
        commit_checkpoint(
            step,
            lambda tmp: trainer.save_checkpoint(str(tmp / CKPT_FILE)),
            ckpt_dir=self.ckpt_dir,
            keep=self.keep,
            all_ranks=True,
        )
        if checkpoint_requested():
            trainer.should_stop = True


def resume_ckpt_path(ckpt_dir: Path | str | None = None) -> str | None:
    """``ckpt_path`` for ``trainer.fit``: the newest complete checkpoint's file, or None."""
    ckpt = resume_point(ckpt_dir)
    return None if ckpt is None else str(ckpt.path / CKPT_FILE)


def _make_callback() -> type:
    # By name, not ``from ... import``: the two packages' Callback types differ, and mypy
    # checks whichever of them happens to be installed.
    callback: Any = None
    for module in ("lightning.pytorch", "pytorch_lightning"):
        try:
            callback = importlib.import_module(module).Callback
            break
        except ImportError:
            continue
    if callback is None:  # pragma: no cover - depends on the environment
        raise ImportError("HpclaunchCheckpoint needs Lightning: pip install lightning")

    class HpclaunchCheckpoint(CheckpointOnRequest, callback):  # type: ignore[misc]
        """A Lightning ``Callback`` that commits checkpoints atomically and stops on request."""

    return HpclaunchCheckpoint


def __getattr__(name: str) -> Any:
    if name == "HpclaunchCheckpoint":
        cls = _make_callback()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
