"""The sidecar's side of a checkpoint: asking the trainer for one (``checkpoint-request``)
and waiting for its commit (``checkpoint-done.json``) until a deadline, noticing a failed
one (``checkpoint-failed.json``), and the steps the trainer reached."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch.supervise import control
from hpclaunch.supervise.attempt import POLL, Launch
from hpclaunch.supervise.ledger import Ledger

__all__ = ["CheckpointWatch"]


class CheckpointWatch:
    """What one attempt knows of its trainer's checkpoints.

    Attributes:
        start_step: The step the trainer had reported when the attempt started.
        committed: The commit that answered this attempt's request (``None``: none yet).
        failed: What the trainer's last ``checkpoint-failed.json`` said.
    """

    def __init__(self, control_dir: Path, ledger: Ledger) -> None:
        self.control = control_dir
        self.ledger = ledger
        self.start_step: int | None = None
        self.committed: dict[str, Any] | None = None
        self.failed: dict[str, Any] | None = None
        self._failed_seen: int | None = None  # mtime of the checkpoint-failed.json recorded

    def request_and_wait(
        self, reason: str, deadline: float, launch: Launch, *, time_left: float | None = None
    ) -> None:
        """Ask for a checkpoint and wait for it until ``deadline``; ``time_left``: what was
        known of the time limit at the warning (for the ledger)."""
        requested_at = time.time()
        control.write_json_atomic(
            self.control / jobdir.REQUEST,
            {"reason": reason, "requested_at": requested_at, "deadline": deadline},
        )
        self.ledger.append(
            "checkpoint_requested", reason=reason, deadline=deadline, time_left=time_left
        )
        periodic: dict[str, Any] | None = None
        while time.time() < deadline:
            exited = launch.proc.poll() is not None  # before the read: a last commit is kept
            done = control.read_json(self.control / jobdir.DONE)
            if done is not None and float(done.get("committed_at", 0)) >= requested_at:
                # A periodic commit that ends after the request was started before the
                # trainer saw it: the trainer goes on and writes the requested checkpoint
                # next, so it is the answer only if the launch stops after it.
                if done.get("reason") != control.PERIODIC or exited:
                    self.committed = done
                    self.ledger.append(
                        "checkpoint_committed",
                        step=done.get("step"),
                        seconds=done.get("seconds"),
                        path=done.get("path"),
                        reason=done.get("reason"),
                        after=round(time.time() - requested_at, 3),
                    )
                    return
                periodic = done
            self.note_failed()
            if exited:
                break
            got = launch.signals.wait(POLL)
            if got is not None:
                self.ledger.append("signal_received", signal=got.name, when=got.at)
                if got.name in ("TERM", "INT"):
                    break  # the grace is over: requeue now with what is committed
        self.ledger.append(
            "checkpoint_timeout",
            waited=round(time.time() - requested_at, 3),
            periodic_step=None if periodic is None else periodic.get("step"),
        )

    def note_failed(self) -> None:
        """Record a new ``checkpoint-failed.json`` of the trainer as ``checkpoint_failed``."""
        path = self.control / jobdir.FAILED
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return
        if mtime == self._failed_seen:
            return
        self._failed_seen = mtime
        failed = control.read_json(path)
        if failed is None:
            return
        self.failed = failed
        keys = ("step", "errno", "errno_name", "error", "dir", "resume_step", "reason")
        self.ledger.append("checkpoint_failed", **{k: failed.get(k) for k in keys})

    @property
    def committed_step(self) -> int | None:
        """The step of the commit that answered this attempt's request, if any."""
        return None if self.committed is None else self.committed.get("step")

    def last_step(self) -> int | None:
        """The newest step the trainer reported (``progress.json``) or committed."""
        steps = [control.read_step(self.control / jobdir.PROGRESS)]
        if self.committed is not None:
            steps.append(control.read_step(self.control / jobdir.DONE))
        known = [s for s in steps if s is not None]
        return max(known) if known else None

    def no_progress(self) -> bool:
        """Whether the trainer reported no step beyond where the attempt started."""
        last = self.last_step()
        return last is None or last == self.start_step
