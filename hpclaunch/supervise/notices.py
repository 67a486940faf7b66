"""The ledger's events that the job's ``notify:`` names, as notices sent from the node.

:class:`Notifier` watches what the sidecar and the GPU sampler write to the ledger
(:class:`~hpclaunch.supervise.ledger.Ledger`'s ``observer``) and turns the events a user wants
to hear of into notices, sent through the job's outbox (:mod:`hpclaunch.notify.outbox`): at
once when the node reaches the webhook, else later from the login node. It never raises:
telling someone must not stop the job.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpclaunch.notify.message import Notice, log_tail_text
from hpclaunch.notify.outbox import Outbox
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.requeue import requeue_target
from hpclaunch.transport.local import LocalRunner

__all__ = ["NOTIFY_ENV", "Notifier", "notice_of"]

#: The path of the job's ``notify/config.json`` (set by the plan when the spec has notify:).
NOTIFY_ENV = "HPCLAUNCH_NOTIFY"
#: Endings that are the job's failure (not requeued): a ``failed`` notice.
_FAILURES = frozenset(
    {
        "user_error",
        "oom",
        "launch_failed",
        "job_lost",
        "controller_unreachable",
        "node_failure",
        "time_limit",
        "preempted",
    }
)


class Notifier:
    """Sends the notices of one job's events (see the module docstring)."""

    def __init__(self, outbox: Outbox, env: Mapping[str, str], log_path: Path | None) -> None:
        self.outbox = outbox
        self.env = dict(env)
        self.log_path = log_path
        self.job_dir = Path(env.get("HPCLAUNCH_JOB_DIR") or ".")

    @classmethod
    def from_env(cls, env: Mapping[str, str], log_path: Path | None = None) -> Notifier | None:
        """The job's notifier, or ``None`` when it has no ``notify:`` (or it cannot be read)."""
        path = env.get(NOTIFY_ENV)
        if not path:
            return None

        with contextlib.suppress(Exception):
            outbox = Outbox.of_job(LocalRunner(), path)
            return None if outbox is None else cls(outbox, env, log_path)
        return None

    def __call__(self, record: Mapping[str, Any]) -> None:
        """Send the notice of ledger event ``record``, if it makes one."""
        try:
            notice = notice_of(record, self.env, self._history, self._tail)
            if notice is not None:
                self.outbox.deliver(notice, self.env.get("SLURMD_NODENAME") or socket.gethostname())
        except Exception:
            return

    def _history(self) -> list[dict[str, Any]]:
        return read_ledger(self.job_dir)

    def _tail(self) -> Sequence[str]:
        if self.log_path is None:
            return ()
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - 16384))
                return fh.read().decode(errors="replace").splitlines()
        except OSError:
            return ()


def notice_of(
    record: Mapping[str, Any],
    env: Mapping[str, str],
    history: Any = list,
    tail: Any = tuple,
) -> Notice | None:
    """The notice of one ledger event, or ``None`` (an event nobody is told of).

    Args:
        env: The job's environment (its id and name).
        history: Returns the ledger so far (the run time of a completed job).
        tail: Returns the attempt log's last lines (a failure's, when the event has none).
    """
    job_id = _job_id(env)
    name = env.get("SLURM_JOB_NAME", "")
    event, attempt = record.get("event"), record.get("attempt", 0)

    def notice(kind: str, key: str, summary: str, *details: str, **facts: Any) -> Notice:
        return Notice(
            key, kind, job_id, name, summary, tuple(details), {"attempt": attempt, **facts}
        )

    if event == "attempt_start":
        nodes = ", ".join(str(n) for n in record.get("nodes") or ()) or "?"
        if not attempt:
            return notice("started", f"start-{attempt}", f"started on {nodes}")
        step = record.get("progress_step")
        since = f", resuming from step {step}" if step is not None else ""
        return notice("resumed", f"start-{attempt}", f"attempt {attempt} started on {nodes}{since}")
    if event == "checkpoint_failed":
        why = f"{record.get('errno_name') or 'error'}: {record.get('error')}"
        return notice(
            "checkpoint_failed",
            f"checkpoint_failed-{attempt}-{record.get('step')}",
            f"the checkpoint of step {record.get('step')} failed ({why})",
        )
    if event == "gpu_idle":
        return notice(
            "gpu_idle",
            f"gpu_idle-{attempt}-{record.get('node')}",
            f"every GPU on {record.get('node')} below the idle threshold for "
            f"{record.get('seconds')} s (highest {record.get('max_util')} %)",
        )
    if event != "attempt_end":
        return None
    reason = str(record.get("reason"))
    step = record.get("last_step")
    at = f" at step {step}" if step is not None else ""
    if record.get("requeued"):
        if reason == "preempted":
            return notice(
                "preempted", f"preempted-{attempt}", f"preempted{at}; requeued, it resumes"
            )
        if reason == "resized":
            sizes = f" from {record.get('from_nodes')} to {record.get('to_nodes')} nodes"
            known = record.get("from_nodes") is not None and record.get("to_nodes") is not None
            return notice(
                "resized",
                f"resized-{attempt}",
                f"stopped{at} to resize{sizes if known else ''}; requeued",
                from_nodes=record.get("from_nodes"),
                to_nodes=record.get("to_nodes"),
            )
        if reason == "requeued":  # scontrol requeue by someone: as a preemption, it resumes
            return notice(
                "preempted",
                f"requeued-{attempt}",
                f"requeued by Slurm{at} (scontrol requeue by a user or operator, or a "
                "preemption without a warning); it resumes from its last checkpoint",
            )
        if reason in _FAILURES and record.get("retry") is not None:  # retry: it runs again
            code = record.get("exit_code")
            wait = record.get("retry_wait")
            then = f" in {wait:g} s" if isinstance(wait, (int, float)) else ""
            return notice(
                "failed",
                f"retried-{attempt}",
                f"failed ({reason}, exit code {code}){at}; retry {record.get('retry')} "
                f"starts{then} (its retry: policy)",
                *log_tail_text(record.get("tail") or list(tail())),
                exit_code=code,
                retry=record.get("retry"),
            )
        return None  # a time limit or a node failure: it goes on
    if reason == "stopped_idle":
        why = record.get("why") or "its GPUs sat idle"
        return notice("stopped_idle", "end", f"stopped{at}, not requeued: {why}")
    if reason == "success":
        ran, gpu_hours = _run_time(history(), env)
        return notice(
            "completed",
            "end",
            f"completed after {attempt + 1} attempt{'s' if attempt else ''}, {_duration(ran)}, "
            f"{gpu_hours:.2f} GPU-hours",
            ran_s=round(ran, 1),
            gpu_hours=round(gpu_hours, 3),
        )
    if reason in _FAILURES:
        lines = record.get("tail") or list(tail())
        code = record.get("exit_code")
        said = record.get("error_line") or record.get("why") or ""
        summary = f"failed ({reason}, exit code {code}){at}" + (f": {said}" if said else "")
        return notice("failed", "end", summary, *log_tail_text(lines), exit_code=code)
    return None


def _job_id(env: Mapping[str, str]) -> str:
    """The job's id as Slurm names it (an array task's ``<array>_<task>``), ``?`` outside."""
    return requeue_target(env) if "SLURM_JOB_ID" in env else "?"


def _run_time(history: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> tuple[float, float]:
    """Seconds the attempts ran (start to end, from the ledger) and the GPU-hours."""
    starts: dict[int, float] = {}
    ran = 0.0
    for event in history:
        attempt, when = event.get("attempt"), event.get("time")
        if not isinstance(attempt, int) or not isinstance(when, (int, float)):
            continue
        if event.get("event") == "attempt_start":
            starts[attempt] = float(when)
        elif event.get("event") == "attempt_end" and attempt in starts:
            ran += float(when) - starts.pop(attempt)
    return ran, ran * _gpus(env) / 3600


def _gpus(env: Mapping[str, str]) -> int:
    """The job's GPUs: per node times nodes (Slurm's SLURM_GPUS_ON_NODE, SLURM_JOB_NUM_NODES)."""
    per_node = env.get("SLURM_GPUS_ON_NODE", "")
    nodes = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
    if per_node.isdigit() and nodes.isdigit():
        return int(per_node) * int(nodes)
    return 0


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d} min"
