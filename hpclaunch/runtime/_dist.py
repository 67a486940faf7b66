"""The few collectives the runtime needs, without importing torch.

``torch.distributed`` can only be initialized if the training code imported it, so looking in
``sys.modules`` tells whether there is a process group without paying for ``import torch``
(about a second) in jobs that do not use it. Without a process group every helper is the
single-process identity.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any


def _initialized_dist() -> Any | None:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def is_distributed() -> bool:
    """Whether a torch.distributed process group is initialized in this process."""
    return _initialized_dist() is not None


def rank() -> int:
    """This process's global rank: torch.distributed, else ``RANK`` or ``SLURM_PROCID``, else 0."""
    dist = _initialized_dist()
    if dist is not None:
        return int(dist.get_rank())
    return _env_int(("RANK", "SLURM_PROCID"), 0)


def world_size() -> int:
    """Process count: torch.distributed, else ``WORLD_SIZE`` or ``SLURM_NTASKS``, else 1."""
    dist = _initialized_dist()
    if dist is not None:
        return int(dist.get_world_size())
    return _env_int(("WORLD_SIZE", "SLURM_NTASKS"), 1)


def _env_int(names: tuple[str, ...], default: int) -> int:
    """The first of the variables ``names`` set to a whole number, else ``default``."""
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


def _device(dist: Any) -> Any:
    import torch  # noqa: PLC0415 (torch)

    # NCCL reduces only CUDA tensors; gloo (and "cpu:gloo,cuda:nccl") takes CPU tensors.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_max(values: Sequence[int]) -> list[int]:
    """Element-wise maximum of ``values`` over all ranks (collective when distributed)."""
    dist = _initialized_dist()
    if dist is None:
        return list(values)
    import torch  # noqa: PLC0415 (torch)

    tensor = torch.tensor(list(values), dtype=torch.int64, device=_device(dist))
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return [int(v) for v in tensor.tolist()]


def barrier() -> None:
    """Wait until every rank gets here (no-op without a process group)."""
    all_reduce_max([0])


def broadcast_str(value: str) -> str:
    """Rank 0's ``value`` on every rank (collective when distributed)."""
    dist = _initialized_dist()
    if dist is None:
        return value
    box: list[Any] = [value]
    dist.broadcast_object_list(box, src=0)
    return str(box[0])
