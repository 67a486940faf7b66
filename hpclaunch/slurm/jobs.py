"""Job states and polite polling.

:class:`JobState` is Slurm's job state table (squeue(1) "JOB STATE CODES", Slurm 22.05).
A job is *finished* only in a final state. REQUEUED and REQUEUE_HOLD are not final: the job
runs again under the same id. PREEMPTED is: slurmctld moves a job it requeues after a
preemption from PREEMPTED to PENDING under the same lock (``_job_requeue_op`` and
``job_complete`` in src/slurmctld/job_mgr.c, 24.11.7 and 25.11.7), so no answer ever shows
it between the two, while a job it does not requeue (``--no-requeue``, or ``Requeue=0`` set
by the sidecar as the job finished) stays PREEMPTED for good. submitit's
``InfoWatcher.is_done`` counts PREEMPTED as not done, and waits on such a job until its
timeout (so did we: a map whose finished task Slurm then ended PREEMPTED was waited on
forever). Accounting keeps a PREEMPTED row for each preempted attempt, but a job's status
is the controller's as long as the controller knows the job (:mod:`hpclaunch.backends.merge`).
UNKNOWN (no answer about the job) is not final: waiting on it ends with the caller's
timeout, not with a guess.

:func:`wait_for` polls all jobs with one status call per round, never more often than the
site's ``poll_min_interval``: admins forbid RPC storms against slurmctld.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from hpclaunch.errors import WatchTimeout
from hpclaunch.slurm.times import expected_start_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from hpclaunch.config.site import SiteConfig

__all__ = [
    "EXIT_CODE_WAIT",
    "FINISHED_STATES",
    "AsksStatus",
    "Attempt",
    "JobInfo",
    "JobRef",
    "JobState",
    "parse_state",
    "wait_for",
    "watch",
]


@dataclass(frozen=True)
class JobRef:
    """A submitted job: Slurm's job id, and the cluster when sbatch named one.

    Attributes:
        job_id: As Slurm prints it (``1234``; ``1234_5`` for an array task).
        cluster: The cluster from ``sbatch --parsable``'s ``jobid;cluster`` answer, if any.
    """

    job_id: str
    cluster: str | None = None

    def __str__(self) -> str:
        return self.job_id if self.cluster is None else f"{self.job_id};{self.cluster}"


class AsksStatus(Protocol):
    """What :func:`wait_for` needs of a backend (:class:`hpclaunch.backends.base.Backend`)."""

    site: SiteConfig

    def status(self, refs: Sequence[JobRef]) -> Mapping[JobRef, JobInfo]:
        """The state of every job of ``refs``, asked once."""
        ...


class JobState(str, enum.Enum):
    """A Slurm job state (long names, as ``squeue %T`` and ``sacct -o State`` print them)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    RESIZING = "RESIZING"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    PREEMPTED = "PREEMPTED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    REVOKED = "REVOKED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_finished(self) -> bool:
        """Whether the job will not run again (see the module docstring)."""
        return self in FINISHED_STATES

    @property
    def is_success(self) -> bool:
        """Whether the job finished successfully."""
        return self is JobState.COMPLETED

    def __str__(self) -> str:
        return self.value


#: Final states (PREEMPTED: see the module docstring). Not here on purpose: REQUEUED,
#: REQUEUE_HOLD, REQUEUE_FED, SPECIAL_EXIT and RESV_DEL_HOLD (held or requeued: the job can
#: run again), SUSPENDED and STOPPED (paused), and UNKNOWN.
FINISHED_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.PREEMPTED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.REVOKED,
    }
)

# Short codes (squeue %t) and aliases, for completeness.
_ALIASES = {
    "PD": JobState.PENDING,
    "CF": JobState.CONFIGURING,
    "R": JobState.RUNNING,
    "CG": JobState.COMPLETING,
    "S": JobState.SUSPENDED,
    "ST": JobState.STOPPED,
    "RS": JobState.RESIZING,
    "SI": JobState.SIGNALING,
    "SO": JobState.STAGE_OUT,
    "RQ": JobState.REQUEUED,
    "RH": JobState.REQUEUE_HOLD,
    "RF": JobState.REQUEUE_FED,
    "RD": JobState.RESV_DEL_HOLD,
    "SE": JobState.SPECIAL_EXIT,
    "PR": JobState.PREEMPTED,
    "CD": JobState.COMPLETED,
    "F": JobState.FAILED,
    "CA": JobState.CANCELLED,
    "TO": JobState.TIMEOUT,
    "NF": JobState.NODE_FAIL,
    "OOM": JobState.OUT_OF_MEMORY,
    "BF": JobState.BOOT_FAIL,
    "DL": JobState.DEADLINE,
    "RV": JobState.REVOKED,
}


def parse_state(text: str) -> JobState:
    """Parse a state as squeue or sacct print it.

    sacct adds detail (``CANCELLED by 1000``) and may mark truncation with ``+``
    (``CANCELLED+``); both are dropped. Anything unrecognised is ``UNKNOWN``.
    """
    words = text.strip().split()
    if not words:
        return JobState.UNKNOWN
    word = words[0].rstrip("+").upper()
    try:
        return JobState(word)
    except ValueError:
        return _ALIASES.get(word, JobState.UNKNOWN)


@dataclass(frozen=True)
class JobInfo:
    """What the scheduler says about one job.

    Attributes:
        ref: The job.
        state: Its state (UNKNOWN when neither squeue nor sacct knows it).
        name: The job name.
        reason: Why it waits or ended (squeue/sacct ``Reason``), if any.
        nodes: The node list, e.g. ``n[1-2]``.
        exit_code: The batch script's exit code once finished (from sacct).
        exit_signal: The signal that killed it, if any (from sacct).
        elapsed: Run time as Slurm prints it (``1:02``, ``00:01:02``).
        source: Who answered: ``squeue``, ``sacct``, ``local`` (the local backend) or
            ``none``.
        qos: The job's QOS.
        node_count: How many nodes it has (or asks for, while pending).
        gpus: GPUs of the whole job (allocated; requested while pending).
        restarts: How often it was requeued (``SLURM_RESTART_COUNT`` of its current attempt).
        tier: hpclaunch's priority tier (not Slurm's: filled in from the history or the
            site's tier → QOS mapping by the caller).
        quota: ``in-quota`` or ``over-quota`` on a site with quotas (filled in by the
            caller, like ``tier``).
        expected_start: For a pending job, when Slurm expects it to start (squeue's
            ``StartTime``: backfill's plan, the cluster's local time); ``None``: not pending,
            or no estimate yet.
    """

    ref: JobRef
    state: JobState
    name: str | None = None
    reason: str | None = None
    nodes: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    elapsed: str | None = None
    source: Literal["squeue", "sacct", "local", "none"] = "none"
    qos: str | None = None
    node_count: int | None = None
    gpus: int | None = None
    restarts: int | None = None
    tier: str | None = None
    quota: str | None = None
    expected_start: str | None = None

    @property
    def expected_start_text(self) -> str:
        """:attr:`expected_start` as ``~15:00`` or ``~11-29 15:00`` (``""``: none)."""
        return expected_start_text(self.expected_start)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (for ``status --json``)."""
        return {
            "job_id": self.ref.job_id,
            "cluster": self.ref.cluster,
            "name": self.name,
            "state": self.state.value,
            "finished": self.state.is_finished,
            "reason": self.reason,
            "nodes": self.nodes,
            "exit_code": self.exit_code,
            "exit_signal": self.exit_signal,
            "elapsed": self.elapsed,
            "source": self.source,
            "qos": self.qos,
            "tier": self.tier,
            "quota": self.quota,
            "node_count": self.node_count,
            "gpus": self.gpus,
            "restarts": self.restarts,
            "expected_start": self.expected_start,
        }


@dataclass(frozen=True)
class Attempt:
    """One run of a job as Slurm's accounting saw it (``sacct --duplicates``).

    A requeued job keeps its id; each attempt is one accounting record, oldest first.

    Attributes:
        index: 0 for the first run (``SLURM_RESTART_COUNT`` of that run).
        state: How that run ended (PREEMPTED, REQUEUED, ...) or its current state.
        exit_code, exit_signal: From ``ExitCode`` once that run ended.
        submit, start, end: Timestamps as sacct prints them (``None``: not yet / unknown).
        elapsed: Run time of that attempt.
        nodes: Where it ran.
        reason: Slurm's reason field, if any.
        time_limit: Its time limit in seconds (``Timelimit``; ``None``: unlimited/unknown).
        cpus: CPUs allocated (``AllocCPUS``).
        cpu_seconds: CPU time its processes used (``TotalCPU``: user + system, every step).
        tres: What it was allocated (``AllocTRES``: ``cpu=2,mem=200M,node=2,gres/gpu=2``).
        mem_peak: The most memory one of its steps held at once, in bytes: the steps'
            ``TRESUsageInTot`` ``mem`` (each task's peak, summed over the step's tasks, as
            seff counts it); ``None`` without job accounting (``jobacct_gather/none``).
    """

    index: int
    state: JobState
    exit_code: int | None = None
    exit_signal: int | None = None
    submit: str | None = None
    start: str | None = None
    end: str | None = None
    elapsed: str | None = None
    nodes: str | None = None
    reason: str | None = None
    time_limit: int | None = None
    cpus: int | None = None
    cpu_seconds: float | None = None
    tres: str | None = None
    mem_peak: int | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (for ``events --json``)."""
        return {
            "attempt": self.index,
            "state": self.state.value,
            "exit_code": self.exit_code,
            "exit_signal": self.exit_signal,
            "submit": self.submit,
            "start": self.start,
            "end": self.end,
            "elapsed": self.elapsed,
            "nodes": self.nodes,
            "reason": self.reason,
            "time_limit": self.time_limit,
            "cpus": self.cpus,
            "cpu_seconds": self.cpu_seconds,
            "tres": self.tres,
            "mem_peak": self.mem_peak,
        }


#: Seconds to keep asking for the exit code of a job seen FAILED without one (wait_for).
EXIT_CODE_WAIT = 10.0


def wait_for(
    backend: AsksStatus,
    refs: Sequence[JobRef],
    *,
    until: Callable[[JobInfo], bool] | None = None,
    timeout: float | None = None,
    interval: float | None = None,
    on_change: Callable[[JobInfo], None] | None = None,
    on_round: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[JobRef, JobInfo]:
    """Poll ``refs`` until ``until`` holds for every one of them (:func:`watch` to the end).

    Args:
        backend, refs, until, timeout, interval, on_change, clock, sleep: As :func:`watch`.
        on_round: Called after every round (e.g. to print new log lines).

    Returns:
        The last info of every job.

    Raises:
        WatchTimeout: ``timeout`` passed first; the message lists the jobs still waiting.
    """
    last: dict[JobRef, JobInfo] = {}
    rounds = watch(
        backend,
        refs,
        until=until,
        timeout=timeout,
        interval=interval,
        on_change=on_change,
        clock=clock,
        sleep=sleep,
    )
    for last in rounds:  # noqa: B007 (the last round is the answer)
        if on_round is not None:
            on_round()
    return last


def watch(
    backend: AsksStatus,
    refs: Sequence[JobRef],
    *,
    until: Callable[[JobInfo], bool] | None = None,
    timeout: float | None = None,
    interval: float | None = None,
    on_change: Callable[[JobInfo], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[dict[JobRef, JobInfo]]:
    """Poll ``refs`` until ``until`` holds for every one of them, yielding each round's
    answer (the last one yielded is the round in which every job was done).

    Each round is **one** ``backend.status(refs)`` call for all jobs; rounds are at least
    ``backend.site.poll_min_interval`` seconds apart, whatever ``interval`` asks.

    Args:
        backend: Where to ask.
        refs: The jobs to follow.
        until: When a job is done waiting; default: its state is finished (and a FAILED
            job's exit code known, or asked for :data:`EXIT_CODE_WAIT` seconds).
        timeout: Give up after this many seconds (``None``: never).
        interval: Seconds between rounds (raised to the site's minimum).
        on_change: Called with a job's info whenever its state or reason changes (and on
            the first round).
        clock, sleep: Injected for tests.

    Raises:
        WatchTimeout: ``timeout`` passed first; the message lists the jobs still waiting.
    """
    floor = backend.site.poll_min_interval
    pause = max(interval if interval is not None else floor, floor)
    deadline = None if timeout is None else clock() + timeout
    seen: dict[JobRef, tuple[JobState, str | None]] = {}
    failed_at: dict[JobRef, float] = {}

    def finished(info: JobInfo) -> bool:
        # A FAILED job whose exit code Slurm has not recorded yet (slurmdbd's record lags
        # slurmctld's) is asked again for up to EXIT_CODE_WAIT seconds: its code is what
        # the user needs to see.
        if info.state is JobState.FAILED and info.exit_code is None and not info.exit_signal:
            first = failed_at.setdefault(info.ref, clock())
            return clock() - first >= EXIT_CODE_WAIT
        return info.state.is_finished

    done = until or finished
    while True:
        infos = dict(backend.status(list(refs)))
        for ref in refs:
            info = infos[ref]
            key = (info.state, info.reason)
            if on_change is not None and seen.get(ref) != key:
                on_change(info)
            seen[ref] = key
        yield infos
        waiting = [ref for ref in refs if not done(infos[ref])]
        if not waiting:
            return
        if deadline is not None and clock() + pause > deadline:
            listed = ", ".join(f"{r.job_id} ({infos[r].state})" for r in waiting)
            raise WatchTimeout(
                f"gave up after {timeout:g} s; still waiting for {listed}",
                hint="wait longer (--timeout), or check the jobs with 'hpclaunch status'",
            )
        sleep(pause)
