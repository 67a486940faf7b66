"""Hugging Face ``transformers.Trainer``: save and stop when the sidecar asks.

::

    from hpclaunch.runtime.adapters.hf import HpclaunchCallback, resume_checkpoint

    trainer = Trainer(..., callbacks=[HpclaunchCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(args.output_dir))

The Trainer writes its own ``checkpoint-<step>`` directories in place (not atomically), so
the callback seals each one with a ``manifest.json`` (file sizes) after the save, and
:func:`resume_checkpoint` returns the newest sealed one: a save cut short by a kill has no
manifest and is skipped. ``transformers`` is imported only when ``HpclaunchCallback`` or
``ElasticTrainer`` is first used, not when this module is.

An elastic job (``elastic:`` in the spec) trains with ``ElasticTrainer``: its training loader
is this rank's micro-batches from a :class:`~hpclaunch.runtime.ElasticSampler` (not
accelerate's sharding of a loader), and each checkpoint keeps the sampler's cursor, so that a
run resumed at another size takes the same samples at every step::

    plan = runtime.batch_plan()
    args = TrainingArguments(..., max_steps=..., per_device_train_batch_size=plan.per_rank_batch,
                             gradient_accumulation_steps=plan.accumulation)
    trainer = ElasticTrainer(model=model, args=args, train_dataset=data,
                             sampler=runtime.ElasticSampler(len(data), plan, seed=0),
                             callbacks=[HpclaunchCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(args.output_dir))
"""

from __future__ import annotations

import json
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
    from hpclaunch.runtime.elastic import ElasticSampler

    HpclaunchCallback: type  # built on first access by __getattr__ (imports the framework)
    ElasticTrainer: type

__all__ = [
    "CURSOR_FILE",
    "ElasticTrainer",
    "HpclaunchCallback",
    "SaveOnRequest",
    "resume_checkpoint",
]

#: The sampler's cursor in each checkpoint directory of an ``ElasticTrainer``.
CURSOR_FILE = "hpclaunch-cursor.json"


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
        from transformers import TrainerCallback  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 (optional)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("HpclaunchCallback needs transformers: pip install transformers") from exc

    class HpclaunchCallback(SaveOnRequest, TrainerCallback):  # type: ignore[misc, valid-type, unused-ignore]
        """A ``TrainerCallback`` that saves and stops on the sidecar's checkpoint request."""

    return HpclaunchCallback


def _make_trainer() -> type:
    try:
        from torch.utils.data import DataLoader  # noqa: PLC0415 (optional)
        from transformers import Trainer  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 (optional)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("ElasticTrainer needs transformers: pip install transformers") from exc

    class ElasticTrainer(Trainer):  # type: ignore[misc, valid-type, unused-ignore]
        """A ``Trainer`` whose training loader follows an ``ElasticSampler`` and whose
        checkpoints keep its cursor (``sampler=`` is required; ``max_steps`` too: the
        sampler's stream has no end)."""

        def __init__(self, *args: Any, sampler: ElasticSampler, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.elastic_sampler = sampler
            self._cursor_at = (sampler.cursor, 0)  # (cursor, global step) of the start
            # The sampler starts at the resumed cursor: the Trainer's own skip of the
            # batches already trained in the epoch (skip_first_batches) would skip twice.
            self.args.ignore_data_skip = True

        def get_train_dataloader(self) -> Any:
            # Not accelerate's prepare(): it would shard the batch sampler over the ranks
            # again (each rank already gets its own micro-batches). The Trainer moves each
            # batch to the device itself (_prepare_inputs).
            dataset: Any = self.train_dataset  # map-style: the sampler gives indices
            return DataLoader(
                dataset,
                batch_sampler=self.elastic_sampler,
                collate_fn=self.data_collator,
                num_workers=self.args.dataloader_num_workers,
            )

        def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
            if isinstance(resume_from_checkpoint, str):
                saved = json.loads((Path(resume_from_checkpoint) / CURSOR_FILE).read_text())
                self._cursor_at = (int(saved["cursor"]), int(saved["step"]))
                self.elastic_sampler.cursor = self._cursor_at[0]
            return super().train(resume_from_checkpoint, *args, **kwargs)

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            # Into the checkpoint's directory before the callbacks' on_save (HpclaunchCallback
            # seals it there): transformers 5.x names it checkpoint-<global step>.
            super()._save_checkpoint(model, trial)
            cursor, step = self._cursor_at
            done = int(self.state.global_step)
            if self.is_world_process_zero():
                folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{done}"
                batch = self.elastic_sampler.plan.global_batch
                record = {"cursor": cursor + (done - step) * batch, "step": done}
                (folder / CURSOR_FILE).write_text(json.dumps(record))

    return ElasticTrainer


def __getattr__(name: str) -> Any:
    makers = {"HpclaunchCallback": _make_callback, "ElasticTrainer": _make_trainer}
    if name in makers:
        cls = makers[name]()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
