"""Plain PyTorch: save a state dict through the atomic commit, load the newest one.

::

    from hpclaunch.runtime.adapters.torch import load_torch, save_torch

    resumed = load_torch()                       # (Checkpoint, state) or None
    if resumed is not None:
        ckpt, state = resumed
        model.load_state_dict(state["model"])
    ...
    save_torch(step, {"model": model.state_dict(), "opt": opt.state_dict()})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpclaunch.runtime.checkpoint import Checkpoint, Verify, commit_checkpoint, resume_point

__all__ = ["STATE_FILE", "load_torch", "save_torch"]

#: The file inside the checkpoint directory that holds the state.
STATE_FILE = "state.pt"


def save_torch(
    step: int,
    state: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    *,
    filename: str = STATE_FILE,
    ckpt_dir: Path | str | None = None,
    keep: int = 3,
) -> Path:
    """``torch.save`` ``state`` into a new atomic checkpoint for ``step`` (rank 0 writes).

    Collective when distributed, like :func:`~hpclaunch.runtime.commit_checkpoint`. Pass a
    callable to build the state only on rank 0 (e.g. to skip copying it on other ranks).

    Returns:
        The committed checkpoint directory.
    """
    import torch  # noqa: PLC0415 (torch)

    def save(tmp: Path) -> None:
        torch.save(dict(state() if callable(state) else state), tmp / filename)

    return commit_checkpoint(step, save, ckpt_dir=ckpt_dir, keep=keep)


def load_torch(
    ckpt_dir: Path | str | None = None,
    *,
    filename: str = STATE_FILE,
    map_location: Any = "cpu",
    weights_only: bool = True,
    verify: Verify = "sha256",
) -> tuple[Checkpoint, Any] | None:
    """The newest complete checkpoint and the state ``torch.load`` reads from it, or ``None``.

    ``weights_only=True`` (torch's safe loader) accepts tensors, containers and numbers, which
    covers model/optimizer state dicts and ``torch.get_rng_state()``.
    """
    ckpt = resume_point(ckpt_dir, verify=verify)
    if ckpt is None:
        return None
    import torch  # noqa: PLC0415 (torch)

    state = torch.load(ckpt.path / filename, map_location=map_location, weights_only=weights_only)
    return ckpt, state
