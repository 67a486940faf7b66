"""The requeue ledger: ``$HPCLAUNCH_JOB_DIR/events.jsonl``, one JSON object per line.

Every attempt of a job (the job id stays the same across requeues) appends to the same file.
Each line has ``event`` (what happened), ``attempt`` and ``time`` (unix seconds), plus
fields of its own:

==========================  ========================================================
event                       fields
==========================  ========================================================
``attempt_start``           ``nodes``, ``master_addr``, ``master_port``, ``argv``,
                            ``progress_step`` (the trainer's step when it started),
                            ``resize_seconds`` (after a resize: seconds since its request)
``restart_refused``         ``after_attempt``, ``reason``, ``why``: Slurm started the job
                            again after that attempt ran it to its end; nothing was run
                            (written instead of ``attempt_start``)
``stale_control_files``     ``files``: name → content (left by the previous attempt; one
                            event, before ``attempt_start``)
``early_signal``            ``signal``: the batch script caught it before the sidecar ran
                            (then handled as if it came at the start)
``signal_received``         ``signal`` (``USR1``, ``TERM``, ...)
``checkpoint_requested``    ``reason``, ``deadline``, ``time_left`` (seconds to the time limit
                            at the warning, from squeue or ``SLURM_JOB_END_TIME``; null: unknown)
``checkpoint_committed``    ``step``, ``seconds``, ``path``, ``reason`` (the done file's)
``resize_pending``          ``from_nodes``, ``to_nodes``, ``why``, ``by``: a pending job's
                            node count changed by ``hpclaunch resize`` (written on the
                            login node; ``attempt`` null)
``checkpoint_periodic``     ``step``, ``seconds``, ``path``: a commit of the trainer's own
                            schedule, written by :mod:`hpclaunch.runtime` (the sidecar
                            logs a periodic commit that ends its launch once more, as
                            ``checkpoint_committed``: count steps, not lines)
``checkpoint_failed``       ``step``, ``errno``, ``errno_name`` (``ENOSPC``, ``EDQUOT``...),
                            ``error``, ``dir``, ``resume_step`` (the newest complete one)
``checkpoint_timeout``      ``waited`` (no answer before the deadline), ``periodic_step``
                            (a periodic commit made after the request, or ``None``)
``requeue_issued``          ``target`` (``jobid`` or ``jobid_taskid``)
``requeue_by_slurm``        ``target``, ``why``: Slurm preempts the job and requeues it
                            when it exits (24.11+; no ``scontrol requeue``)
``requeue_forbidden``       ``target``, ``ok``, ``why``: ``scontrol update Requeue=0``, so
                            that Slurm does not requeue a job the policy ended
``requeue_failed``          ``target``, ``why``
``requeue_skipped``         ``why`` (policy cap or crash-loop breaker)
``attempt_end``             ``reason``, ``exit_code``, ``requeued``, ``steps_lost`` (from
                            the commit, or the resume step a failed checkpoint named;
                            none after ``success``), ``last_step``, ``committed_step``
                            (the newest commit, asked for or the trainer's own),
                            ``no_progress`` and, for
                            ``user_error``, ``error_line`` and ``tail``; for
                            ``requeued`` (SIGTERM by ``scontrol requeue``), ``restarts``
``gpu_monitor_off``         ``node``, ``reason`` (once per node and attempt; see
                            :mod:`hpclaunch.supervise.gpumon`)
``gpu_idle``                ``node``, ``gpus``, ``samples``, ``seconds``, ``max_util``
==========================  ========================================================

``attempt_end`` reasons: ``success``, ``user_error``, ``node_failure``, ``preempted`` and
``time_limit`` (warned by USR1/USR2, or a SIGTERM that ``scontrol show job`` says is
Slurm's: ``Reason=TimeLimit``, ``PreemptTime`` set), ``requeued`` (SIGTERM while Slurm
requeues the job: ``scontrol requeue`` by a user or operator), ``cancelled`` (SIGTERM
otherwise: scancel; SIGINT), ``launch_failed``, ``job_lost`` (srun: slurmctld no longer
knows the job, after a restart that lost its last seconds; with ``why``),
``controller_unreachable`` (srun could not reach slurmctld to start the step, every
``launch_retry``; with ``why``). ``preempted``, ``time_limit`` and ``requeued`` are also
how an attempt ends whose step Slurm cancelled before its SIGTERM reached the sidecar (the
step's log says ``CANCELLED ... DUE TO PREEMPTION``; with ``why``).

``launch_retry`` (``retry``, ``wait``, ``why``): srun could not reach slurmctld before it
started the step, so nothing ran; the sidecar launches again after ``wait`` seconds.

Lines are written with one ``write`` on a descriptor opened with ``O_APPEND`` and then
fsync'd, so a line is never interleaved with another writer's and survives the node going
down right after.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpclaunch import jobdir

__all__ = [
    "SLURM_MAY_REQUEUE",
    "SUCCESS_LINE",
    "Ledger",
    "describe_event",
    "parse_ledger",
    "read_ledger",
]

#: An extended regular expression (``grep -E``) for the line :meth:`Ledger.append` writes
#: when an attempt ends ``success`` (json.dumps: event, attempt and time first).
SUCCESS_LINE = r'^\{"event": "attempt_end", .*"reason": "success"'

#: ``attempt_end`` reasons after which Slurm, not the sidecar, decides whether the job
#: comes back (``requeued`` false): a preemption (PreemptMode=REQUEUE brings it back).
SLURM_MAY_REQUEUE = frozenset({"preempted"})

#: The events of a committed checkpoint: the sidecar's (asked for, or ending a launch) and
#: the trainer's own schedule's; one commit may be logged by both (count its step once).
COMMIT_EVENTS = frozenset({"checkpoint_committed", "checkpoint_periodic"})


class Ledger:
    """Appends events of one attempt to ``<job_dir>/events.jsonl``.

    Args:
        job_dir: The job directory (``HPCLAUNCH_JOB_DIR``).
        attempt: The attempt number (``SLURM_RESTART_COUNT``), written on every line.
        observer: Called with each event once it is written (the job's notifications,
            :mod:`hpclaunch.supervise.notices`); it must not raise.
    """

    def __init__(
        self,
        job_dir: str | Path,
        attempt: int,
        observer: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.path = Path(job_dir) / jobdir.LEDGER
        self.attempt = attempt
        self.observer = observer

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event and return it as written."""
        record: dict[str, Any] = {"event": event, "attempt": self.attempt, "time": time.time()}
        record.update(fields)
        line = (json.dumps(record, sort_keys=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.observer is not None:
            self.observer(record)
        return record

    def history(self) -> list[dict[str, Any]]:
        """Every event written so far, by every attempt."""
        return read_ledger(self.path.parent)


def read_ledger(job_dir: str | Path) -> list[dict[str, Any]]:
    """The events of ``<job_dir>/events.jsonl``; ``[]`` when there is none.

    A torn last line (the node died mid-write) is skipped, not an error.
    """
    path = Path(job_dir) / jobdir.LEDGER
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return parse_ledger(text)


def parse_ledger(text: str) -> list[dict[str, Any]]:
    """The events in the text of an ``events.jsonl`` (torn or foreign lines are skipped):
    the JSON objects of a JSON-lines text, the metrics file's too."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def describe_event(event: dict[str, Any]) -> str:
    """One line of text for an event, e.g. ``checkpoint_committed step 120 in 0.4 s``."""
    name = str(event.get("event", "?"))
    when = event.get("time")
    # Local ISO time, as sacct prints the attempts' start and end.
    local = time.localtime(when) if isinstance(when, (int, float)) else None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", local) if local is not None else "?"
    skip = {"event", "attempt", "time", "tail", "argv"}
    # attempt_end's exit_code is the launch's, not Slurm's (sacct's ExitCode of the attempt).
    rename = {"exit_code": "launch_exit"} if name == "attempt_end" else {}
    shown = " ".join(
        f"{rename.get(key, key)}={value}"
        for key, value in event.items()
        if key not in skip and value is not None
    )
    return f"{stamp} {name}" + (f" {shown}" if shown else "")
