"""The tracker runs a submission makes before its first attempt: MLflow's (a job's run, or
a sweep's parent and a child per task), kept in the job directory's ``tracking.json``
(:mod:`hpclaunch.tracking.mlflow_runs`). W&B and TensorBoard need nothing at submit: the
run id is the submission's, the event files the job's own."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from hpclaunch import jobdir
from hpclaunch.errors import SubmissionError, TransportError
from hpclaunch.ops.context import Context
from hpclaunch.ops.sync import offline_runs
from hpclaunch.planning.plan import SubmissionPlan
from hpclaunch.supervise.tracker_env import point_words
from hpclaunch.transport.local import LocalRunner

__all__ = ["make_tracker_runs", "task_runs", "tracker_lines"]

_INSTALL = "pip install 'hpclaunch[tracking]' (mlflow-skinny) where hpclaunch runs"


def make_tracker_runs(
    ctx: Context,
    plan: SubmissionPlan,
    tasks: Sequence[tuple[str, Mapping[str, Any]]] | None = None,
) -> None:
    """Make the MLflow run(s) of ``plan`` and keep their ids in its job directory, unless
    an earlier try of this submission did (a retry makes no second run). ``tasks``: a
    sweep's tasks, each its run's name and parameters.

    Raises:
        SubmissionError: MLflow is not installed here, its store cannot be reached, or a
            store on the cluster's filesystem is named while hpclaunch runs elsewhere.
    """
    tracking = plan.tracking
    if tracking is None or tracking.mlflow is None:
        return
    path = posixpath.join(plan.job_dir, jobdir.TRACKING_RUNS)
    try:
        ctx.runner.read_file(path)
        return  # made by an earlier try of this submission
    except TransportError:
        pass
    uri = tracking.mlflow.tracking_uri or ""
    if not isinstance(ctx.runner, LocalRunner) and uri.startswith(("file:", "sqlite:")):
        raise SubmissionError(
            f"tracking.mlflow.tracking_uri {uri!r} is a store on the cluster's filesystem, "
            "and hpclaunch runs elsewhere (over SSH): the runs would be made on this machine",
            hint="run hpclaunch on the login node, or name a tracking server (http://...)",
        )
    try:
        from hpclaunch.tracking import mlflow_runs  # noqa: PLC0415 (mlflow: only when tracked)
    except ImportError as exc:
        raise SubmissionError(f"tracking.mlflow: {exc}", hint=_INSTALL) from exc
    tags = {"hpclaunch.submission_id": plan.submission_id, "hpclaunch.site": plan.site_name}
    try:
        kept = mlflow_runs.create_runs(uri, tracking.mlflow.experiment, plan.job_name, tags, tasks)
    except Exception as exc:  # MlflowException, a connection error: the server's words
        raise SubmissionError(
            f"tracking.mlflow: could not make the run in {uri}: {exc}",
            hint="check tracking_uri (and that the server is up); nothing was submitted",
        ) from exc
    ctx.runner.put_file(path, json.dumps({"mlflow": kept}), 0o600)


def task_runs(
    name: str, points: Sequence[Mapping[str, Any]]
) -> list[tuple[str, Mapping[str, Any]]]:
    """Each sweep task's run name and parameters (``name lr=0.01 width=64``; a study's
    trial, whose parameters the study picks when it starts: ``name task 3``)."""
    runs: list[tuple[str, Mapping[str, Any]]] = []
    for index, point in enumerate(points):
        words = point_words(point) or f"task {index}"
        runs.append((f"{name} {words}", point))
    return runs


def tracker_lines(ctx: Context, job_dir: str, target: str) -> list[str]:
    """Where a job's tracker runs are, a line each, from its directory (``hpclaunch report``):
    its MLflow run, its W&B offline runs still to upload, its TensorBoard files. ``target``:
    the job's (or sweep's) id, for the commands named."""
    lines = []
    try:
        kept = json.loads(ctx.runner.read_file(posixpath.join(job_dir, jobdir.TRACKING_RUNS)))
        mlflow = kept["mlflow"]
        runs = mlflow["runs"]
        what = (
            f"run {runs[0]}" if len(runs) == 1 else f"{len(runs)} runs, parent {mlflow['parent']}"
        )
        lines.append(f"MLflow: {what} in {mlflow['tracking_uri']}")
    except (TransportError, ValueError, KeyError, IndexError, TypeError):
        pass
    waiting = offline_runs(ctx, [job_dir])
    if waiting:
        lines.append(
            f"W&B: {len(waiting)} offline run director{'y' if len(waiting) == 1 else 'ies'} "
            f"not uploaded: hpclaunch sync {target}"
        )
    events = posixpath.join(job_dir, jobdir.TENSORBOARD)
    try:
        ctx.runner.listdir(events)
        lines.append(f"TensorBoard: {events} (hpclaunch forward {target} 6006 while it runs)")
    except (FileNotFoundError, TransportError):
        pass
    return lines
