"""The state of every task of a sweep, with one squeue and at most one sacct for all arrays
(the cli backend; pyslurm: one job-list RPC and at most one accounting query).

squeue (``--array``: one line per task, pending ones too) knows the live tasks; sacct the
ended ones (squeue forgets a job MinJobAge after it ended). A task's final metrics come from
``<job dir>/tasks/<point>/final-metrics.json`` (:func:`hpclaunch.runtime.report_metrics`).

A task that ended ``success`` by its own ledger (``tasks/<point>/events.jsonl``, one grep for
all of them) is COMPLETED whatever Slurm says, with Slurm's state kept beside it: slurmctld
killed within its state-save delay (at most 5 s, state_save.c) forgets the ends it had
just been told, answers them "job_complete: invalid JobId" after its restart, and keeps
those tasks RUNNING until their time limit, then TIMEOUT (measured on 25.11).
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpclaunch import jobdir
from hpclaunch.backends.arrays import some_tasks
from hpclaunch.errors import TransportError
from hpclaunch.store.sweeps import SweepRecord
from hpclaunch.study.config import TRIAL_FILE
from hpclaunch.supervise.ledger import SUCCESS_LINE
from hpclaunch.supervise.sweep_task import format_value, task_dir
from hpclaunch.transport.base import Runner

if TYPE_CHECKING:
    from hpclaunch.backends.base import Backend

__all__ = [
    "NEVER_STARTED_STATES",
    "SweepStatus",
    "TaskStatus",
    "cell_text",
    "sort_tasks",
    "sweep_status",
]


@dataclass(frozen=True)
class TaskStatus:
    """One point of the sweep."""

    point: int
    job_id: str  # <array job id>_<task id>
    state: str
    params: dict[str, Any]
    metrics: dict[str, Any] | None = None
    #: Slurm's state when the task's ledger says it ended ``success`` and Slurm does not.
    slurm_state: str | None = None
    #: Slurm ended the task (``state``) before its batch script started: ``sweep rerun``.
    never_ran: bool = False

    def cells(self, params: Iterable[str], metrics: Iterable[str]) -> list[str]:
        """The task's values of ``params`` then ``metrics`` as a table shows them
        (:func:`cell_text`)."""
        found = self.metrics or {}
        return [cell_text(self.params.get(p)) for p in params] + [
            cell_text(found.get(m)) for m in metrics
        ]


def cell_text(value: Any) -> str:
    """A parameter or metric in a table: ``-`` when missing, floats to 6 significant
    digits, anything else as the task's command got it (:func:`format_value`)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return format_value(value)


@dataclass(frozen=True)
class SweepStatus:
    """A sweep's tasks, and what could not be asked."""

    record: SweepRecord
    tasks: tuple[TaskStatus, ...]
    problems: tuple[str, ...] = ()

    @property
    def parameters(self) -> list[str]:
        """The parameters' names, in the order the tasks first show them."""
        return list(dict.fromkeys(k for t in self.tasks for k in t.params))

    @property
    def metric_names(self) -> list[str]:
        """The final metrics' names, in the order the tasks first report them."""
        return list(dict.fromkeys(k for t in self.tasks for k in t.metrics or {}))

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
            "job_dir": rec.job_dir,
            "log_dir": rec.log_dir,
            "arrays": [
                {"job_id": a.job_id, "offset": a.offset, "count": a.count, "tasks": a.tasks}
                for a in rec.arrays
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
                    "slurm_state": t.slurm_state,
                    "never_ran": t.never_ran,
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


def sweep_status(backend: Backend, record: SweepRecord, *, metrics: bool = True) -> SweepStatus:
    """Ask Slurm for the state of every task (:meth:`Backend.task_states`) and read the
    params file and each ended task's final metrics. A point rerun (``hpclaunch sweep
    rerun``) shows its newest task."""
    problems: list[str] = []
    latest = record.latest_tasks()
    states = backend.task_states(
        list(dict.fromkeys(a.job_id for a in record.arrays)), list(latest.values()), problems
    )
    runner = backend.runner
    params = _read_params(runner, record, problems)
    if params and not any(params.values()):  # an adaptive sweep: each task's trial has them
        params = _read_trials(runner, record, problems)
    if record.pack > 1:
        return _packed_status(runner, record, states, params, problems, metrics=metrics)
    unsure = {job for job, state in states.items() if state not in _SURE}
    succeeded = _succeeded_points(runner, record, problems) if unsure else set()
    failed = {p for p, job in latest.items() if states.get(job) in NEVER_STARTED_STATES}
    started = _started_points(runner, record, problems) if failed - succeeded else set()
    tasks = []
    for point, job_id in sorted(latest.items()):
        state = states.get(job_id, "UNKNOWN")
        slurm_state = None
        if point in succeeded and job_id in unsure:
            state, slurm_state = "COMPLETED", state
        found = _read_metrics(runner, record, point) if metrics and state == "COMPLETED" else None
        never_ran = point in failed and point not in succeeded and point not in started
        tasks.append(
            TaskStatus(point, job_id, state, params.get(point, {}), found, slurm_state, never_ran)
        )
    lost = [t.job_id for t in tasks if t.slurm_state]
    if lost:
        problems.append(
            f"{len(lost)} task(s) ended successfully by their own ledgers but Slurm says "
            f"otherwise ({some_tasks(lost)}): slurmctld lost their ends (a restart?); counted "
            "COMPLETED. Slurm holds their resources until it times them out: 'scancel "
            f"{' '.join(lost)}' frees them now"
        )
    never = [t for t in tasks if t.never_ran]
    if never:
        problems.append(
            f"{len(never)} point(s) never ran: Slurm ended their tasks "
            f"({some_tasks([f'{t.job_id} {t.state}' for t in never])}) before the batch "
            "script started (a slurmctld restart, a node that refused the launch): "
            f"'hpclaunch sweep rerun {record.sweep_id}' runs them again (a point that "
            "completed meanwhile is not run twice)"
        )
    return SweepStatus(record, tuple(tasks), tuple(problems))


def _packed_status(
    runner: Runner,
    record: SweepRecord,
    states: Mapping[str, str],
    params: Mapping[int, dict[str, Any]],
    problems: list[str],
    *,
    metrics: bool,
) -> SweepStatus:
    """A packed sweep's points (``sweep.pack``): a task's Slurm state is its pack's, so
    each point's own comes from its ledger (:func:`point_state`)."""
    ends = _last_events(runner, record, problems)
    tasks = []
    for point, job_id in sorted(record.latest_tasks().items()):
        state, never_ran = point_state(ends.get(point), states.get(job_id, "UNKNOWN"))
        found = _read_metrics(runner, record, point) if metrics and state == "COMPLETED" else None
        tasks.append(
            TaskStatus(point, job_id, state, params.get(point, {}), found, None, never_ran)
        )
    never = [t for t in tasks if t.never_ran]
    if never:
        problems.append(
            f"{len(never)} point(s) never ran: their packed tasks ended first "
            f"({some_tasks([f'{t.job_id} {t.state}' for t in never])}): 'hpclaunch sweep "
            f"rerun {record.sweep_id}' runs those tasks again (they skip completed points)"
        )
    return SweepStatus(record, tuple(tasks), tuple(problems))


#: The states of a task that still runs or may run: its points that have not ended wait.
_LIVE = frozenset({"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "CONFIGURING", "SUSPENDED"})


def point_state(last: Mapping[str, Any] | None, task_state: str) -> tuple[str, bool]:
    """One point of a packed task: its state and whether it never ran, from the last
    ``attempt_start``/``attempt_end`` of its ledger (``last``) and its task's Slurm state.

    An end ``success`` is COMPLETED; an end that requeued the task, or a start without an
    end, follows the task (RUNNING, PENDING, or how Slurm ended it); any other end is
    FAILED (OUT_OF_MEMORY for ``oom``); no ledger yet: PENDING while the task may still
    reach the point, else the task's end, as a point that never ran."""
    if last is not None and last.get("event") == "attempt_end":
        reason = last.get("reason")
        if reason == "success":
            return "COMPLETED", False
        if not last.get("requeued"):
            return ("OUT_OF_MEMORY" if reason == "oom" else "FAILED"), False
        return ("PENDING" if task_state == "RUNNING" else task_state), False
    if last is not None:  # started, not ended
        return task_state, False
    if task_state in _LIVE:
        return "PENDING", False
    return task_state, True


def _last_events(
    runner: Runner, record: SweepRecord, problems: list[str]
) -> dict[int, dict[str, Any]]:
    """Each point's last ``attempt_start`` or ``attempt_end`` (one ``grep`` for all)."""
    out: dict[int, dict[str, Any]] = {}
    pattern = '^\\{"event": "attempt_(start|end)"'
    for point, text in _grep_tasks(runner, record, jobdir.LEDGER, pattern, problems):
        try:
            event = json.loads(text)
        except ValueError:  # a torn line
            continue
        if isinstance(event, dict):
            out[point] = event  # lines in order: the last one stays
    return out


def _grep_tasks(
    runner: Runner, record: SweepRecord, name: str, pattern: str, problems: list[str]
) -> list[tuple[int, str]]:
    """``(point, line)`` for each line matching ``pattern`` (extended regex; empty: every
    line) of the files called ``name`` in ``<job dir>/tasks/<point>/``: one ``grep``."""
    tasks = posixpath.join(record.job_dir, "tasks")
    argv = ["grep", "-rHE", "--include", name, "--", pattern, tasks]
    try:
        found = runner.run(argv, timeout=60)
    except TransportError as exc:
        problems.append(f"{name} of the points: {exc.message.splitlines()[0]}")
        return []
    out = []
    for line in found.stdout.splitlines():  # grep exits 1 when nothing matched yet
        path, _, text = line.partition(f"/{name}:")
        point = posixpath.basename(path)
        if point.isdigit():
            out.append((int(point), text))
    return out


#: Slurm states that need no second opinion: nothing ran yet, or the end Slurm saw.
_SURE = frozenset({"COMPLETED", "PENDING", "UNKNOWN"})
#: Ends of a task that may come before its batch script ever started: a launch that
#: failed (slurmd refused it: "Duplicate jobid" after a slurmctld restart, seen on 25.11
#: in CI), a node that failed or did not boot. A point is rerun only when, besides, it
#: has no attempt log and no ledger (:func:`_started_points`).
NEVER_STARTED_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL"})


def _started_points(runner: Runner, record: SweepRecord, problems: list[str]) -> set[int]:
    """The points whose batch script started at least once: an ``attempt-N.log`` in
    ``<log dir>/tasks/<point>/`` (the script's first act) or a sidecar ledger in
    ``<job dir>/tasks/<point>/``; one ``find`` for all."""
    roots = dict.fromkeys(posixpath.join(d, "tasks") for d in (record.log_dir, record.job_dir))
    names = ["(", "-name", "attempt-*.log", "-o", "-name", jobdir.LEDGER, ")"]
    argv = ["find", *roots, "-mindepth", "2", "-maxdepth", "2", *names]
    try:
        found = runner.run(argv, timeout=60)
    except TransportError as exc:
        problems.append(f"task logs: {exc.message.splitlines()[0]}")
        return set(range(record.points))  # unknown: no point is taken as never run
    points = set()
    for path in found.stdout.splitlines():  # find exits 1 for a missing root: none there
        name = posixpath.basename(posixpath.dirname(path))
        if name.isdigit():
            points.add(int(name))
    return points


def _succeeded_points(runner: Runner, record: SweepRecord, problems: list[str]) -> set[int]:
    """The points whose task ledger has an attempt that ended ``success``."""
    tasks = posixpath.join(record.job_dir, "tasks")
    argv = ["grep", "-rlE", "--include", jobdir.LEDGER, "--", SUCCESS_LINE, tasks]
    try:
        found = runner.run(argv, timeout=60)
    except TransportError as exc:
        problems.append(f"task ledgers: {exc.message.splitlines()[0]}")
        return set()
    points = set()
    for path in found.stdout.splitlines():  # grep exits 1 when nothing matched: no points
        name = posixpath.basename(posixpath.dirname(path))
        if name.isdigit():
            points.add(int(name))
    return points


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
    path = posixpath.join(task_dir(record.job_dir, point), jobdir.FINAL_METRICS)
    try:
        data = json.loads(runner.read_file(path))
    except (TransportError, ValueError):
        return None
    found = data.get("metrics") if isinstance(data, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def _read_trials(
    runner: Runner, record: SweepRecord, problems: list[str]
) -> dict[int, dict[str, Any]]:
    """An adaptive sweep's parameters: each started task's trial (``tasks/<point>/
    trial.json``), one ``grep`` for all."""
    out: dict[int, dict[str, Any]] = {}
    for point, text in _grep_tasks(runner, record, TRIAL_FILE, "", problems):
        try:
            data = json.loads(text)
            out[point] = {"trial": int(data["number"]), **dict(data["params"])}
        except (ValueError, KeyError, TypeError):
            continue
    return out
