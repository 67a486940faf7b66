"""Requeue the job, and decide whether to.

Inside the job, with either backend: the sidecar runs on a compute node, where Slurm's
commands are (slurmd needs them) and pyslurm, a login-node library, usually is not; it
asks slurmctld only at the end of an attempt, so a process per call costs nothing there.

``scontrol requeue <id>`` from inside the job puts it back in the queue; Slurm then ends
the running attempt (SIGTERM to the batch shell) and starts it again with
``SLURM_RESTART_COUNT`` one higher after ``cred_expire + 1`` s (slurm.conf(5), 22.05). For
an array task the id must be ``<array job id>_<task id>``: the plain array job id would
requeue every task of the array (scontrol(1)).

A job that Slurm itself preempts (``PreemptMode=REQUEUE`` with a grace time, ``PreemptTime``
set in ``scontrol show job``) is a different case from Slurm 24.11 on: slurmctld requeues it
when its batch script exits during the grace (as ``PREEMPTED``), and a ``scontrol requeue``
on top leaves the job's grace flag set, so Slurm requeues it once more when the *next* run
ends, even successfully (src/slurmctld/proc_req.c ``GRACE_PREEMPT``, 24.11.7 and 25.11.7;
seen on the 25.11 test cluster: REQUEUED, PREEMPTED, COMPLETED). There the requeue is left
to Slurm (:func:`slurm_requeues_on_exit`). 22.05 ends such a job ``COMPLETED`` (seen on the
22.05 test cluster), so there, and on the releases between that we could not test, the
sidecar requeues it itself.

Policy (:func:`decide`): preemption is requeued without limit; time limits and node
failures at most ``max_requeues`` times over the job's life; a failure of the user's code
never; and a crash-loop breaker stops requeuing after :data:`NO_PROGRESS_LIMIT` attempts in
a row that made no progress (the trainer's ``progress.json`` step did not move). A
preemption is the scheduler's doing, not a crash: it never trips the breaker, and an attempt
it ended neither counts towards nor breaks a streak. (It once did: a four-rank job preempted
twice during torchrun's start-up on a slow CI machine ended PREEMPTED, never requeued; so
would any job that reports no progress, preempted twice.)

A job that already ran to its own end is not run again (:func:`finished_attempt`). Slurm
24.11 to 26.05 may start it once more: a preempted job whose grace ran out before its batch
script exited is requeued by ``_job_requeue_op``, which leaves the job's ``GRACE_PREEMPT``
flag set (only ``job_complete``'s requeue branch clears it), so when the *next* run's batch
script exits, whatever its code, ``_slurm_rpc_complete_batch_script`` requeues the job again
(src/slurmctld/proc_req.c and job_mgr.c, 24.11.7, 25.11.7, 26.05.3). The flag is not shown
by ``scontrol show job`` (``PreemptTime`` is reset at the requeue), so the sidecar cannot see
it coming; the run it did not ask for ends at once with the finished attempt's exit code.
(Seen on the 25.11 test cluster, clean-clone run 29: a four-rank job preempted twice, the
second time killed at the end of its grace, completed and was started a fourth time.) A job
that completes inside a preemption's grace is requeued the same way, on purpose.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpclaunch.errors import CommandTimeout, ProgramNotFound, TransportError
from hpclaunch.slurm.capabilities import (
    DEFAULT_CRED_EXPIRE,
    parse_config,
    requeue_delay,
    slurm_release,
    version_said,
)
from hpclaunch.slurm.live_job import ShownJob, parse_show_job, show_job_argv
from hpclaunch.transport.base import Runner

__all__ = [
    "CAPPED_REASONS",
    "EXPEDITED_ENV",
    "NO_PROGRESS_LIMIT",
    "PACK_MORE_ENV",
    "RequeueDecision",
    "RequeueOutcome",
    "cancel_requeued",
    "decide",
    "delay_start",
    "end_expedited",
    "finished_attempt",
    "forbid_requeue",
    "issue_requeue",
    "job_now",
    "no_progress_streak",
    "raise_memory",
    "requeue_target",
    "slurm_requeue_delay",
    "slurm_requeues_on_exit",
    "slurm_restarts",
    "update_pending",
]

#: Attempts in a row that ended by requeue without progress before the breaker trips.
NO_PROGRESS_LIMIT = 2
#: Reasons whose requeues count against ``max_requeues``.
CAPPED_REASONS = frozenset({"time_limit", "node_failure"})
#: How attempts end that say nothing of a crash loop: the breaker looks past them.
_NOT_CRASHES = frozenset({"requeued", "resized", "resize_failed", "preempted"})
#: The first release known to requeue a preempted batch job that exits in its grace time.
REQUEUES_ON_GRACE_EXIT = (24, 11)
#: How attempts end when the job ran to its own end: nothing is left to run.
FINISHED_REASONS = frozenset({"success", "pruned", "user_error", "oom", "stopped_idle"})


#: Set to 1 in a job that asked ``--requeue=expedite`` (planning/plan.py).
EXPEDITED_ENV = "HPCLAUNCH_EXPEDITED_REQUEUE"
#: Set to 1 for a point of a packed sweep task that has points after it (sweep_pack.py):
#: its point done, the task still needs its requeue.
PACK_MORE_ENV = "HPCLAUNCH_PACK_MORE"


def requeue_target(env: Mapping[str, str]) -> str:
    """``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID``."""
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env["SLURM_JOB_ID"]


@dataclass(frozen=True)
class RequeueOutcome:
    """What ``scontrol requeue`` (or ``scontrol update``, ``scancel``) did.

    Attributes:
        ok: The job is requeued.
        target: The id given to scontrol.
        why: Why not (scontrol's message), when not ``ok``; how it is known, when ``ok``
            though scontrol did not say so.
        missing: The command is not installed where the sidecar runs.
        signal: The signal that ended the command, if one did.
    """

    ok: bool
    target: str
    why: str | None = None
    missing: bool = False
    signal: int | None = None


def finished_attempt(history: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``attempt_end`` of an earlier attempt that ran the job to its own end (success, or
    a failure of the user's code, which is never requeued), if the newest one did; ``None``
    when the job still has work to do. A new attempt after it is a run nobody here asked
    for (the module docstring: Slurm's leftover grace flag, or someone's ``scontrol
    requeue`` of a finished job)."""
    ends = [e for e in history if e.get("event") == "attempt_end"]
    # A failure that hpclaunch requeued itself (the spec's retry:) is no end.
    if ends and ends[-1].get("reason") in FINISHED_REASONS and not ends[-1].get("requeued"):
        return ends[-1]
    return None


def issue_requeue(
    runner: Runner, target: str, *, attempt: int | None = None, timeout: float = 20
) -> RequeueOutcome:
    """Run ``scontrol requeue <target>``; never raises.

    The requeue ends this attempt: Slurm SIGTERMs the job's processes, and scontrol is one of
    them. When that signal beats slurmctld's reply (seen on 25.11: scontrol ended by signal
    15, the job requeued all the same), or Slurm requeued the job itself a moment before
    (a preemption's grace ended: scontrol says "Job is pending execution", seen on 25.11),
    the restart count above ``attempt`` (this attempt's ``SLURM_RESTART_COUNT``) shows the
    job is requeued.
    """
    outcome = _run_slurm(runner, target, ["scontrol", "requeue", target], timeout)
    if outcome.ok or outcome.missing or attempt is None:
        return outcome
    restarts = slurm_restarts(runner, target)
    if restarts is not None and restarts > attempt:
        said = (
            f"scontrol ended by signal {outcome.signal}"
            if outcome.signal is not None
            else f"scontrol said {outcome.why!r}"
        )
        return RequeueOutcome(True, target, f"{said}; Restarts={restarts} shows the requeue")
    return outcome


def forbid_requeue(runner: Runner, target: str, *, timeout: float = 20) -> RequeueOutcome:
    """``scontrol update JobId=<target> Requeue=0``: Slurm then ends a job it preempts
    instead of requeueing it (the policy said no). Never raises."""
    return _run_slurm(
        runner, target, ["scontrol", "update", f"JobId={target}", "Requeue=0"], timeout
    )


def end_expedited(runner: Runner, env: Mapping[str, str]) -> None:
    """Before a job that asked ``--requeue=expedite`` (``EXPEDITED_ENV`` set) ends with an
    error: clear its Requeue. Slurm would requeue it and hold it ("job requeued in held
    state": any non-zero exit requeues such a job, and it is held when no epilog failed;
    job_mgr.c, 25.11.7); cleared, the job ends FAILED (or OUT_OF_MEMORY), as any other.
    Nothing for other jobs. Never raises."""
    if env.get(EXPEDITED_ENV) != "1":
        return
    done = forbid_requeue(runner, requeue_target(env))
    if not done.ok:
        print(
            f"hpclaunch: could not turn off the job's expedited requeue ({done.why}): Slurm "
            "may requeue it held; scancel it",
            file=sys.stderr,
            flush=True,
        )


def delay_start(
    runner: Runner, target: str, seconds: float, *, timeout: float = 20
) -> RequeueOutcome:
    """``scontrol update JobId=<target> StartTime=now+<seconds>``: a job just requeued (so
    PENDING) waits that long before it may start (``retry:``'s backoff; hpclaunch/supervise/
    retry.py says why Slurm keeps it). Never raises."""
    return update_pending(runner, target, {"StartTime": f"now+{max(1, round(seconds))}"}, timeout)


def raise_memory(runner: Runner, target: str, mb: int, *, timeout: float = 20) -> RequeueOutcome:
    """``scontrol update JobId=<target> MinMemoryNode=<mb>``: a job just requeued after an
    OOM gets more memory for its next attempt. A pending job's owner may raise it (no
    operator check on pn_min_memory in _update_job, src/slurmctld/job_mgr.c, 25.11.7; a
    running job's: ESLURM_JOB_NOT_PENDING). Never raises."""
    return update_pending(runner, target, {"MinMemoryNode": str(mb)}, timeout)


def update_pending(
    runner: Runner, target: str, changes: Mapping[str, str], timeout: float = 20
) -> RequeueOutcome:
    """``scontrol update JobId=<target> K=V ...`` of a job just requeued. Never raises."""
    argv = ["scontrol", "update", f"JobId={target}", *(f"{k}={v}" for k, v in changes.items())]
    outcome = _run_slurm(runner, target, argv, timeout)
    for _ in range(2):
        # The requeue's SIGTERM to the job's processes may come while scontrol runs (it is
        # sent once; SIGKILL follows only after KillWait): a second one is not signalled.
        if outcome.ok or outcome.signal is None:
            break
        outcome = _run_slurm(runner, target, argv, timeout)
    return outcome


def slurm_requeue_delay(runner: Runner, *, timeout: float = 10) -> int:
    """The seconds slurmctld itself keeps a requeued job waiting (its credential must expire
    first: :func:`hpclaunch.slurm.capabilities.requeue_delay`); Slurm's default when the
    configuration cannot be read. Never raises."""

    try:
        shown = runner.run(["scontrol", "show", "config"], timeout=timeout)
    except TransportError:
        return DEFAULT_CRED_EXPIRE + 1
    return requeue_delay(parse_config(shown.stdout)) if shown.ok else DEFAULT_CRED_EXPIRE + 1


def cancel_requeued(runner: Runner, target: str, *, timeout: float = 20) -> RequeueOutcome:
    """``scancel <target>``: end a job Slurm already requeued when the policy says no more
    (a node failure past ``max_requeues``). Never raises."""
    return _run_slurm(runner, target, ["scancel", target], timeout)


def _run_slurm(runner: Runner, target: str, argv: list[str], timeout: float) -> RequeueOutcome:
    try:
        result = runner.run(argv, timeout=timeout)
    except ProgramNotFound as exc:
        return RequeueOutcome(False, target, f"{argv[0]} not found: {exc.message}", missing=True)
    except CommandTimeout as exc:
        return RequeueOutcome(False, target, exc.message)
    except TransportError as exc:
        return RequeueOutcome(False, target, exc.message)
    if result.returncode != 0:
        why = (result.stderr or result.stdout).strip() or f"exit code {result.returncode}"
        signal = -result.returncode if result.returncode < 0 else None
        return RequeueOutcome(False, target, why, signal=signal)
    return RequeueOutcome(True, target)


def job_now(runner: Runner, job_id: str, *, timeout: float = 5) -> ShownJob:
    """The job as slurmctld has it now (all ``None`` when unknown). A SIGTERM that comes
    with ``Restarts`` above ``SLURM_RESTART_COUNT`` is a requeue, not a cancel; with a
    ``FailedNode`` it is Slurm's requeue after a node failure (:class:`ShownJob`)."""
    try:
        result = runner.run(show_job_argv(job_id), timeout=timeout)
    except TransportError:
        return ShownJob()
    return parse_show_job(result.stdout) if result.returncode == 0 else ShownJob()


def slurm_restarts(runner: Runner, job_id: str, *, timeout: float = 5) -> int | None:
    """The job's restart count as slurmctld has it now, or ``None`` when unknown
    (:func:`job_now`)."""
    return job_now(runner, job_id, timeout=timeout).restarts


def slurm_requeues_on_exit(runner: Runner, target: str, *, timeout: float = 5) -> bool:
    """Whether Slurm will requeue the job itself when it exits now: Slurm is preempting
    it (``PreemptTime`` set) and the release is one that requeues a job exiting in its
    grace time (see the module docstring). ``False`` when unsure (then scontrol requeue)."""

    try:
        version = runner.run(["scontrol", "--version"], timeout=timeout)
        if not version.ok or slurm_release(version_said(version.stdout)) < REQUEUES_ON_GRACE_EXIT:
            return False
        job = runner.run(show_job_argv(target), timeout=timeout)
    except TransportError:
        return False
    return job.ok and parse_show_job(job.stdout).preempting


@dataclass(frozen=True)
class RequeueDecision:
    """Whether to requeue, and why (written to the ledger)."""

    requeue: bool
    why: str


def no_progress_streak(
    ends: Sequence[Mapping[str, Any]], how: str, *, past: frozenset[str] = frozenset()
) -> int:
    """Attempts in a row without progress, this one (which made none) included: the
    ledger's ``attempt_end`` events ``ends`` are read back from the newest while they ended
    ``how`` (their ``requeued`` or ``retry`` flag) without progress; an ending whose reason
    is in ``past`` is looked past."""
    streak = 1
    for end in reversed(ends):
        if end.get("reason") in past:
            continue
        if not (end.get(how) and end.get("no_progress")):
            break
        streak += 1
    return streak


def decide(
    reason: str,
    history: Sequence[Mapping[str, Any]],
    *,
    max_requeues: int,
    no_progress: bool,
    preemptible: bool = True,
) -> RequeueDecision:
    """Decide whether an attempt that ended for ``reason`` is requeued.

    Args:
        reason: ``preempted``, ``time_limit``, ``node_failure``, ``user_error``, ...
        history: The ledger's events of the earlier attempts.
        max_requeues: The spec's ``checkpoint.max_requeues`` (0: never requeue).
        no_progress: This attempt made no progress.
        preemptible: The job's tier may be preempted.
    """
    if reason not in ("preempted", *CAPPED_REASONS):
        return RequeueDecision(False, f"{reason}: not requeued")
    if max_requeues <= 0:
        return RequeueDecision(False, "max_requeues is 0: never requeued")
    ends = [e for e in history if e.get("event") == "attempt_end"]
    used = sum(1 for e in ends if e.get("requeued") and e.get("reason") in CAPPED_REASONS)
    if reason in CAPPED_REASONS and used >= max_requeues:
        # First: the cap is the job's own rule; whether this attempt showed progress in
        # time depends on the machine's load (a clean-clone run's second attempt reported
        # none before its time limit, and was refused for that instead).
        return RequeueDecision(
            False, f"{reason}: max_requeues ({max_requeues}) used up by earlier attempts"
        )
    if reason == "time_limit" and no_progress and not preemptible:
        # A job of a guaranteed tier that reports no steps (no runtime API) would run the
        # same steps again, to the same time limit: a requeue only doubles what it costs.
        # Preemptible work keeps its one retry (the breaker stops the second): a sweep task
        # held up by a slurmctld outage finishes on it (tests/integration/faults.py).
        return RequeueDecision(
            False,
            "time_limit: no progress reported in this attempt (runtime.report_progress or a "
            "committed checkpoint), so a requeue would run the same steps again",
        )
    if no_progress and reason != "preempted":
        # Requeued by a user or operator, resized, preempted: no crash, looked past.
        streak = no_progress_streak(ends, "requeued", past=_NOT_CRASHES)
        if streak >= NO_PROGRESS_LIMIT:
            return RequeueDecision(
                False,
                f"crash-loop breaker: {streak} attempts in a row ended without progress",
            )
    if reason in CAPPED_REASONS:
        return RequeueDecision(True, f"{reason}: requeue {used + 1} of {max_requeues}")
    return RequeueDecision(True, "preempted: requeued without limit")
