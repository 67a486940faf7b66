"""Atomic checkpoint commit, and finding the newest complete checkpoint to resume from.

Layout of a checkpoint directory (``$HPCLAUNCH_CHECKPOINT_DIR`` by default)::

    step-000000100/            complete: manifest.json lists every file with size and sha256
    step-000000200/
    .tmp-step-000000300-<id>/  being written, or abandoned by a kill: never picked up

Commit protocol (rank 0 writes; the other ranks wait): ``save(tmp)`` writes into a fresh
``.tmp-`` directory; every file is fsynced; ``manifest.json`` is written last and fsynced,
then the directory; ``rename(2)`` makes it ``step-<step:09d>`` in one atomic step; the parent
is fsynced. A directory counts as complete only with a manifest whose sizes (and, by default,
hashes) match the files, so a kill at any point leaves the previous checkpoint as the newest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hpclaunch import __version__
from hpclaunch._fs import fsync_dir, fsync_file, read_json
from hpclaunch.errors import SupervisorError
from hpclaunch.runtime import _dist
from hpclaunch.runtime.control import (
    attempt,
    checkpoint_dir,
    mark_checkpoint_done,
    mark_checkpoint_failed,
    report_progress,
)

__all__ = [
    "Checkpoint",
    "CheckpointWriteError",
    "checkpoint",
    "commit_checkpoint",
    "list_checkpoints",
    "resume_point",
    "verify_checkpoint",
]

MANIFEST = "manifest.json"
FORMAT = 1
_STEP_DIR = re.compile(r"^step-(\d+)$")
_TMP_PREFIX = ".tmp-"
_CHUNK = 1 << 20

Verify = Literal["sha256", "size"]


@dataclass(frozen=True)
class Checkpoint:
    """A complete, committed checkpoint.

    Attributes:
        step: The training step it was taken after.
        path: Its directory (``<ckpt dir>/step-<step:09d>``).
        manifest: The parsed ``manifest.json`` (step, files, created_at, attempt, ...).
    """

    step: int
    path: Path
    manifest: dict[str, Any]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def _write_manifest(tmp: Path, step: int, digest: bool) -> None:
    files: dict[str, dict[str, Any]] = {}
    for path in _files(tmp):
        fsync_file(path)
        entry: dict[str, Any] = {"size": path.stat().st_size}
        if digest:
            entry["sha256"] = _sha256(path)
        files[path.relative_to(tmp).as_posix()] = entry
    for sub in sorted({p.parent for p in _files(tmp)}, key=lambda p: len(p.parts), reverse=True):
        fsync_dir(sub)
    manifest = {
        "format": FORMAT,
        "step": step,
        "files": files,
        "created_at": time.time(),
        "attempt": attempt(),
        "job_id": os.environ.get("SLURM_JOB_ID"),
        "hpclaunch_version": __version__,
    }

    with (tmp / MANIFEST).open("w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    fsync_dir(tmp)


def _publish(tmp: Path, final: Path) -> None:
    old: Path | None = None
    if final.exists():  # the same step committed again (e.g. a rerun): swap, then delete
        old = final.with_name(f"{_TMP_PREFIX}replaced-{final.name}-{uuid.uuid4().hex[:8]}")
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_dir(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def verify_checkpoint(path: Path, *, verify: Verify = "sha256") -> dict[str, Any] | None:
    """The manifest of the checkpoint directory ``path`` if it is complete, else ``None``.

    Complete means: ``manifest.json`` parses, and every file it lists exists with the listed
    size (and sha256, unless ``verify="size"``).
    """
    manifest = read_json(path / MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    for name, entry in manifest["files"].items():
        file = path / name
        try:
            if file.stat().st_size != entry.get("size"):
                return None
        except OSError:
            return None
        if verify == "sha256" and "sha256" in entry and _sha256(file) != entry["sha256"]:
            return None
    return manifest


def list_checkpoints(ckpt_dir: Path | str | None = None) -> list[tuple[int, Path]]:
    """Every ``step-N`` directory (complete or not) as ``(step, path)``, newest first."""
    root = Path(ckpt_dir) if ckpt_dir is not None else checkpoint_dir()
    found = []
    if root.is_dir():
        for entry in root.iterdir():
            match = _STEP_DIR.match(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), entry))
    return sorted(found, reverse=True)


def resume_point(
    ckpt_dir: Path | str | None = None, *, verify: Verify = "sha256", clean: bool = True
) -> Checkpoint | None:
    """The newest complete checkpoint, or ``None`` when there is none (a fresh start).

    Not collective: call it before or after ``init_process_group``; every rank reads the
    same files and gets the same answer. On rank 0 (with ``clean``) it also removes ``.tmp-``
    directories older than that checkpoint: writes abandoned by a killed attempt.

    Args:
        ckpt_dir: Default ``$HPCLAUNCH_CHECKPOINT_DIR`` (see :func:`checkpoint_dir`).
        verify: ``"sha256"`` (default) re-hashes every file; ``"size"`` only compares sizes
            (for checkpoints too big to read back at start-up).
        clean: Remove stale ``.tmp-`` directories (rank 0 only).
    """
    root = Path(ckpt_dir) if ckpt_dir is not None else checkpoint_dir()
    for step, path in list_checkpoints(root):
        manifest = verify_checkpoint(path, verify=verify)
        if manifest is not None and manifest.get("step") == step:
            if clean and _dist.rank() == 0:
                _remove_stale_tmp(root, older_than=float(manifest.get("created_at", 0)))
            return Checkpoint(step=step, path=path, manifest=manifest)
    return None


def _remove_stale_tmp(root: Path, *, older_than: float) -> None:
    for entry in root.iterdir():
        try:
            stale = entry.name.startswith(_TMP_PREFIX) and entry.stat().st_mtime < older_than
        except OSError:  # removed meanwhile
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)


def _prune(root: Path, keep: int) -> None:
    if keep <= 0:
        return
    complete = [(s, p) for s, p in list_checkpoints(root) if verify_checkpoint(p, verify="size")]
    for _step, path in complete[max(keep, 1) :]:  # never the newest: keep >= 1
        doomed = path.with_name(f"{_TMP_PREFIX}pruned-{path.name}")
        os.rename(path, doomed)  # invisible to resume_point before the slow delete
        shutil.rmtree(doomed, ignore_errors=True)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, quota exceeded, an I/O error).

    Nothing was committed: the temporary directory is removed and the newest complete
    checkpoint stays the resume point (the message names it). ``errno`` is the filesystem's
    (``errno.ENOSPC``, ``errno.EDQUOT``, ...); the original error is the ``__cause__``.
    """


def _refused_write(root: Path) -> OSError | None:
    """The error a small write into ``root`` gets now (``None``: it succeeds)."""
    probe = root / f".probe-{uuid.uuid4().hex[:12]}"
    try:
        with open(probe, "wb") as f:
            f.write(b"\0" * (1 << 16))
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        return exc
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def _write_failed(
    step: int, root: Path, exc: OSError, raised_by_save: BaseException | None = None
) -> CheckpointWriteError:
    """Report a failed write to the sidecar and make the error the trainer sees (its cause:
    what the save raised, when that was not itself the OSError)."""
    newest = None
    with contextlib.suppress(OSError):  # sizes only: the hashes were checked at commit
        newest = resume_point(root, verify="size", clean=False)
    mark_checkpoint_failed(step, root, exc, None if newest is None else newest.step)
    with contextlib.suppress(OSError):  # the sidecar counts the steps lost from here
        report_progress(step, force=True)
    resume = f"step {newest.step} ({newest.path})" if newest else "the start (none is complete)"
    reason = exc.strerror or str(exc)
    if raised_by_save is not None:
        said = str(raised_by_save).strip().splitlines()
        reason += f" (the save raised {type(raised_by_save).__name__}: {said[0] if said else ''})"
    error = CheckpointWriteError(
        exc.errno,
        f"checkpoint of step {step} was not written to {root}: {reason}; nothing was "
        f"committed, the resume point stays {resume}",
    )
    error.__cause__ = raised_by_save or exc
    return error


@contextmanager
def checkpoint(
    step: int,
    *,
    ckpt_dir: Path | str | None = None,
    keep: int = 3,
    digest: bool = True,
    all_ranks: bool = False,
) -> Iterator[Path | None]:
    """Commit a checkpoint atomically: ``with checkpoint(step) as tmp:`` write into ``tmp``.

    Rank 0 gets a fresh temporary directory; other ranks get ``None`` (they write nothing)
    and wait until the commit is done. On a clean exit from the block the directory is
    committed as described in the module docstring, ``checkpoint-done.json`` tells the
    sidecar, and older complete checkpoints beyond ``keep`` are pruned. If the block raises
    on any rank, nothing is committed and every rank raises. Collective when distributed.

    Args:
        step: The training step the state belongs to.
        ckpt_dir: Default ``$HPCLAUNCH_CHECKPOINT_DIR``.
        keep: Complete checkpoints to keep (the newest is never pruned); 0 keeps all.
        digest: Record sha256 of every file (read back once); False records sizes only.
        all_ranks: Every rank gets the same ``tmp`` and writes into it (sharded state, or a
            framework whose save is itself collective, like Lightning's).
    """
    started, started_wall = time.monotonic(), time.time()
    root = Path(ckpt_dir) if ckpt_dir is not None else checkpoint_dir()
    writer = _dist.rank() == 0
    tmp: Path | None = None
    error: BaseException | None = None
    if writer:
        try:  # a full disk can refuse the directory itself
            root.mkdir(parents=True, exist_ok=True)
            tmp = root / f"{_TMP_PREFIX}step-{step:09d}-{uuid.uuid4().hex[:12]}"
            tmp.mkdir()
        except OSError as exc:  # no yield skipped: the other ranks wait in collectives
            error, tmp = exc, None
    if all_ranks and _dist.is_distributed():
        shared = _dist.broadcast_str(str(tmp) if tmp is not None else "")
        tmp = Path(shared) if shared else None
    try:
        yield tmp if (writer or all_ranks) else None
        if all_ranks and tmp is not None and not writer:
            for path in _files(tmp):  # each rank flushes what it wrote (NFS: its own cache)
                fsync_file(path)
    except BaseException as exc:  # re-raised below, after the other ranks heard of it
        error = error or exc
    raised_by_save: BaseException | None = None
    if writer and error is not None and not isinstance(error, OSError):
        # torch.save reports a full disk as RuntimeError ("basic_ios::clear: iostream
        # error", "unexpected pos ..."): ask the filesystem itself, before the partial
        # files are removed and free the space again.
        refused = _refused_write(root)
        if refused is not None:
            raised_by_save, error = error, refused
    # Two collectives on every path, so that a failure on one rank never hangs the others;
    # each tells every rank whether a rank failed, and whether writing failed (with errno).
    failed, number = _dist.all_reduce_max(_failure(error))
    final = root / f"step-{step:09d}"
    if writer:
        if failed:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if error is None and failed == _WRITE_FAILED:  # another rank's write (all_ranks)
                error = OSError(number or None, os.strerror(number) if number else "write failed")
            if isinstance(error, OSError) and not isinstance(error, CheckpointWriteError):
                error = _write_failed(step, root, error, raised_by_save)
        elif tmp is not None:
            try:
                _write_manifest(tmp, step, digest)
                _publish(tmp, final)
                mark_checkpoint_done(step, final, seconds=time.monotonic() - started)
                report_progress(step, force=True)
                with contextlib.suppress(OSError):  # housekeeping never fails a commit
                    _prune(root, keep)
                    # Commits are sequential: a .tmp- dir untouched since before this one
                    # began was abandoned by a kill (or a failed save) and can go.
                    _remove_stale_tmp(root, older_than=started_wall)
            except OSError as exc:  # the manifest or the rename: disk full, quota, I/O
                shutil.rmtree(tmp, ignore_errors=True)
                error = _write_failed(step, root, exc)
            except BaseException as exc:
                error = exc
                shutil.rmtree(tmp, ignore_errors=True)
    failed, number = _dist.all_reduce_max(_failure(error))
    if error is not None:
        raise error
    if failed == _WRITE_FAILED:  # a write failed on another rank: the same error here
        raise CheckpointWriteError(
            number or None,
            f"checkpoint of step {step} was not written to {root}: "
            f"{os.strerror(number) if number else 'a write failed'} (on another rank); "
            "nothing was committed",
        )
    if failed:
        raise SupervisorError(
            f"checkpoint of step {step} was not committed: it failed on another rank",
            hint="see that rank's traceback in the job log",
        )


_OTHER_FAILED, _WRITE_FAILED = 1, 2


def _failure(error: BaseException | None) -> list[int]:
    """``[kind, errno]`` of a rank's error, for :func:`_dist.all_reduce_max`: 0 none, 1 any
    error, 2 a failed write (an ``OSError``: disk full, quota, I/O)."""
    if error is None:
        return [0, 0]
    if isinstance(error, OSError):
        return [_WRITE_FAILED, error.errno or 0]
    return [_OTHER_FAILED, 0]


def commit_checkpoint(
    step: int,
    save: Callable[[Path], None],
    *,
    ckpt_dir: Path | str | None = None,
    keep: int = 3,
    digest: bool = True,
    all_ranks: bool = False,
) -> Path:
    """Commit a checkpoint atomically: ``save(tmp_dir)`` writes the files, on rank 0 only.

    The function form of :func:`checkpoint` (same arguments and guarantees). Collective
    when distributed: every rank calls it at the same step; only rank 0 calls ``save``
    (every rank with ``all_ranks=True``).

    Returns:
        The committed directory, ``<ckpt dir>/step-<step:09d>`` (the same on every rank).
    """
    root = Path(ckpt_dir) if ckpt_dir is not None else checkpoint_dir()
    with checkpoint(step, ckpt_dir=root, keep=keep, digest=digest, all_ranks=all_ranks) as tmp:
        if tmp is not None:
            save(tmp)
    return root / f"step-{step:09d}"
