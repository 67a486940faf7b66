"""Pipelines: several jobs in one file, each started only when the ones it names have ended.

A multi-job file has ``jobs:`` (a list of job specs, each with a unique ``name``) and
optional ``defaults:`` (spec fields merged under every job; mappings such as ``resources``
or ``env`` are merged key by key, the job's own values win)::

    defaults: {project: research, resources: {mem: 500M, time: "00:10:00"}}
    jobs:
      - name: train
        command: [python, train.py]
      - name: evaluate
        command: [python, eval.py]
        after: [train]                          # = {job: train, when: ok}
      - name: report
        command: [python, report.py]
        after: [{job: evaluate, when: any}]     # ok | any | notok

``after`` names other jobs of the same file; ``when`` is ``ok`` (the job completed, exit 0:
Slurm's ``afterok``), ``notok`` (it ended any other way: ``afternotok``) or ``any``
(``afterany``). The jobs are submitted in dependency order (file order among independent
ones), each with ``--dependency`` built from the job ids just returned and
``--kill-on-invalid-dep=yes``: when a dependency can never hold (train FAILED, eval waits
``ok``), Slurm 22.05 cancels the waiting job (state CANCELLED, squeue reason
``DependencyNeverSatisfied``, sacct reason ``Dependency``; checked on the test cluster), and
the jobs after it in turn, instead of leaving them pending forever.

Every step gets its own submission id, ``<pipeline id>-<name>`` (:func:`step_submission_ids`),
so a retry with the same ``submit --submission-id`` submits only what is missing. Each
step's record in :mod:`hpclaunch.store.history` keeps the ``--dependency`` it was submitted with;
:func:`explain_dependency_wait` turns that and its dependencies' states into words for ``status``.
"""

from __future__ import annotations

import difflib
import graphlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.jobspec.sweep import Sweep
from hpclaunch.slurm.jobs import JobState

if TYPE_CHECKING:
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.slurm.jobs import JobInfo

__all__ = [
    "After",
    "Pipeline",
    "PipelineJob",
    "Step",
    "explain_dependency_wait",
    "is_pipeline_file",
    "load_pipeline",
    "parse_dependency",
    "parse_pipeline",
    "step_submission_ids",
    "with_dependencies",
]

When = Literal["ok", "any", "notok"]
#: ``after``'s ``when`` → sbatch's dependency type (sbatch(1) --dependency, Slurm 22.05).
SLURM_TYPE: Mapping[str, str] = {"ok": "afterok", "any": "afterany", "notok": "afternotok"}
#: Spec fields that ``defaults:`` may not set: each job has its own.
_NOT_DEFAULTS = ("name", "after", "sweep")
_SUBMISSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Longest ``--submission-id`` of a pipeline: room is left for ``-<step name>``.
MAX_BASE_ID = 48


class After(BaseModel):
    """One job this one waits for: ``{job: train, when: ok}`` (or just ``train``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    job: str = Field(min_length=1, description="The name of another job in the file.")
    when: When = Field("ok", description="ok (afterok), any (afterany), notok (afternotok).")


_AFTER_ITEM = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {
                "job": {"type": "string", "minLength": 1},
                "when": {"enum": list(SLURM_TYPE), "default": "ok"},
            },
            "required": ["job"],
            "additionalProperties": False,
        },
    ]
}
# Written out: the model takes a bare name (or one entry without a list) as well.
_AFTER_SCHEMA = WithJsonSchema({"anyOf": [{"type": "array", "items": _AFTER_ITEM}, _AFTER_ITEM]})


class PipelineJob(JobSpec):
    """A job of a multi-job file: a :class:`~hpclaunch.jobspec.job.JobSpec` plus ``after``."""

    after: Annotated[tuple[After, ...], _AFTER_SCHEMA] = Field(
        (),
        description="Jobs of this file that must end first: [train] or "
        "[{job: train, when: ok|any|notok}].",
        examples=[["train"], [{"job": "train", "when": "any"}]],
    )

    @field_validator("after", mode="before")
    @classmethod
    def _one_name(cls, value: Any) -> Any:
        # A bare name stands for {job: name}; one entry may be given without a list.
        items = [value] if isinstance(value, (str, dict)) else value
        if not isinstance(items, list):
            return items
        return [{"job": item} if isinstance(item, str) else item for item in items]

    @field_validator("sweep")
    @classmethod
    def _no_sweep(cls, value: Sweep | None) -> Sweep | None:
        if value is not None:
            raise ValueError("a job of a multi-job file cannot be a sweep; use hpclaunch sweep")
        return value


class Pipeline(BaseModel):
    """A multi-job file (after :func:`parse_pipeline` merged ``defaults`` into each job)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    defaults: dict[str, Any] = Field(
        default_factory=dict, description="Spec fields merged under every job."
    )
    jobs: tuple[PipelineJob, ...] = Field(description="The jobs (specs), at least one.")


@dataclass(frozen=True)
class Step:
    """One job of a pipeline, in submission order.

    Attributes:
        name: The job's name (unique in the file).
        spec: Its spec (``after`` included; it is a :class:`JobSpec`).
        after: ``(name, sbatch dependency type)`` of each job it waits for.
    """

    name: str
    spec: PipelineJob
    after: tuple[tuple[str, str], ...]


def is_pipeline_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a multi-job file (a mapping with ``jobs:``).

    Any failure to read it says ``False``: loading it as a single spec then reports it.
    """
    from hpclaunch._validation import read_yaml_mapping  # noqa: PLC0415 (yaml)

    try:
        data = read_yaml_mapping(Path(path), SpecError, "job spec")
    except SpecError:
        return False
    return "jobs" in data


def load_pipeline(path: str | Path) -> tuple[Step, ...]:
    """Read a multi-job file and return its jobs in submission order.

    Raises:
        SpecError: The file is missing or not YAML, a job's spec is wrong (``jobs[1].
            resources.mem``), or ``after`` names an unknown job, the job itself, or jobs
            that wait for each other; names repeat. The message names the file and field.
    """
    from hpclaunch._validation import read_yaml_mapping  # noqa: PLC0415 (yaml)

    path = Path(path)
    return parse_pipeline(read_yaml_mapping(path, SpecError, "multi-job"), source=str(path))


def parse_pipeline(data: Mapping[str, Any], *, source: str) -> tuple[Step, ...]:
    """Validate a multi-job file's content (see :func:`load_pipeline`)."""
    from hpclaunch._validation import load_model  # noqa: PLC0415 (yaml)

    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SpecError(
            f"{source}: defaults: expected a mapping of spec fields, got {type(defaults).__name__}",
            hint="e.g. defaults: {project: research, resources: {time: '00:10:00'}}",
        )
    _check_defaults(defaults, source)
    jobs = data.get("jobs")
    merged = dict(data)
    if isinstance(jobs, list):
        merged["jobs"] = [_merge(defaults, job) if isinstance(job, dict) else job for job in jobs]
    pipeline = load_model(Pipeline, merged, source=source, error_cls=SpecError)
    return _order(pipeline.jobs, source)


def _check_defaults(defaults: Mapping[str, Any], source: str) -> None:
    valid = [f for f in JobSpec.model_fields if f not in _NOT_DEFAULTS]
    for key in defaults:
        if key in _NOT_DEFAULTS:
            raise SpecError(
                f"{source}: defaults.{key}: each job sets its own {key}",
                hint=f"move {key} into the jobs that need it",
            )
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(
                f"{source}: defaults.{key}: unknown key {key!r}{guess}; "
                f"valid keys: {', '.join(valid)}",
                hint=f"rename or remove {key!r}",
            )


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; mappings merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(below, dict) and isinstance(value, dict):
            out[key] = _merge(below, value)
        else:
            out[key] = value
    return out


def _order(jobs: Sequence[PipelineJob], source: str) -> tuple[Step, ...]:
    """Check names and ``after``; return the jobs in dependency order (stable)."""
    if not jobs:
        raise SpecError(
            f"{source}: jobs: the list is empty",
            hint="jobs: [{name: train, command: [...]}, {name: eval, ..., after: [train]}]",
        )
    index: dict[str, int] = {}
    for i, job in enumerate(jobs):
        if job.name in index:
            raise SpecError(
                f"{source}: jobs[{i}].name: {job.name!r} is also the name of "
                f"jobs[{index[job.name]}]; names in a multi-job file must be unique",
                hint="after: refers to jobs by name: rename one of them",
            )
        index[job.name] = i
    for i, job in enumerate(jobs):
        seen: set[str] = set()
        for k, dep in enumerate(job.after):
            where = f"{source}: jobs[{i}].after[{k}]"
            if dep.job == job.name:
                raise SpecError(
                    f"{where}: job {job.name!r} waits for itself",
                    hint="after: names the other jobs that must end first",
                )
            if dep.job not in index:
                close = difflib.get_close_matches(dep.job, list(index), n=1)
                guess = f" (did you mean {close[0]!r}?)" if close else ""
                raise SpecError(
                    f"{where}: no job named {dep.job!r} in this file{guess}; "
                    f"its jobs: {', '.join(index)}",
                    hint="after: names jobs of the same file; to wait for a job submitted "
                    "earlier, use dependencies: [{job: '<job id>', type: afterok}]",
                )
            if dep.job in seen:
                raise SpecError(f"{where}: {dep.job!r} is named twice")
            seen.add(dep.job)
    placed = _in_dependency_order(jobs, index, source)
    return tuple(
        Step(
            name=jobs[i].name,
            spec=jobs[i],
            after=tuple((d.job, SLURM_TYPE[d.when]) for d in jobs[i].after),
        )
        for i in placed
    )


def _in_dependency_order(
    jobs: Sequence[PipelineJob], index: Mapping[str, int], source: str
) -> list[int]:
    """The jobs' indices, each after those it waits for; among the jobs free to go, the
    first in the file goes first (so a file already in order keeps its order)."""
    graph = graphlib.TopologicalSorter({job.name: [d.job for d in job.after] for job in jobs})
    try:
        graph.prepare()
    except graphlib.CycleError as exc:
        # exc.args[1]: each name is waited for by the next, the first repeated at the end;
        # reversed, each waits for the next, as after: says it.
        cycle = list(reversed(exc.args[1]))
        raise SpecError(
            f"{source}: jobs: {' → '.join(cycle)} wait for each other (a cycle in after:), "
            "so none of them could ever start",
            hint="remove one of these after: entries",
        ) from None
    ready: set[int] = set()
    placed: list[int] = []
    while graph.is_active():
        ready.update(index[name] for name in graph.get_ready())
        first = min(ready)
        ready.remove(first)
        placed.append(first)
        graph.done(jobs[first].name)
    return placed


def step_submission_ids(base: str, names: Sequence[str]) -> dict[str, str]:
    """Each step's submission id, ``<base>-<name>`` (name reduced to letters, digits, ``_``
    and ``-``, cut to fit 64 characters; a clash gets the step's position as well).

    Raises:
        SpecError: ``base`` is not a valid submission id or too long to share.
    """
    if not _SUBMISSION_ID.match(base) or len(base) > MAX_BASE_ID:
        raise SpecError(
            f"invalid submission id {base!r} for a multi-job file",
            hint=f"letters, digits, _ and -, at most {MAX_BASE_ID} characters: each job's "
            "own id is <id>-<job name>",
        )
    room = 64 - len(base) - 1
    slugs = [re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:room] or "job" for name in names]
    ids: dict[str, str] = {}
    for i, (name, slug) in enumerate(zip(names, slugs, strict=True)):
        if slugs.count(slug) > 1:
            slug = f"{i}-{slug}"[:room]
        ids[name] = f"{base}-{slug}"
    return ids


def with_dependencies(
    plan: SubmissionPlan, waits: Sequence[tuple[str, str, str]]
) -> SubmissionPlan:
    """``plan`` that waits for ``waits`` (``(name, sbatch type, job id)`` each).

    The ids join the spec's own ``dependencies`` in one ``--dependency`` (every entry must
    hold), followed by ``--kill-on-invalid-dep=yes``: Slurm cancels the job when one can
    never hold instead of leaving it PENDING (reason DependencyNeverSatisfied) for ever.
    """
    if not waits:
        return plan
    by_type: dict[str, list[str]] = {}
    for kind, job_id in parse_dependency(_option(plan, "--dependency") or ""):
        by_type.setdefault(kind, []).append(job_id)
    for _, kind, job_id in waits:
        by_type.setdefault(kind, []).append(job_id)
    value = ",".join(f"{kind}:{':'.join(ids)}" for kind, ids in by_type.items())
    opts = [(f, v) for f, v in plan.sbatch_options if f != "--dependency"]
    opts.append(("--dependency", value))
    if not any(f == "--kill-on-invalid-dep" for f, _ in opts):
        opts.append(("--kill-on-invalid-dep", "yes"))
    waits_text = ", ".join(f"{name} ({kind})" for name, kind, _ in waits)
    notes = [n for n in plan.notes if not n.startswith("--dependency=")]
    notes.append(
        f"--dependency={value}: starts after {waits_text}; --kill-on-invalid-dep=yes: Slurm "
        "cancels it (reason DependencyNeverSatisfied) if one can never hold"
    )
    return replace(plan, sbatch_options=tuple(opts), notes=tuple(notes))


def _option(plan: SubmissionPlan, flag: str) -> str | None:
    return next((v for f, v in plan.sbatch_options if f == flag), None)


def parse_dependency(value: str) -> list[tuple[str, str]]:
    """``afterok:1:2,afterany:3`` → ``[("afterok", "1"), ("afterok", "2"), ("afterany", "3")]``.

    Entries without job ids (``singleton``) and ``?``-joined ones (any of) are skipped.
    """
    if "?" in value:
        return []
    out: list[tuple[str, str]] = []
    for item in value.split(","):
        kind, *ids = item.strip().split(":")
        out += [(kind, job_id.split("+")[0]) for job_id in ids if job_id]
    return out


def explain_dependency_wait(
    info: JobInfo,
    dependency: str,
    states: Mapping[str, JobInfo],
    names: Mapping[str, str],
) -> str | None:
    """Why a job that waits for others has not run, in words; ``None``: nothing to add.

    Args:
        info: The job's state.
        dependency: The ``--dependency`` it was submitted with (from the history).
        states: The states of its dependencies, by job id (those unknown are skipped).
        names: Job names by id (from the history), for the message.

    Returns:
        ``never ran: train (job 123) FAILED, exit code 1`` for a job Slurm cancelled (or
        left pending) because a dependency can never hold; ``waits for: train (job 123)
        RUNNING`` while it waits; else ``None``.
    """

    deps = [(kind, job_id, states.get(job_id)) for kind, job_id in parse_dependency(dependency)]
    if info.state is JobState.CANCELLED and _never_started(info):
        prefix = "never ran"
    elif info.state is JobState.PENDING and info.reason in ("Dependency", _NEVER):
        prefix = "never runs" if info.reason == _NEVER else "waits for"
    else:
        return None
    if prefix == "waits for":
        waiting = [(i, d) for _, i, d in deps if d is not None and not d.state.is_finished]
        shown = [_describe(i, d, names) for i, d in waiting]
    else:
        shown = [_describe(i, d, names) for k, i, d in deps if d is not None and _broken(k, d)]
    return f"{prefix}: {'; '.join(shown)}" if shown else None


_NEVER = "DependencyNeverSatisfied"


def _broken(kind: str, dep: JobInfo) -> bool:
    """Whether a dependency of type ``kind`` on ``dep`` can never hold any more."""
    if not dep.state.is_finished:
        return False
    if kind == "afterok":
        return not dep.state.is_success
    if kind == "afternotok":
        return dep.state.is_success
    return False


def _never_started(info: JobInfo) -> bool:
    # A job cancelled while pending: sacct (22.05) sets Start = End and Elapsed 00:00:00,
    # NodeList "None assigned"; squeue shows 0:00 and no nodes.
    return info.elapsed in (None, "0:00", "00:00:00") and info.nodes in (None, "None assigned")


def _describe(job_id: str, dep: JobInfo, names: Mapping[str, str]) -> str:
    name = names.get(job_id) or dep.name
    who = f"{name} (job {job_id})" if name else f"job {job_id}"
    text = f"{who} {dep.state.value}"
    if dep.state.is_finished and not dep.state.is_success:
        if dep.state.value == "CANCELLED" and _never_started(dep):
            text += " (never ran)"
        elif dep.exit_code:
            text += f", exit code {dep.exit_code}"
    return text
