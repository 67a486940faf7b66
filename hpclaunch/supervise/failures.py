"""What a launch's last lines say of how it failed: a node failure, srun that could not
reach slurmctld (nothing ran), a job slurmctld lost, a step Slurm cancelled (a preemption,
the time limit, a requeue), an out-of-memory kill, or the user's own error and the line
that names it; and what a SIGTERM without a warning means."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hpclaunch.slurm.live_job import ShownJob
from hpclaunch.supervise.retry import OOM

__all__ = [
    "CONTROLLER_MISSED",
    "JOB_LOST",
    "LAUNCH_RETRY_WAITS",
    "NODE_FAILURE",
    "SLURM_ENDED",
    "SLURM_ENDED_REASONS",
    "classify_exit",
    "error_line",
    "oom_culprit",
    "term_cause",
]

_ERROR_LINE = re.compile(
    r"^(?:\[[^\]]*\]:?\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$"
)
#: Exceptions that follow another rank's failure rather than cause it.
_AFTERMATH = re.compile(
    r"ChildFailedError|SignalException|KeyboardInterrupt|Connection closed by peer|"
    r"Connection reset by peer|got signal: ?\d+|Signal \d+ \(SIG"
)
NODE_FAILURE = re.compile(r"node failure|NODE_FAIL|Node .* not responding", re.IGNORECASE)
#: srun's words when slurmctld no longer knows the job it runs in: killed within its
#: state-save delay (<= 5 s) after starting it, it restarts without that start (25.11).
JOB_LOST = re.compile(r"Unable to confirm allocation for job \d+: Invalid job id")
#: srun's words when it could not ask slurmctld about the job or create the step, because
#: slurmctld did not answer (killed and restarting: seen on 25.11 in the fault tests). The
#: step was never created, so nothing ran: the launch is tried again.
CONTROLLER_MISSED = re.compile(
    r"Unable to (?:confirm allocation|create step) for job \d+: (?:Unexpected missing "
    r"socket error|Unable to contact slurm controller|Socket timed out|Zero Bytes were "
    r"transmitted|Connection refused|Connection reset by peer|Communication connection "
    r"failure)"
)
#: slurmstepd's words when Slurm cancels a step (src/slurmd/slurmstepd/req.c, the same
#: in 22.05-26.05), and how the attempt's end names each. The step can die of it before
#: the batch step's SIGTERM reaches the sidecar (clean-clone run 49: a preempted array task
#: ended as the user's error, exit 143, and its requeue by Slurm was refused as a rerun).
STEP_CANCELLED = re.compile(
    r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+ DUE TO (PREEMPTION|TIME LIMIT|JOB REQUEUE) \*\*\*"
)
SLURM_ENDED = {
    "PREEMPTION": (
        "preempted",
        "Slurm cancelled the step for a preemption before its SIGTERM reached the sidecar; "
        "Slurm decides whether the job comes back",
    ),
    "TIME LIMIT": (
        "time_limit",
        "Slurm cancelled the step at the time limit before its SIGTERM reached the sidecar",
    ),
    "JOB REQUEUE": (
        "requeued",
        "Slurm cancelled the step to requeue the job (scontrol requeue, or a preemption); the "
        "next attempt resumes from the last committed checkpoint",
    ),
}
SLURM_ENDED_REASONS = frozenset(reason for reason, _ in SLURM_ENDED.values())
#: Seconds before each new launch after :data:`_CONTROLLER_MISSED` (about 1.5 min in all:
#: a controller restart or failover).
LAUNCH_RETRY_WAITS = (2.0, 4.0, 8.0, 16.0, 30.0, 30.0)


def error_line(lines: Sequence[str]) -> str | None:
    """The last line that names an exception (``ValueError: ...``) and is not what the
    other ranks and the launcher said because of it (:data:`_AFTERMATH`), else the last
    line that is not srun's own.

    When one rank of a torchrun launch fails, the others then fail too ("Connection closed
    by peer", or SIGTERM: ``SignalException``) and torchrun ends with ``ChildFailedError``;
    those come last, but the first rank's exception is the cause
    (tests/supervise/data/torchrun-2.13-rank1-raises.txt).
    """
    for line in reversed(lines):
        match = _ERROR_LINE.match(line.strip())
        if match and not _AFTERMATH.search(line):
            return match.group(1)
    for line in reversed(lines):
        if not line.startswith("srun:"):
            return line
    return None


#: srun's line for tasks that Slurm saw OOM-killed (src/srun/step_ctx / srun_job.c, 22.05-26.05):
#: ``srun: error: n1: task 0: Out Of Memory``, ``... n2: tasks 4-7: Out Of Memory``.
_SRUN_OOM = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): Out Of Memory")
#: torchrun's failure summary (torch.distributed.elastic's ChildFailedError, 2.x): the first
#: observed failure's host and global rank.
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
_SUMMARY_FIELD = re.compile(r"^\s*(host|rank)\s*:\s*(\S+)")


def oom_culprit(tail: Sequence[str], launcher: str) -> dict[str, Any]:
    """Where a launch ran out of memory, from its last lines: ``oom_node`` (srun's line)
    and ``oom_rank``: the task for the ``srun`` launcher (a task is a rank there); for the
    launchers that start ranks themselves, torchrun's summary's first failure (its host
    too). Empty when the lines name neither."""
    found: dict[str, Any] = {}
    for line in tail:
        match = _SRUN_OOM.search(line)
        if match:
            found["oom_node"] = match.group(1)
            if launcher == "srun":
                found["oom_rank"] = match.group(2)
            break
    if launcher != "srun":
        summary = [i for i, line in enumerate(tail) if _ROOT_CAUSE.search(line)]
        for line in tail[summary[-1] + 1 :] if summary else ():
            match = _SUMMARY_FIELD.match(line)
            if match and match.group(1) == "host":
                found["oom_node"] = match.group(2)
            elif match:
                found["oom_rank"] = match.group(2)
                break
    return found


def term_cause(now: ShownJob | None) -> str:
    """What a SIGTERM that is no requeue means: ``time_limit``, ``preempted`` or
    ``cancelled`` (also when slurmctld could not be asked)."""
    if now is None:
        return "cancelled"
    if now.at_time_limit:
        return "time_limit"
    return "preempted" if now.preempting else "cancelled"


def classify_exit(tail: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """How a launch that exited non-zero failed, from its last lines: ``node_failure``,
    ``controller_unreachable``, ``job_lost``, ``oom``, a step Slurm cancelled
    (``preempted``, ``time_limit``, ``requeued``) or ``user_error``, and what the
    attempt's end records of it (why; for the user's own error, its line and the tail)."""
    reason = "node_failure" if any(NODE_FAILURE.search(x) for x in tail) else "user_error"
    extra: dict[str, Any] = {}
    if any(CONTROLLER_MISSED.search(x) for x in tail):
        reason = "controller_unreachable"
        extra = {
            "why": "srun could not reach slurmctld to start the step, "
            f"{len(LAUNCH_RETRY_WAITS) + 1} times: nothing ran"
        }
    if any(JOB_LOST.search(x) for x in tail):
        reason = "job_lost"
        extra = {
            "why": "slurmctld does not know this job any more (restarted and lost the "
            "seconds before its last state save?), so srun could not start the step; "
            "Slurm may start it again"
        }
    if reason == "user_error" and any(OOM.search(x) for x in tail):
        reason = "oom"
    cancelled = [m.group(1) for x in tail if (m := STEP_CANCELLED.search(x))]
    if reason == "user_error" and cancelled:
        reason, why = SLURM_ENDED[cancelled[-1]]
        return reason, {"why": why}
    if reason in ("user_error", "oom"):
        extra = {"error_line": error_line(tail), "tail": list(tail[-20:])}
    return reason, extra
