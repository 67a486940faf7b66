"""Reading a job's per-attempt logs as they grow.

The batch script appends each attempt's output to ``<log_dir>/attempt-<N>.log``
(``N`` = ``SLURM_RESTART_COUNT``), so following a job across requeues means reading those
files in attempt order and remembering how far each was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hpclaunch.errors import TransportError

__all__ = ["LogTail", "RemoteFiles", "attempt_logs", "attempt_of", "slurm_messages"]


class RemoteFiles(Protocol):
    """Reads files where the job runs (e.g. :class:`~hpclaunch.transport.ssh.SSHRunner`)."""

    def listdir(self, path: str) -> list[str]:
        """Names in ``path`` (a missing directory: none)."""
        ...

    def read_bytes(self, path: str, offset: int = 0) -> bytes:
        """The bytes of ``path`` from ``offset`` on."""
        ...


_ATTEMPT_LOG = re.compile(r"^attempt-(\d+)\.log$")


def attempt_logs(log_dir: str | Path, files: RemoteFiles | None = None) -> list[Path]:
    """The attempt logs in ``log_dir``, oldest attempt first (missing dir: none).

    ``files``: list the directory there (over SSH) instead of on this machine.
    """
    found: list[tuple[int, Path]] = []
    try:
        if files is not None:
            entries = [Path(log_dir) / name for name in files.listdir(str(log_dir))]
        else:
            entries = list(Path(log_dir).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    for path in entries:
        match = _ATTEMPT_LOG.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def slurm_messages(job_dir: str, job_id: str, files: RemoteFiles | None = None) -> list[str]:
    """What Slurm itself wrote for the job: ``<job dir>/slurm-<job id>.out`` (the batch
    script's ``--output``; the job's own output goes to the attempt logs). It holds what
    slurmstepd says when it ends a job: ``*** JOB 65 ON n1 CANCELLED AT ... DUE TO TIME
    LIMIT ***``, ``oom-kill`` events, a requeue. Missing or unreadable: no lines."""

    path = str(Path(job_dir) / f"slurm-{job_id}.out")
    try:
        data = files.read_bytes(path) if files is not None else Path(path).read_bytes()
    except OSError:
        return []
    except TransportError as exc:  # over SSH: a missing file is no lines, a lost link is not
        if isinstance(exc.__cause__, FileNotFoundError):
            return []
        raise
    return data.decode("utf-8", errors="replace").splitlines()


def attempt_of(path: str | Path) -> int:
    """The attempt number in an ``attempt-<N>.log`` name.

    Raises:
        ValueError: Not such a name.
    """
    match = _ATTEMPT_LOG.match(Path(path).name)
    if match is None:
        raise ValueError(f"not an attempt log: {path}")
    return int(match.group(1))


@dataclass
class LogTail:
    """Returns what was appended to a job's attempt logs since the last call.

    Only whole lines are returned; a partial last line waits for its newline (or for
    ``final=True``, once the job has ended). With ``attempt`` set, only that attempt's log
    is read. With ``files``, the logs are read there (on the cluster, over SSH).
    """

    log_dir: str | Path
    attempt: int | None = None
    files: RemoteFiles | None = None
    _offsets: dict[Path, int] = field(default_factory=dict)
    _partial: dict[Path, bytes] = field(default_factory=dict)

    def read_new(self, *, final: bool = False) -> list[str]:
        """New complete lines of every attempt log, in attempt order."""
        return [line for _, lines in self.read_new_by_attempt(final=final) for line in lines]

    def read_new_by_attempt(self, *, final: bool = False) -> list[tuple[int, list[str]]]:
        """Like :meth:`read_new`, grouped by attempt: ``[(attempt, lines), ...]``."""
        grouped: list[tuple[int, list[str]]] = []
        for path in attempt_logs(self.log_dir, self.files):
            number = attempt_of(path)
            if self.attempt is not None and number != self.attempt:
                continue
            lines = self._read(path, final)
            if lines:
                grouped.append((number, lines))
        return grouped

    def _read(self, path: Path, final: bool) -> list[str]:
        offset = self._offsets.get(path, 0)
        if self.files is not None:
            chunk = self.files.read_bytes(str(path), offset)
        else:
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        self._offsets[path] = offset + len(chunk)
        data = self._partial.pop(path, b"") + chunk
        *complete, rest = data.split(b"\n")
        if rest and final:
            complete.append(rest)
        elif rest:
            self._partial[path] = rest
        return [line.decode("utf-8", errors="replace") for line in complete]
