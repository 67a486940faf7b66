"""The plain-PyTorch adapter: save_torch / load_torch through the atomic commit."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hpclaunch.runtime.adapters.torch import load_torch, save_torch  # noqa: E402


def test_round_trip_with_model_optimiser_and_rng(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HPCLAUNCH_JOB_DIR", str(tmp_path))  # control files go there
    monkeypatch.delenv("HPCLAUNCH_CONTROL_DIR", raising=False)
    assert load_torch(tmp_path) is None
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    rng = torch.get_rng_state()
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng}
    path = save_torch(12, state, ckpt_dir=tmp_path)
    assert path == tmp_path / "step-000000012"
    save_torch(13, lambda: {"later": torch.zeros(1)}, ckpt_dir=tmp_path, filename="other.pt")

    loaded = load_torch(tmp_path, filename="other.pt")
    assert loaded is not None
    assert loaded[0].step == 13
    other = tmp_path / "step-000000013" / "other.pt"
    other.write_bytes(b"x" * other.stat().st_size)  # same size, other bytes: hash mismatch

    resumed = load_torch(tmp_path)  # 13 is corrupt: falls back to 12
    assert resumed is not None
    ckpt, got = resumed
    assert ckpt.step == 12
    assert ckpt.manifest["files"]["state.pt"]["size"] > 0
    fresh = torch.nn.Linear(4, 2)
    fresh.load_state_dict(got["model"])
    assert torch.equal(fresh.weight, model.weight)
    assert torch.equal(got["rng"], rng)
    assert got["opt"]["state"][0]["momentum_buffer"].shape == (2, 4)
