"""How much a running job would lose if preempted now, read from its own job directory.

hpclaunch's jobs leave what the arbiter needs on the shared filesystem, next to the batch
script (``<job dir>/job.sbatch``, which ``squeue %o`` names):

* ``events.jsonl``, the sidecar's ledger: an ``attempt_start`` line per attempt (so the job
  runs under the sidecar and will answer a checkpoint request), the reason each earlier
  attempt ended (how often it was preempted already);
* ``control/checkpoint-done.json``: the newest committed checkpoint, when it was committed
  and how long the write took (the runtime writes it at every commit, periodic ones too).
  The sidecar removes it when a new attempt starts (after recording it in the ledger as a
  ``stale_control_files``): until the new attempt's first commit, the ledger's newest
  commit (that record, or a ``checkpoint_committed`` on request) gives the write time.

A sweep's array task has its own directory ``<job dir>/tasks/<point>/`` (see
:func:`job_dir_of`). A job without these files (not hpclaunch's, or unreadable) is
taken as one that would lose everything since it started, and that cannot checkpoint.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch.scheduling.adaptive_batch import Adaptive, measured_in
from hpclaunch.slurm.times import parse_time_limit
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.resize import elastic_of_script
from hpclaunch.supervise.sweep_task import task_dir

__all__ = ["JobProgress", "job_dir_of", "read_progress"]

#: Attempt end reasons that count as a preemption against the per-job cap (a shrink, too:
#: the job restarted smaller, and is protected for ``min_run`` as after a preemption; a
#: growth is not: see ``JobProgress.growths``).
PREEMPTED_REASONS = frozenset({"preempted", "requeued", "resized"})
#: Seconds assumed for a checkpoint write never measured.
DEFAULT_CKPT_WRITE = 30.0


@dataclass(frozen=True)
class JobProgress:
    """What a running job has at stake.

    Attributes:
        supervised: Its current attempt runs under the sidecar (it answers a checkpoint
            request: the arbiter signals it instead of requeueing it at once).
        committed_at: When its newest checkpoint of the current attempt was committed.
        ckpt_write: Seconds its last checkpoint write took (a default when never seen).
        write_measured: ``ckpt_write`` was measured (the job committed a checkpoint).
        preemptions: Attempts that ended preempted, requeued or shrunk so far (a job just
            restarted after those is protected for ``min_run``).
        growths: Attempts that ended to restart larger (Slurm counts those restarts too;
            they protect nobody: a critical job must not wait because a job grew).
        directory: Where this was read, ``None`` when not found.
        elastic_nodes: The node counts an elastic job may run at (its script's
            ``HPCLAUNCH_ELASTIC``; ``()``: not elastic): the arbiter shrinks it instead of
            evicting it when a smaller size leaves room, and grows it into idle GPUs.
        elastic_interval: Its ``elastic.min_interval``: no growth sooner after its start.
        time_limit: Seconds each attempt may run, as submitted (its script's ``#SBATCH
            --time``; an admin's later ``scontrol update TimeLimit`` is not seen);
            ``None``: unknown. A growth must save more than it costs within it.
        speeds: Samples per second the job trained at, by node count (the newest attempt
            at each size that reported them, the running one included:
            ``runtime.report_progress(samples=...)``).
        served: Node-seconds its ended attempts held (its ledger's starts and ends: the
            attained service of least-attained-service order, the current run aside).
        batch: Its ``elastic.batch`` (``fixed``, ``linear``, ``sqrt``, ``adaptive``): how
            its global batch follows its size, so that samples/s at two sizes compare.
        adaptive: With ``batch: adaptive``, its batch limits and what its ended attempts
            measured (the plan its next attempt will choose, and that plan's goodput).
        ranks_per_node: Its ranks on each node (an elastic job's; 1 otherwise).
    """

    supervised: bool = False
    committed_at: float | None = None
    ckpt_write: float = DEFAULT_CKPT_WRITE
    write_measured: bool = False
    preemptions: int = 0
    growths: int = 0
    directory: str | None = None
    elastic_nodes: tuple[int, ...] = ()
    elastic_interval: float = 600.0
    time_limit: float | None = None
    speeds: Mapping[int, float] = field(default_factory=dict)
    served: float = 0.0
    batch: str = "fixed"
    adaptive: Adaptive | None = None
    ranks_per_node: int = 1

    def since_commit(self, now: float, run_start: float | None) -> float:
        """Seconds of the current run a kill at ``now`` would throw away."""
        base = run_start if run_start is not None else now
        if self.committed_at is not None and self.committed_at >= base:
            base = self.committed_at
        return max(0.0, now - base)


def job_dir_of(command: str | None, job_id: str) -> Path | None:
    """The job (or array task) directory of job ``job_id`` whose ``squeue %o`` is ``command``.

    ``%o`` is the batch script's path and its arguments, joined by spaces without quotes
    (22.05: ``/home/a/.hpclaunch/jobs/<id>/job.sbatch 101``), so the path is cut at
    hpclaunch's script name, not at the first space. A sweep's script gets its array's
    offset as first argument: task ``<array>_<K>`` runs point ``offset + K``, in
    ``<job dir>/tasks/<point>``.
    """
    if not command or not command.startswith("/"):
        return None
    marker = "/" + jobdir.SCRIPT
    cut = command.find(marker + " ")
    if cut < 0:
        if not command.endswith(marker):
            return None  # not an hpclaunch script
        cut = len(command) - len(marker)
    directory = Path(command[:cut])
    args = command[cut + len(marker) :].split()
    _, _, task = job_id.partition("_")
    if task.isdigit() and args and args[0].isdigit():
        return Path(task_dir(str(directory), int(args[0]) + int(task)))
    return directory


def read_progress(directory: Path | None, attempt_start: float | None) -> JobProgress:
    """Read ``directory``'s ledger and newest commit (missing files: the defaults).

    ``attempt_start``: the start of the current run (squeue ``%S``); a commit before it
    belongs to an earlier attempt and still counts (it is what the job resumes from), but
    the time lost is measured from the later of the two.
    """
    if directory is None:
        return JobProgress()
    try:
        events = read_ledger(directory)
        done = _read_json(directory / jobdir.CONTROL / jobdir.DONE)
    except OSError:
        return JobProgress()
    starts = [e for e in events if e.get("event") == "attempt_start"]
    supervised = bool(starts) and (
        attempt_start is None or float(starts[-1].get("time", 0)) >= attempt_start - 5
    )
    ends = [e for e in events if e.get("event") == "attempt_end"]
    growths = sum(1 for e in ends if _grown(e))
    preemptions = sum(1 for e in ends if e.get("reason") in PREEMPTED_REASONS) - growths
    if done is None:
        done = _last_commit_in(events)
    committed_at = _float(done.get("committed_at")) if done else None
    write = _float(done.get("seconds")) if done else None
    elastic = _elastic(directory, events)
    ranks = elastic.get("ranks_per_node", 1)
    # Each size's newest: the ledger's ended attempts, then the running one's progress file
    # (kept across attempts: its attempt must be the newest started).
    now_running = _read_json(directory / jobdir.CONTROL / jobdir.PROGRESS)
    if now_running and (not starts or now_running.get("attempt") != starts[-1].get("attempt")):
        now_running = None
    speeds = {
        int(e["world_size"]) // ranks: float(e["samples_per_s"])
        for e in [*ends, *([now_running] if now_running else [])]
        if isinstance(e.get("world_size"), int) and isinstance(e.get("samples_per_s"), (int, float))
    }
    return JobProgress(
        served=_served(events),
        supervised=supervised,
        committed_at=committed_at,
        ckpt_write=write if write is not None else DEFAULT_CKPT_WRITE,
        write_measured=write is not None,
        preemptions=preemptions,
        growths=growths,
        directory=str(directory),
        speeds=speeds,
        **elastic,
    )


def _elastic(directory: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The sizes the job's script allows, its min_interval, its time limit and batch
    (``{}``: not elastic, or no script)."""

    try:
        script = (directory / jobdir.SCRIPT).read_text()
        block = elastic_of_script(script)
        if block is None:
            return {}
        limit = _TIME_LINE.search(script)
        ranks = int(block.get("ranks_per_node") or 1)
        batch = str(block.get("batch") or "fixed")
        adaptive = None
        if batch == "adaptive":
            adaptive = Adaptive(
                global_batch=int(block["global_batch"]),
                max_global_batch=int(block["max_global_batch"]),
                max_batch_per_gpu=int(block["max_batch_per_gpu"]),
                max_lr_factor=float(block.get("max_lr_factor", 8.0)),
                measured=tuple(measured_in(events, ranks)),
            )
        return {
            "elastic_nodes": tuple(sorted(int(n) for n in block.get("nodes", ()))),
            "elastic_interval": float(block.get("min_interval", 600)),
            "time_limit": parse_time_limit(limit.group(1)) if limit else None,
            "ranks_per_node": ranks,
            "batch": batch,
            "adaptive": adaptive,
        }
    except (OSError, KeyError, TypeError, ValueError):
        return {}


#: The script's time limit line, as the template writes it (templates/sbatch.sh.j2).
_TIME_LINE = re.compile(r"^#SBATCH --time=['\"]?([^'\"\s]+)", re.MULTILINE)


def _served(events: list[dict[str, Any]]) -> float:
    """Node-seconds of the attempts that ended: each ``attempt_end`` against its
    ``attempt_start`` (the nodes it names)."""
    starts: dict[object, tuple[float, int]] = {}
    total = 0.0
    for event in events:
        kind, attempt = event.get("event"), event.get("attempt")
        when, nodes = _float(event.get("time")), event.get("nodes")
        if kind == "attempt_start" and when is not None and isinstance(nodes, list):
            starts[attempt] = (when, len(nodes))
        elif kind == "attempt_end" and when is not None and attempt in starts:
            began, count = starts.pop(attempt)
            total += max(0.0, when - began) * count
    return total


def _grown(end: dict[str, Any]) -> bool:
    """An attempt that ended to restart larger (the job gained: no preemption)."""
    if end.get("reason") != "resized":
        return False
    before, after = end.get("from_nodes"), end.get("to_nodes")
    return isinstance(before, int) and isinstance(after, int) and after > before


def _last_commit_in(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest commit the ledger records (``seconds`` and, when known, ``committed_at``).

    Without this, a job that has just been requeued looked as if it had never measured a
    write (the default, 30 s) until its first commit in the new attempt, and cost more than
    a plain job preempted after less than 30 s of work (seen on the cluster, 2026-11-24).
    """
    for event in reversed(events):
        kind = event.get("event")
        if kind in ("stale_control_files", "stale_control_file"):
            # one event with every file; before 2026-11-27, one event per file
            files = event.get("files") or {event.get("file"): event.get("content")}
            content = files.get(jobdir.DONE) if isinstance(files, dict) else None
            if isinstance(content, dict) and "seconds" in content:
                return content
        elif kind == "checkpoint_committed" and event.get("seconds") is not None:
            return {"seconds": event.get("seconds"), "committed_at": event.get("time")}
    return None


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return None  # torn by a crash: the atomic writer makes this rare
    return value if isinstance(value, dict) else None


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
