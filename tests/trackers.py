"""What the trackers kept of a run, read from their own files and stores (the real
libraries, offline): a W&B offline run's records, an MLflow run's metric history, a
TensorBoard log directory's scalars. Shared by the unit and the cluster tests."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: A .wandb file: a 7-byte header (":W&B", a magic number, the version), then LevelDB's
#: log format (32 KiB blocks; each chunk: crc32, length, type: full, first, middle, last)
#: of protobuf ``Record``\ s (wandb/proto/wandb_internal.proto).
_HEADER, _BLOCK = 7, 32768


def _records(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    pos, pending = _HEADER, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            yield pending


@dataclass(frozen=True)
class WandbOffline:
    """One offline run directory (one attempt's): its run id, name, group, tags and the
    steps it logged."""

    path: Path
    run_ids: frozenset[str]
    name: str
    group: str
    tags: tuple[str, ...]
    steps: tuple[int, ...]


def wandb_offline_runs(wandb_dir: Path) -> list[WandbOffline]:
    """The offline run directories under ``wandb_dir`` (``<WANDB_DIR>/wandb``), oldest first."""
    from wandb.proto import wandb_internal_pb2 as pb

    runs = []
    for run_dir in sorted(wandb_dir.glob("offline-run-*")):
        ids, tags, steps, name, group = set(), (), [], "", ""
        for raw in _records(next(run_dir.glob("*.wandb"))):
            record = pb.Record()
            record.ParseFromString(raw)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                ids.add(record.run.run_id)
                tags = tuple(record.run.tags)
                name, group = record.run.display_name, record.run.run_group
            elif kind == "history":
                steps.append(record.history.step.num)
        runs.append(WandbOffline(run_dir, frozenset(ids), name, group, tags, tuple(steps)))
    return runs


def mlflow_history(tracking_uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of metric ``key`` of an MLflow run, in step order."""
    from mlflow.tracking import MlflowClient

    history = MlflowClient(tracking_uri).get_metric_history(run_id, key)
    return sorted((m.step, m.value) for m in history)


def tensorboard_scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` of scalar ``tag`` in a TensorBoard log directory, as TensorBoard
    reads it (purged steps left out)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logdir))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]
