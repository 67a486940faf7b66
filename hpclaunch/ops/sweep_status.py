"""The state of every task of a sweep, with one squeue and at most one sacct for all arrays
(the cli backend; pyslurm: one job-list RPC and at most one accounting query).

squeue (``--array``: one line per task, pending ones too) knows the live tasks; sacct the
ended ones (squeue forgets a job MinJobAge after it ended). A task's final metrics come from
``<job dir>/tasks/<point>/final-metrics.json`` (:func:`hpclaunch.runtime.report_metrics`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch.errors import TransportError
from hpclaunch.slurm.task_ids import task_ids
from hpclaunch.store.sweeps import SweepRecord
from hpclaunch.supervise.sweep_task import METRICS_NAME
from hpclaunch.transport.base import Runner

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend

__all__ = [
    "SweepStatus",
    "TaskStatus",
    "ask_task_states",
    "parse_task_states",
    "sort_tasks",
    "sweep_status",
]

_TASK = re.compile(r"^(\d+)_(\d+)$")
# A pending array in sacct: "123_[0-4,7%2]" (22.05 prints the not yet started tasks so).
_FOLDED = re.compile(r"^(\d+)_\[([0-9,\-]+)(?:%\d+)?\]$")


@dataclass(frozen=True)
class TaskStatus:
    """One point of the sweep."""

    point: int
    job_id: str  # <array job id>_<task id>
    state: str
    params: dict[str, Any]
    metrics: dict[str, Any] | None = None


@dataclass(frozen=True)
class SweepStatus:
    """A sweep's tasks, and what could not be asked."""

    record: SweepRecord
    tasks: tuple[TaskStatus, ...]
    problems: tuple[str, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Tasks per state, most frequent first."""
        return dict(Counter(t.state for t in self.tasks).most_common())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``sweep status --json``)."""
        rec = self.record
        return {
            "sweep_id": rec.sweep_id,
            "name": rec.name,
            "points": rec.points,
            "arrays": [
                {"job_id": a.job_id, "offset": a.offset, "count": a.count} for a in rec.arrays
            ],
            "counts": self.counts,
            "problems": list(self.problems),
            "tasks": [
                {
                    "point": t.point,
                    "job_id": t.job_id,
                    "state": t.state,
                    "params": t.params,
                    "metrics": t.metrics,
                }
                for t in self.tasks
            ],
        }


def sort_tasks(
    tasks: Iterable[TaskStatus], metric: str, *, descending: bool = False
) -> list[TaskStatus]:
    """Tasks by a final metric (or a parameter) of that name, best first for ``loss``-like
    order (ascending; ``descending`` for accuracy-like); tasks without it go last.

    Raises:
        KeyError: No task has a metric or parameter called ``metric`` (with the known names).
    """
    tasks = list(tasks)
    known = {k for t in tasks for k in (t.metrics or {})} | {k for t in tasks for k in t.params}
    if metric not in known:
        raise KeyError(", ".join(sorted(known)) or "none")

    def value(task: TaskStatus) -> Any:
        return (task.metrics or {}).get(metric, task.params.get(metric))

    numbers = [t for t in tasks if isinstance(value(t), (int, float))]
    rest = [t for t in tasks if not isinstance(value(t), (int, float))]
    return sorted(numbers, key=value, reverse=descending) + rest


def parse_task_states(text: str) -> dict[str, str]:
    """``<id>|<state>`` lines (squeue or sacct) → task id (``123_4``) → state.

    Folded pending ranges (``123_[0-4%2]``) are expanded; sacct's ``CANCELLED by 0`` is
    ``CANCELLED``; other lines (a whole array's ``123``, steps) are skipped.
    """
    states: dict[str, str] = {}
    for line in text.splitlines():
        job, _, state = line.strip().partition("|")
        state = state.split(" ")[0].strip().upper()
        if not state:
            continue
        if _TASK.match(job):
            states[job] = state
            continue
        folded = _FOLDED.match(job)
        if folded:
            for task in task_ids(folded.group(2)):
                states[f"{folded.group(1)}_{task}"] = state
    return states


def sweep_status(backend: Backend, record: SweepRecord, *, metrics: bool = True) -> SweepStatus:
    """Ask Slurm for the state of every task (:meth:`Backend.task_states`) and read the
    params file and each ended task's final metrics."""
    problems: list[str] = []
    wanted = [f"{a.job_id}_{t}" for a in record.arrays for t in range(a.count)]
    states = backend.task_states([a.job_id for a in record.arrays], wanted, problems)
    runner = backend.runner
    params = _read_params(runner, record, problems)
    tasks = []
    for array in record.arrays:
        for task in range(array.count):
            point = array.offset + task
            job_id = f"{array.job_id}_{task}"
            state = states.get(job_id, "UNKNOWN")
            found = (
                _read_metrics(runner, record, point) if metrics and state == "COMPLETED" else None
            )
            tasks.append(TaskStatus(point, job_id, state, params.get(point, {}), found))
    return SweepStatus(record, tuple(tasks), tuple(problems))


def ask_task_states(
    runner: Runner, array_ids: list[str], wanted: list[str], problems: list[str]
) -> dict[str, str]:
    """Task id (``123_4``) → state: one squeue (``--array``), and one sacct when squeue
    does not know every task of ``wanted``; what failed is added to ``problems``."""
    ids = ",".join(array_ids)
    states = _ask(
        runner,
        ["squeue", "--noheader", "--array", f"--jobs={ids}", "--states=all", "--format=%i|%T"],
        problems,
    )
    if not set(wanted) <= states.keys():
        accounted = _ask(
            runner,
            [
                "sacct",
                "--noheader",
                "--parsable2",
                "--allocations",
                f"--jobs={ids}",
                "--format=JobID,State",
            ],
            problems,
        )
        states = {**accounted, **states}  # squeue's view of live tasks is the newer one
    return states


def _ask(runner: Runner, argv: list[str], problems: list[str]) -> dict[str, str]:
    try:
        result = runner.run(argv, timeout=60)
    except TransportError as exc:
        problems.append(f"{argv[0]}: {exc.message.splitlines()[0]}")
        return {}
    if not result.ok:
        # squeue exits 1 when none of the ids is known any more (MinJobAge): not a problem.
        if "Invalid job id" not in result.stderr:
            problems.append(f"{argv[0]} failed: {(result.stderr or result.stdout).strip()[:200]}")
        return {}
    return parse_task_states(result.stdout)


def _read_params(
    runner: Runner, record: SweepRecord, problems: list[str]
) -> dict[int, dict[str, Any]]:
    try:
        text = runner.read_file(record.params_file)
    except TransportError as exc:
        problems.append(f"params file: {exc.message.splitlines()[0]}")
        return {}
    out: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            data = json.loads(line)
            out[int(data["index"])] = dict(data["params"])
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _read_metrics(runner: Runner, record: SweepRecord, point: int) -> dict[str, Any] | None:
    path = posixpath.join(record.job_dir, "tasks", str(point), METRICS_NAME)
    try:
        data = json.loads(runner.read_file(path))
    except (TransportError, ValueError):
        return None
    found = data.get("metrics") if isinstance(data, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None
