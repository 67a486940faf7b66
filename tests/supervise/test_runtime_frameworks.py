"""The HF Trainer and Lightning adapters against the real frameworks, when they are installed.

Neither framework is a dependency of hpclaunch (nor installed by its test setup); without
them these tests skip, and the callbacks' logic is covered with small fakes in
tests/unit/test_runtime.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


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
    pytest.importorskip("transformers", reason="transformers is not installed (optional)")
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
    try:
        import lightning.pytorch as pl  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        pl = pytest.importorskip("pytorch_lightning", reason="Lightning is not installed")
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
