"""The idle guard in the sidecar: every GPU of the job idle for ``idle.stop_after``
(``HPCLAUNCH_IDLE_STOP_SECONDS``, from the nodes' samples: :mod:`hpclaunch.supervise.idle`)
stops the job, after a checkpoint, not requeued."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpclaunch.supervise.attempt import EXIT_STOPPED_IDLE, MARGIN, AttemptControl, Launch
from hpclaunch.supervise.idle import idle_for

__all__ = ["IDLE_CHECK", "IdleGuard", "stop_idle"]

#: Seconds between two looks at the nodes' idle states.
IDLE_CHECK = 5.0


class IdleGuard:
    """Looks at the nodes' idle states every :data:`IDLE_CHECK` s, from ``started`` on."""

    def __init__(self, env: Mapping[str, str], control_dir: Path, started: float) -> None:
        stop = env.get("HPCLAUNCH_IDLE_STOP_SECONDS", "")
        #: The idle guard's stop, in seconds (``None``: never stopped for idling).
        self.stop_after = float(stop) if stop.replace(".", "", 1).isdigit() else None
        self.util = env.get("HPCLAUNCH_GPU_IDLE_UTIL", "5")
        self.control = control_dir
        self.started = started
        self._checked = 0.0

    def why_stop(self, nodes: Sequence[str]) -> str | None:
        """Why the job must stop (every GPU idle too long), or ``None``."""
        limit = self.stop_after
        now = time.time()
        if limit is None or now < self._checked + IDLE_CHECK:
            return None
        self._checked = now
        idle = idle_for(self.control, nodes, now, self.started)
        if idle is None or idle < limit:
            return None
        return (
            f"every GPU of the job below {self.util} % for {idle / 60:.1f} min "
            f"(idle.stop_after: {limit / 60:g} min)"
        )


def stop_idle(sc: AttemptControl, launch: Launch, why: str) -> int:
    """Checkpoint (as at a preemption, with the warning's lead time), stop the launch and
    end the job, not requeued: ``stopped_idle``, exit :data:`EXIT_STOPPED_IDLE`."""
    sc.ledger.append("idle_stop", why=why)
    deadline = time.time() + max(1.0, sc.config.lead - MARGIN)
    sc.checkpoint("idle", deadline, launch)
    sc.stop(launch)
    sc.end("stopped_idle", exit_code=EXIT_STOPPED_IDLE, requeued=False, why=why)
    sc.say_end("stopped_idle", requeued=False, why=why)
    return EXIT_STOPPED_IDLE
