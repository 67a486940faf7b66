"""The HF Trainer and Lightning adapters against the real frameworks.

Neither framework is a dependency of hpclaunch; the test setup installs them
(``ensure_venv`` in scripts/lib.sh, the ``frameworks`` extra). Without them these tests skip
locally and fail under ``CI=true``; the callbacks' logic is also covered with small fakes in
tests/unit/runtime/test_runtime.py. The model is built in the test: nothing comes from a hub.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Lightning 2.6 on torch 2.13 warns (FutureWarning) about torch's pytree LeafSpec.
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::UserWarning", "ignore::FutureWarning"
)


def _framework(*names: str) -> ModuleType:
    """The first of ``names`` that imports; skip without any, or fail under ``CI=true``."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    message = f"{' or '.join(names)} is not installed (scripts/lib.sh ensure_venv installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def requested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job dir whose control dir already holds a checkpoint request."""
    monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(tmp_path))
    for name in ("HPCLAUNCH_CONTROL_DIR", "HPCLAUNCH_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "control").mkdir()
    request = {"reason": "manual", "requested_at": time.time(), "deadline": time.time() + 60}
    (tmp_path / "control" / "checkpoint-request.json").write_text(json.dumps(request))
    return tmp_path


def test_hf_trainer_saves_and_stops_on_request(requested: Path) -> None:
    _framework("transformers")
    import torch
    from transformers import Trainer, TrainingArguments  # type: ignore[import-not-found, unused-ignore]

    from hpclaunch.runtime.adapters.hf import HpclaunchCallback, resume_checkpoint

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
            return {"loss": ((self.linear(x).squeeze(-1) - labels) ** 2).mean()}

    data = [{"x": torch.randn(2), "labels": torch.tensor(0.0)} for _ in range(64)]
    out = requested / "out"
    args = TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=4,
        max_steps=50,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
    )
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[HpclaunchCallback()])
    trainer.train()
    assert trainer.state.global_step == 1  # saved at the first step, then stopped
    assert resume_checkpoint(out) == str(out / "checkpoint-1")
    done = json.loads((requested / "control" / "checkpoint-done.json").read_text())
    assert done["step"] == 1


def test_lightning_commits_atomically_and_stops_on_request(requested: Path) -> None:
    pl: Any = _framework("lightning.pytorch", "pytorch_lightning")
    import torch

    from hpclaunch.runtime.adapters.lightning import HpclaunchCheckpoint, resume_ckpt_path

    class Tiny(pl.LightningModule):  # type: ignore[misc, name-defined, unused-ignore]
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss: torch.Tensor = (self.linear(batch[0]) ** 2).mean()
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 2)))
    trainer = pl.Trainer(
        max_steps=50,
        callbacks=[HpclaunchCheckpoint()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        accelerator="cpu",
    )
    trainer.fit(Tiny(), loader)
    assert trainer.global_step == 1
    path = resume_ckpt_path()
    assert path == str(requested / "checkpoints" / "step-000000001" / "model.ckpt")
    assert Path(path).stat().st_size > 0


def _one_rank_plan(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Outside any job (no control or checkpoint dir, one rank): a global batch of 8, 4 per
    micro-step, 2 micro-steps per optimizer step."""
    from hpclaunch.runtime import batch_plan

    for name in ("HPCLAUNCH_CONTROL_DIR", "HPCLAUNCH_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return batch_plan(global_batch=8, max_batch_per_gpu=4, world_size=1)


def test_lightning_elastic_run_resumed_takes_the_same_samples_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ElasticCursor`` keeps the sampler's cursor in Lightning's checkpoint: a run stopped
    after its checkpoint of step 3, resumed by a new Trainer from that checkpoint,
    trains the same samples at every step as an uninterrupted run (a global batch of 8, 4
    per micro-step, 2 micro-steps per optimizer step)."""
    pl: Any = _framework("lightning.pytorch", "pytorch_lightning")
    import torch

    from hpclaunch.runtime import ElasticSampler, step_digest
    from hpclaunch.runtime.adapters.lightning import (
        ElasticCursor,
        HpclaunchCheckpoint,
        resume_ckpt_path,
    )

    plan = _one_rank_plan(monkeypatch)
    assert plan.accumulation == 2

    class Seen(pl.LightningModule):  # type: ignore[misc, name-defined, unused-ignore]
        def __init__(self, seen: list[list[int]]) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(1, 1)
            self.seen = seen

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.seen.append([int(i) for i in batch[0]])
            loss: torch.Tensor = (self.linear(batch[1]) ** 2).mean()
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.arange(50), torch.randn(50, 1))

    def fit(job_dir: Path, steps: int, *, stop_after: int | None = None) -> list[list[int]]:
        monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(job_dir))
        (job_dir / "control").mkdir(parents=True, exist_ok=True)
        seen: list[list[int]] = []
        sampler = ElasticSampler(len(data), plan, seed=3, rank=0)

        class StopAt(pl.Callback):  # type: ignore[misc, name-defined, unused-ignore]
            """Stops the run once the periodic checkpoint of ``stop_after`` is committed."""

            def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
                if stop_after is not None and trainer.global_step == stop_after:
                    trainer.should_stop = True

        trainer = pl.Trainer(
            max_steps=steps,
            accumulate_grad_batches=plan.accumulation,
            use_distributed_sampler=False,
            callbacks=[HpclaunchCheckpoint(every=3), ElasticCursor(sampler), StopAt()],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            accelerator="cpu",
        )
        loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)
        trainer.fit(Seen(seen), loader, ckpt_path=resume_ckpt_path())
        return seen

    whole = fit(tmp_path / "whole", 8)
    cut = tmp_path / "cut"
    first = fit(cut, 8, stop_after=3)
    rest = fit(cut, 8)
    assert len(whole) == 16  # 8 steps x 2 micro-batches
    assert len(first) == 6  # stopped after step 3
    assert first + rest == whole, (first, rest, whole)
    steps = [whole[i] + whole[i + 1] for i in range(0, 16, 2)]
    assert len({step_digest(sorted(s)) for s in steps}) == 8  # 8 different global batches


def test_hf_elastic_run_resumed_takes_the_same_samples_at_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ElasticTrainer`` feeds the sampler's micro-batches and keeps its cursor in each
    checkpoint: a run stopped after its checkpoint of step 3, resumed from it by a new
    Trainer, trains the same samples at every step as an uninterrupted run."""
    _framework("transformers")
    import torch
    from transformers import (  # type: ignore[import-not-found, unused-ignore]
        TrainerCallback,
        TrainingArguments,
    )

    from hpclaunch.runtime import ElasticSampler
    from hpclaunch.runtime.adapters.hf import (
        CURSOR_FILE,
        ElasticTrainer,
        HpclaunchCallback,
        resume_checkpoint,
    )

    plan = _one_rank_plan(monkeypatch)

    class Seen(torch.nn.Module):
        def __init__(self, seen: list[list[int]]) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(1, 1)
            self.seen = seen

        def forward(self, idx: torch.Tensor, x: torch.Tensor) -> dict[str, Any]:
            self.seen.append([int(i) for i in idx])
            return {"loss": (self.linear(x) ** 2).mean()}

    data = [{"idx": torch.tensor(i), "x": torch.randn(1)} for i in range(50)]

    class StopAt(TrainerCallback):  # type: ignore[misc, valid-type, unused-ignore]
        def __init__(self, step: int | None) -> None:
            self.step = step

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step == self.step:
                control.should_training_stop = True
            return control

    def fit(job_dir: Path, *, stop_after: int | None = None) -> list[list[int]]:
        monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(job_dir))
        (job_dir / "control").mkdir(parents=True, exist_ok=True)
        seen: list[list[int]] = []
        args = TrainingArguments(
            output_dir=str(job_dir / "out"),
            per_device_train_batch_size=plan.per_rank_batch,
            gradient_accumulation_steps=plan.accumulation,
            max_steps=8,
            save_strategy="steps",
            save_steps=3,
            report_to=[],
            use_cpu=True,
        )
        trainer = ElasticTrainer(
            model=Seen(seen),
            args=args,
            train_dataset=data,
            sampler=ElasticSampler(len(data), plan, seed=3, rank=0),
            callbacks=[HpclaunchCallback(), StopAt(stop_after)],
        )
        trainer.train(resume_from_checkpoint=resume_checkpoint(job_dir / "out"))
        return seen

    whole = fit(tmp_path / "whole")
    cut = tmp_path / "cut"
    first = fit(cut, stop_after=3)
    saved = json.loads((cut / "out" / "checkpoint-3" / CURSOR_FILE).read_text())
    assert saved == {"cursor": 24, "step": 3}
    rest = fit(cut)
    assert len(whole) == 16  # 8 steps x 2 micro-batches
    assert len(first) == 6
    assert first + rest == whole, (first, rest, whole)
