"""Lightning: checkpoint through the atomic commit, on schedule or on request, then stop.

::

    from hpclaunch.runtime.adapters.lightning import HpclaunchCheckpoint, resume_ckpt_path

    trainer = L.Trainer(..., callbacks=[HpclaunchCheckpoint(every=500)])
    trainer.fit(model, ckpt_path=resume_ckpt_path())

``trainer.save_checkpoint`` is itself collective under DDP (rank 0 writes, then a barrier),
so every rank calls it, into the same temporary directory (``all_ranks=True``); the commit
then renames it to ``step-<step>``. ``lightning`` (or ``pytorch_lightning``) is imported only
when ``HpclaunchCheckpoint`` or ``ElasticCursor`` is first used.

An elastic job (``elastic:`` in the spec) feeds this rank's micro-batches from a
:class:`~hpclaunch.runtime.ElasticSampler` and keeps its cursor in the checkpoint, so that a
run resumed at another size takes the same samples at every step::

    plan = runtime.batch_plan()
    sampler = runtime.ElasticSampler(len(dataset), plan, seed=0)
    trainer = L.Trainer(
        max_steps=..., accumulate_grad_batches=plan.accumulation,
        use_distributed_sampler=False,   # the sampler already splits the global batch
        callbacks=[HpclaunchCheckpoint(every=500), ElasticCursor(sampler)],
    )
    trainer.fit(model, DataLoader(dataset, batch_sampler=sampler), ckpt_path=resume_ckpt_path())
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.runtime.checkpoint import commit_checkpoint, resume_point
from hpclaunch.runtime.control import checkpoint_requested, report_progress, should_checkpoint

if TYPE_CHECKING:
    from hpclaunch.runtime.elastic import ElasticSampler

    HpclaunchCheckpoint: type  # built on first access by __getattr__ (imports the framework)
    ElasticCursor: type

__all__ = [
    "CKPT_FILE",
    "CURSOR_KEY",
    "CheckpointOnRequest",
    "CursorKeeper",
    "ElasticCursor",
    "HpclaunchCheckpoint",
    "resume_ckpt_path",
]

CKPT_FILE = "model.ckpt"
#: Where the cursor goes in Lightning's checkpoint dict.
CURSOR_KEY = "hpclaunch_elastic_cursor"


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


class CursorKeeper:
    """The logic of ``ElasticCursor``, independent of Lightning: the samples consumed by the
    optimizer steps done (the sampler's own cursor runs ahead: the loader prefetches) go
    into each checkpoint, and a checkpoint loaded sets the sampler's cursor before the
    first batch is drawn.

    Args:
        sampler: The ``batch_sampler`` of the training DataLoader.
    """

    def __init__(self, sampler: ElasticSampler) -> None:
        self.sampler = sampler
        self._cursor = sampler.cursor  # at the start of this fit (or the loaded checkpoint's)
        self._step = 0  # the global step then

    def on_train_start(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
        # The global step only: the sampler's cursor may have moved already (Lightning
        # fetches the first batch before this hook: seen, one global batch ahead).
        self._step = int(trainer.global_step)

    def cursor(self, trainer: Any) -> int:
        """Samples consumed, all ranks together, by the optimizer steps done so far."""
        steps = int(trainer.global_step) - self._step
        return self._cursor + steps * self.sampler.plan.global_batch

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        checkpoint[CURSOR_KEY] = self.cursor(trainer)

    def on_load_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        if CURSOR_KEY in checkpoint:
            self.sampler.cursor = self._cursor = int(checkpoint[CURSOR_KEY])


def resume_ckpt_path(ckpt_dir: Path | str | None = None) -> str | None:
    """``ckpt_path`` for ``trainer.fit``: the newest complete checkpoint's file, or None."""
    ckpt = resume_point(ckpt_dir)
    return None if ckpt is None else str(ckpt.path / CKPT_FILE)


def _callback_base() -> Any:
    # By name, not ``from ... import``: the two packages' Callback types differ, and mypy
    # checks whichever of them happens to be installed.
    for module in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(module).Callback
        except ImportError:
            continue
    raise ImportError(  # pragma: no cover - depends on the environment
        "hpclaunch's Lightning callbacks need Lightning: pip install lightning"
    )


def _make_callbacks() -> dict[str, type]:
    callback: Any = _callback_base()

    class HpclaunchCheckpoint(CheckpointOnRequest, callback):  # type: ignore[misc]
        """A Lightning ``Callback`` that commits checkpoints atomically and stops on request."""

    class ElasticCursor(CursorKeeper, callback):  # type: ignore[misc]
        """A Lightning ``Callback`` that keeps an elastic sampler's cursor in checkpoints."""

    return {"HpclaunchCheckpoint": HpclaunchCheckpoint, "ElasticCursor": ElasticCursor}


def __getattr__(name: str) -> Any:
    if name in ("HpclaunchCheckpoint", "ElasticCursor"):
        made = _make_callbacks()
        globals().update(made)
        return made[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
