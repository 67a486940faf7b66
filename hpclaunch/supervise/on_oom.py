"""Out of memory in the sidecar: the kernel's OOM kills in the job's cgroup on this node
(:mod:`hpclaunch.supervise.memory`) during one attempt, and the launch they end.

A multi-rank launch whose rank was OOM-killed must end at once: the other ranks would wait
in their next collective until the time limit. Slurm 24.11 and later do it for every node
of the step with ``--oom-kill-step`` (srun reads ``SLURM_OOM_KILL_STEP``, which the launch's
environment sets: src/srun/opt.c; the man page's ``SLURM_OOMKILLSTEP`` is not what srun
reads) when a task of the step ends after an OOM kill (task/cgroup,
``task_cgroup_memory_check_oom``). Older srun ignores the variable, and a killed process
that is not a task (a rank under torchrun, a DataLoader worker) ends no task: so the sidecar
also stops the launch when its own node's job cgroup counted an OOM kill :data:`GRACE`
seconds ago and the launch still runs. Measured on the test cluster (25.11, torchrun, 4
ranks importing torch, rank 2 past the limit): torchrun saw its rank die and the step ended
within a second, its summary naming rank 2; stopped at once by the sidecar (as first
written), torchrun printed no summary and the rank was unknown.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from hpclaunch.supervise.memory import JobMemory, job_memory

__all__ = ["OOM_KILL_STEP_ENV", "OomWatch"]

#: srun's environment variable for ``--oom-kill-step`` (24.11+).
OOM_KILL_STEP_ENV = "SLURM_OOM_KILL_STEP"
#: slurmstepd's report of a step's OOM kills (task_cgroup_memory_check_oom): "Detected 1
#: oom_kill event in StepId=..." (25.11), "Detected 1 oom-kill event(s) in StepId=..." (22.05).
_DETECTED = re.compile(r"Detected (\d+) oom[_-]kill event(?:s|\(s\))? in StepId=")
#: Seconds between two reads of the cgroup's counter while the launch runs.
CHECK_EVERY = 0.5
#: Seconds a multi-rank launch gets to end by itself after an OOM kill (torchrun sees its
#: rank die, prints which, and exits; srun's --kill-on-bad-exit and --oom-kill-step end the
#: other nodes) before the sidecar stops it.
GRACE = 5.0


class OomWatch:
    """The OOM kills of one attempt on this node, and whether they end the launch.

    The counter is read while the launch runs (:meth:`poll`), not only at its end: on
    cgroup v1 a kill is counted in the step's cgroup, which Slurm removes with the step."""

    def __init__(
        self,
        *,
        multi_rank: bool,
        read: Callable[[], JobMemory | None] = job_memory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.multi_rank = multi_rank
        self._read = read
        self._clock = clock
        first = read()
        self.enforced = first is not None and first.limit is not None
        self._kills_before = (first.oom_kills or 0) if first is not None else 0
        self._kills = 0
        self._first_kill_at: float | None = None
        self._next_check = 0.0

    def new_kills(self, now: JobMemory | None = None) -> int:
        """OOM kills in the job cgroup on this node since the attempt started (the most
        ever counted: a step's cgroup, and its count, go with the step)."""
        now = self._read() if now is None else now
        if now is not None and now.oom_kills is not None:
            self._kills = max(self._kills, now.oom_kills - self._kills_before)
        return self._kills

    def poll(self) -> bool:
        """Read the counter (at most every :data:`CHECK_EVERY` seconds); whether a
        multi-rank launch must be stopped now: an OOM kill :data:`GRACE` seconds ago that
        did not end it."""
        if not self.enforced:
            return False
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + CHECK_EVERY
            if self.new_kills() and self._first_kill_at is None:
                self._first_kill_at = now
        return (
            self.multi_rank
            and self._first_kill_at is not None
            and now - self._first_kill_at >= GRACE
        )

    def note_reported(self, tail: Sequence[str]) -> None:
        """Take the kills slurmstepd reported in the launch's last lines ("Detected 2
        oom_kill events in StepId=..."): a step that ran out at once may be gone, its cgroup
        and count with it, before the counter was read."""
        reported = sum(int(m.group(1)) for line in tail if (m := _DETECTED.search(line)))
        self._kills = max(self._kills, reported)

    def limit(self) -> int | None:
        """The job cgroup's memory limit on this node now, in bytes (``None``: none)."""
        now = self._read()
        return now.limit if now is not None else None

    def fields(self) -> dict[str, int]:
        """What the attempt's end records of memory on this node: ``mem_limit`` (the limit
        enforced), ``mem_peak``, and ``oom_kills`` during the attempt."""
        now = self._read()
        if now is None:
            return {}
        fields = now.to_fields()
        if now.oom_kills is not None or self._kills:
            fields["oom_kills"] = self.new_kills(now)
        return fields
