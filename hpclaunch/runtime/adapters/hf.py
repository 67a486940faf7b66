"""Hugging Face ``transformers.Trainer``: save and stop when the sidecar asks.

::

    from hpclaunch.runtime.adapters.hf import HpclaunchCallback, resume_checkpoint

    trainer = Trainer(..., callbacks=[HpclaunchCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(args.output_dir))

The Trainer writes its own ``checkpoint-<step>`` directories in place (not atomically), so
the callback seals each one with a ``manifest.json`` (file sizes) after the save, and
:func:`resume_checkpoint` returns the newest sealed one: a save cut short by a kill has no
manifest and is skipped. ``transformers`` is imported only when ``HpclaunchCallback`` is
first used, not when this module is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpclaunch.runtime import _dist
from hpclaunch.runtime.checkpoint import _write_manifest, verify_checkpoint
from hpclaunch.runtime.control import (
    checkpoint_requested,
    mark_checkpoint_done,
    report_progress,
    should_checkpoint,
)

if TYPE_CHECKING:
    HpclaunchCallback: type  # built on first access by __getattr__ (imports the framework)

__all__ = ["HpclaunchCallback", "SaveOnRequest", "resume_checkpoint"]


class SaveOnRequest:
    """The callback's logic, independent of transformers (``HpclaunchCallback`` adds the base).

    ``on_step_end`` runs on every rank at every step, so the collective
    :func:`~hpclaunch.runtime.should_checkpoint` is safe there: on a request every rank sets
    ``control.should_save`` at the same step. ``on_save`` then seals the checkpoint, tells the
    sidecar (``checkpoint-done.json``) and sets ``control.should_training_stop``.
    """

    def __init__(self) -> None:
        self._stop_after_save = False
        self._save_started = 0.0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        report_progress(step)
        if should_checkpoint(step) and checkpoint_requested():
            control.should_save = True
            self._stop_after_save = True
            self._save_started = time.monotonic()
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        path = Path(args.output_dir) / f"checkpoint-{step}"
        if _dist.rank() == 0 and path.is_dir():
            _write_manifest(path, step, digest=False)
        if self._stop_after_save:
            mark_checkpoint_done(step, path, seconds=time.monotonic() - self._save_started)
            control.should_training_stop = True
        return control


def resume_checkpoint(output_dir: Path | str) -> str | None:
    """The newest ``checkpoint-<step>`` in ``output_dir`` with a complete manifest, or None.

    Pass it to ``trainer.train(resume_from_checkpoint=...)``.
    """
    root = Path(output_dir)
    found = []
    if root.is_dir():
        for entry in root.glob("checkpoint-*"):
            suffix = entry.name.removeprefix("checkpoint-")
            if suffix.isdigit() and entry.is_dir():
                found.append((int(suffix), entry))
    for _step, path in sorted(found, reverse=True):
        if verify_checkpoint(path, verify="size") is not None:
            return str(path)
    return None


def _make_callback() -> type:
    try:
        from transformers import TrainerCallback  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("HpclaunchCallback needs transformers: pip install transformers") from exc

    class HpclaunchCallback(SaveOnRequest, TrainerCallback):  # type: ignore[misc, valid-type, unused-ignore]
        """A ``TrainerCallback`` that saves and stops on the sidecar's checkpoint request."""

    return HpclaunchCallback


def __getattr__(name: str) -> Any:
    if name == "HpclaunchCallback":
        cls = _make_callback()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
