"""The launch's process group: stopped as a whole (SIGTERM, a wait, SIGKILL to what is
left), so no process of the launch survives the sidecar; and the sidecar's own end by the
signal that stopped it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["end_by", "group_members", "stop_group"]


def end_by(stopped_by: str | None) -> None:
    """End this process by the signal that stopped the attempt, as a process without a
    handler would: Slurm then records it as it does for a plain job (``CANCELLED``, exit
    ``0:15``) instead of the sidecar's 143 (the shell's 128 + 15). Returns if it could not."""
    if stopped_by is None:
        return
    sig = getattr(signal, f"SIG{stopped_by}")
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group of ``proc``, wait up to ``timeout``, SIGKILL what is left.

    The group outlives its leader when a child ignores SIGTERM or daemonizes, so the wait is
    for the whole group (``killpg(pgid, 0)``), not only ``proc``.
    """
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    _killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_alive(pgid):
            break
        time.sleep(0.05)
    else:
        _killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        _killpg(pgid, signal.SIGKILL)
        proc.wait()
    end = time.monotonic() + 2
    while _group_alive(pgid) and time.monotonic() < end:
        _killpg(pgid, signal.SIGKILL)
        time.sleep(0.02)


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is in group ``pgid``.

    Zombies answer ``kill(0)`` too, and an orphaned one may wait seconds for its reaper, so
    ``/proc`` is read where it exists (Linux); elsewhere ``killpg(pgid, 0)`` decides.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """The pids of live (not zombie) processes in group ``pgid`` (Linux ``/proc``)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # bytes: comm is cut at 15 bytes, maybe inside a UTF-8 character
            stat = (entry / "stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # fields: state ppid pgrp ... (proc(5))
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members
