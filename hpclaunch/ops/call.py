"""Submit a Python function as a job, and read what it gave back (``Session.submit(fn)``).

The job is an ordinary spec job: its command is ``python -m hpclaunch.calls`` under the
sidecar (``launcher: srun``, one process), so tiers, quotas, the history, ``status`` and
``logs`` all know it; its call travels as ``<job dir>/call/call.pkl``
(:mod:`hpclaunch.calls.payload`), through the runner, so over SSH too.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from hpclaunch.calls.payload import (
    Outcome,
    dump_call,
    dump_map,
    read_outcome_from,
    star_target,
)
from hpclaunch.errors import CallError, JobFailed, TransportError
from hpclaunch.jobdir import JobDir
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.ops.clean import clean_daily
from hpclaunch.ops.context import Context
from hpclaunch.ops.logs import read_logs
from hpclaunch.ops.submit import PRIVATE_DIR_HINT, submit_spec, untrusted
from hpclaunch.ops.submit_options import SubmitOptions
from hpclaunch.ops.sweep import submit_sweep_spec
from hpclaunch.planning.plan import job_python
from hpclaunch.store.history import find_record
from hpclaunch.supervise.sweep_task import task_dir

if TYPE_CHECKING:
    from hpclaunch.ops.submit import Submitted
    from hpclaunch.ops.sweep import Swept
    from hpclaunch.planning.plan import SubmissionPlan
    from hpclaunch.planning.sweep import SweepPlan
    from hpclaunch.slurm.jobs import JobInfo

__all__ = [
    "SUBMIT_KEYWORDS",
    "bind_call",
    "call_spec",
    "job_options",
    "read_outcome",
    "submit_call",
    "submit_map",
    "task_dir",
    "without_result",
]

#: Spec fields a function's job cannot take: the call decides how it runs.
_NOT_FOR_CALLS = ("command", "script", "args", "sweep", "launcher", "processes_per_node")


def job_options(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` of ``submit(fn, *args, **kwargs)`` split into the job's options (the
    spec's fields: ``resources``, ``tier``, ``name``, ...) and the function's own. With
    ``job={...}`` the job's options are that mapping and every other keyword is the
    function's (the way to pass a function its own ``name`` or ``env``).

    Raises:
        CallError: A field that a function's job cannot take.
    """

    if isinstance(kwargs.get("job"), Mapping):
        options = dict(kwargs["job"])
        rest = {k: v for k, v in kwargs.items() if k != "job"}
    else:
        fields = set(JobSpec.model_fields)
        options = {k: v for k, v in kwargs.items() if k in fields}
        rest = {k: v for k, v in kwargs.items() if k not in fields}
    refused = [k for k in _NOT_FOR_CALLS if k in options]
    if refused:
        raise CallError(
            f"{', '.join(refused)}: a function's job runs the function once, in one process",
            hint="for a command or a multi-process launch submit a spec; to pass an argument "
            f"named {refused[0]!r} to the function, bind it with functools.partial",
        )
    return options, rest


#: ``Session.submit``'s own keywords, with their defaults: a function's parameter of the
#: same name never receives them.
SUBMIT_KEYWORDS = {"submission_id": None, "check": True, "sync": False, "force": False}


def bind_call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    submit_keywords: Mapping[str, Any],
    *,
    explicit: bool = False,
) -> None:
    """Check at submit, not on the node, that ``fn(*args, **kwargs)`` can be called, and
    that no keyword meant for the function was taken as the job's (or submit's) own
    (``explicit``: the job's options came as ``job={...}``, so none was).

    Raises:
        TypeError: The call does not fit the function's signature (an unknown keyword close
            to a spec field: "did you mean resources?"), or a keyword both could take.
    """

    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or extension without a signature: the job will tell
    params = {
        name: p
        for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    name = getattr(fn, "__qualname__", repr(fn))
    both = [] if explicit else sorted(k for k in options if k in params)
    both += sorted(
        k for k, v in submit_keywords.items() if k in params and v != SUBMIT_KEYWORDS.get(k)
    )
    if both:
        first = both[0]
        where = "submit's own keyword" if first in SUBMIT_KEYWORDS else "a field of the job's spec"
        raise TypeError(
            f"{first}= is both {where} and a parameter of {name}(): hpclaunch took it as "
            "the job's, and the function would run with its default. Pass the job's "
            f"options as job={{...}} (every other keyword then goes to {name}), or bind "
            f"the function's {first} with functools.partial"
        )
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        fields = list(JobSpec.model_fields)
        unknown = [k for k in kwargs if k not in params]
        close = {k: difflib.get_close_matches(k, fields, n=1) for k in unknown}
        hints = [f"did you mean {m[0]}= (a job option)?" for k, m in close.items() if m]
        raise TypeError(
            f"{name}() cannot be called so: {exc}" + (f"; {' '.join(hints)}" if hints else "")
        ) from None


def call_spec(
    session: Context, fn: Callable[..., Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The spec of ``fn``'s job: ``options`` and the command that runs the call.

    Raises:
        CallError: More than one node asked for.
    """
    resources = options.get("resources")
    nodes = getattr(resources, "nodes", None)
    if isinstance(resources, Mapping):
        nodes = resources.get("nodes")
    if isinstance(nodes, int) and nodes > 1:  # a wrong count is the spec's to name
        raise CallError(
            f"resources.nodes: {nodes}: a function runs as one process on one node",
            hint="for a multi-node launch submit a spec with launcher torchrun, deepspeed, "
            "accelerate or srun",
        )
    if options.get("venv") or options.get("conda"):
        python = "python"  # the environment the script activates
    else:
        python = job_python(session.site_config, session.home)
    return {
        "name": _name_of(fn),
        **options,
        "command": [python, "-m", "hpclaunch.calls"],
        "launcher": "srun",
        "processes_per_node": 1,
    }


def _name_of(fn: Callable[..., Any]) -> str:
    """A job name from the function's name (``train``, ``Model.fit``; ``lambda``; a
    ``functools.partial``'s function)."""
    while isinstance(fn, functools.partial):
        fn = star_target(fn)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.replace("<locals>.", "")).strip("-.")
    return name or "call"


def submit_call(
    session: Context,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    options: Mapping[str, Any],
    opts: SubmitOptions[SubmissionPlan],
) -> Submitted:
    """Submit ``fn(*args, **kwargs)`` as a job with the spec ``options``
    (:func:`call_spec`), as ``opts`` say; the call is written into its job directory just
    before sbatch (after ``opts.before_submit``, e.g. a ``sync`` upload).

    Raises:
        CallError: The call cannot be pickled, is too large, or the options do not fit.
        SpecError, PlanError, SubmissionError: As for a spec.
    """

    if not callable(fn):
        raise CallError(f"{fn!r} is not callable")
    data = dump_call(fn, args, kwargs)

    def put_call(plan: SubmissionPlan) -> None:
        _put_call(session, plan.job_dir, data, plan.submission_id)

    submitted = submit_spec(session, call_spec(session, fn, options), opts.then(put_call))
    if not opts.dry_run:
        clean_daily(session)
    return submitted


def submit_map(
    session: Context,
    fn: Callable[..., Any],
    items: Sequence[Any],
    options: Mapping[str, Any],
    opts: SubmitOptions[SweepPlan],
    *,
    max_concurrent: int | None = None,
    pack: int = 1,
) -> Swept:
    """Submit ``fn(item)`` for each of ``items`` as one sweep (``i`` over the items'
    indexes): job arrays split at MaxArraySize, each point run once, recorded as any
    sweep (``hpclaunch sweep status`` knows it); the items travel once, in the job
    directory's ``call/call.pkl``, and each task writes ``tasks/<i>/call/result.pkl``.

    Raises:
        CallError: No items, or as :func:`submit_call`.
        SpecError, PlanError, SubmissionError: As for a sweep.
    """

    if not callable(fn):
        raise CallError(f"{fn!r} is not callable")
    if not items:
        raise CallError("map over no items: nothing to submit")
    data = dump_map(fn, items)
    spec = call_spec(session, fn, options)
    spec["command"] = [*spec["command"], "--item", "{i}"]
    sweep: dict[str, Any] = {"method": "grid", "parameters": {"i": list(range(len(items)))}}
    if max_concurrent is not None:
        sweep["max_concurrent"] = max_concurrent
    if pack != 1:
        sweep["pack"] = pack
    spec["sweep"] = sweep

    def put_items(sweep: SweepPlan) -> None:
        _put_call(session, sweep.plan.job_dir, data, sweep.sweep_id)

    swept = submit_sweep_spec(session, spec, opts.then(put_items))
    if not opts.dry_run:
        clean_daily(session)
    return swept


def _put_call(session: Context, job_dir: str, data: bytes, submission_id: str) -> None:
    """Write a call's pickle into the job directory, where Slurm runs (0600), unless it is
    there already: a retry with the same submission id (the same job directory) finds the
    job that its first try submitted, or is about to, and must never change what that job
    runs. The same call is left as it is; another call is refused.

    Raises:
        CallError: The job directory holds another call.
    """
    path = JobDir(job_dir).call
    _refuse_foreign(session, [job_dir, posixpath.dirname(path), path], "write the call into it")
    try:
        earlier = session.runner.read_bytes(path)
    except TransportError:
        earlier = None
    if earlier is None:
        session.runner.put_bytes(path, data, 0o600)
    elif earlier != data:
        record = find_record(submission_id=submission_id)
        earlier_job = (
            f"session.job({record.job_id!r})"
            if record is not None
            else f"session.sweeps.find({submission_id!r})"
        )
        raise CallError(
            f"submission id {submission_id} already names a job of another call (its "
            f"arguments or function differ from {path}): a retry never changes what a "
            "submitted job runs",
            hint=f"give a new submission id (or sweep id) to submit this call; {earlier_job} "
            "takes the earlier one",
        )


def read_outcome(session: Context, job_dir: str) -> Outcome | None:
    """What the function's job wrote back; ``None`` while (or if) there is nothing.

    Raises:
        CallError: The result, or a directory holding it, is not the user's own and
            private: it is not unpickled (a planted ``result.pkl`` would run its code here).
    """
    path = JobDir(job_dir).result

    def load(source: IO[bytes]) -> Outcome:
        # Once it exists (a poll of a running job costs one open), and before a byte of
        # it is unpickled: a planted result.pkl would run its code here.
        _refuse_foreign(session, [job_dir, posixpath.dirname(path), path], "load the result")
        try:
            return read_outcome_from(source)  # the value streamed: never held twice
        except Exception as exc:  # written atomically: only a full disk or a hand cuts it
            raise CallError(
                f"the result {path} is cut short or damaged ({type(exc).__name__}: {exc})",
                hint="the job's log says how its process ended; submit the call again",
            ) from exc

    try:
        return session.runner.read_with(path, load)
    except TransportError:
        return None


def _refuse_foreign(session: Context, paths: Sequence[str], doing: str) -> None:
    """Raise unless each of ``paths`` that exists is the user's own and private.

    Raises:
        CallError: One belongs to another user or others may write it.
    """
    why = untrusted(session, paths)
    if why is not None:
        raise CallError(f"{why}: hpclaunch does not {doing}", hint=PRIVATE_DIR_HINT)


def without_result(session: Context, info: JobInfo, log_dir: str | None) -> JobFailed:
    """The error for a job that ended with no ``result.pkl``: its state, exit code and the
    end of its last attempt's log."""

    tail = ""
    if log_dir is not None:
        lines = [line for _, line in read_logs(session, log_dir, None)]
        tail = "\n".join(lines[-15:])
    hints = {
        "COMPLETED": "the function's process ended without a result: os._exit() in the "
        "function, or a library that exits the process? return a value instead",
        "OUT_OF_MEMORY": "ask for more memory (resources.mem)",
        "TIMEOUT": "ask for more time (resources.time), or checkpoint with hpclaunch.runtime",
        "CANCELLED": "it was cancelled (scancel, hpclaunch cancel, or an administrator)",
    }
    state = info.state.value
    return JobFailed(info.ref.job_id, state, info.exit_code, tail, hint=hints.get(state))
