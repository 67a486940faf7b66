"""Resizing a running job at a requeue: ``scontrol requeuehold``, ``update NumNodes``,
``release``.

Slurm cannot grow a running job (unsupported since 19.05), and a shrink of a running one
kills the steps on the released nodes. A job that is held at its requeue can be given
another node count: the update is taken while the job is still ``COMPLETING`` (seen on
25.11: ``Reason=job_requeued_in_held_state``; Slurm scales ``NumTasks`` and the per-node
GRES with it), and after the release the next attempt starts at the new size.

The sidecar runs the three commands right after the trainer's checkpoint. The requeue
SIGTERMs every process of the job, the commands that follow it too, so they run in a shell
that ignores SIGTERM (an ignored signal stays ignored across ``exec``): only the SIGKILL
KillWait seconds later could stop them, and they take well under a second.
"""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpclaunch import _fs, jobdir
from hpclaunch.errors import CommandTimeout, ProgramNotFound, TransportError
from hpclaunch.slurm.live_job import parse_show_job, show_job_argv
from hpclaunch.slurm.nodecount import node_count_fields
from hpclaunch.transport.base import Runner

__all__ = [
    "ResizeOutcome",
    "elastic_interval",
    "elastic_of_script",
    "elastic_sizes",
    "read_request",
    "request_data",
    "resize_at_requeue",
    "write_request",
]


# $1 scontrol, $2 job, then the update's fields. A failed hold stops there: the job runs
# on, unchanged.
_SCRIPT = (
    "trap '' TERM\n"
    "s=$1; j=$2; shift 2\n"
    '"$s" requeuehold "$j" || { echo "requeuehold $?"; exit 0; }\n'
    'echo "requeuehold 0"\n'
    '"$s" update JobId="$j" "$@"; echo "update $?"\n'
    '"$s" release "$j"; echo "release $?"\n'
)


@dataclass(frozen=True)
class ResizeOutcome:
    """What the three commands did.

    Attributes:
        held: ``requeuehold`` worked: this attempt is over.
        resized: ``update NumNodes`` worked.
        released: ``release`` worked: the job will start again.
        why: The commands' own words when one failed.
        codes: Each command's exit code.
    """

    held: bool
    resized: bool
    released: bool
    why: str | None = None
    codes: dict[str, int] = field(default_factory=dict)


def resize_at_requeue(
    runner: Runner, target: str, nodes: int, *, timeout: float = 20
) -> ResizeOutcome:
    """Requeue ``target`` held, give it ``nodes`` nodes (and the tasks and CPUs that go
    with them: :func:`~hpclaunch.slurm.nodecount.node_count_fields`), release it. Never
    raises."""

    scontrol = runner.resolve(["scontrol"])[0]
    try:
        shown = runner.run(show_job_argv(target), timeout=timeout).stdout
        fields = node_count_fields(parse_show_job(shown), nodes)
        update = [f"{name}={value}" for name, value in fields.items()]
        argv = ["sh", "-c", _SCRIPT, "hpclaunch-resize", scontrol, target, *update]
        result = runner.run(argv, timeout=timeout)
    except (ProgramNotFound, CommandTimeout, TransportError) as exc:
        return ResizeOutcome(False, False, False, why=exc.message)
    codes: dict[str, int] = {}
    for line in result.stdout.splitlines():
        name, _, code = line.partition(" ")
        if name in ("requeuehold", "update", "release") and code.isdigit():
            codes[name] = int(code)
    ok = {name: codes.get(name) == 0 for name in ("requeuehold", "update", "release")}
    why = None if all(ok.values()) else (result.stderr.strip() or f"exit codes {codes}")
    return ResizeOutcome(ok["requeuehold"], ok["update"], ok["release"], why, codes)


def read_request(control: Path) -> dict[str, Any] | None:
    """The pending resize request, taken (removed); ``None`` when there is none."""
    path = control / jobdir.RESIZE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    path.unlink(missing_ok=True)
    try:
        data = json.loads(text)
    except ValueError:
        return {"invalid": text[:200]}
    return data if isinstance(data, dict) else {"invalid": text[:200]}


def elastic_sizes(env: Mapping[str, str]) -> tuple[int, ...]:
    """The node counts the job may run at (``HPCLAUNCH_ELASTIC``); ``()``: not elastic."""
    try:
        return tuple(int(n) for n in _elastic_env(env).get("nodes", ()))
    except (ValueError, TypeError):
        return ()


def elastic_interval(env: Mapping[str, str]) -> int:
    """The job's ``elastic.min_interval`` (``HPCLAUNCH_ELASTIC``), 600 s when unreadable."""
    try:
        return int(_elastic_env(env).get("min_interval", 600))
    except (ValueError, TypeError):
        return 600


def _elastic_env(env: Mapping[str, str]) -> dict[str, Any]:
    """``HPCLAUNCH_ELASTIC`` as a dict (``{}``: unset or unreadable)."""
    try:
        block = json.loads(env.get("HPCLAUNCH_ELASTIC") or "{}")
    except ValueError:
        return {}
    return block if isinstance(block, dict) else {}


_ELASTIC_LINE = re.compile(r"^export HPCLAUNCH_ELASTIC=(.+)$", re.MULTILINE)


def elastic_of_script(script: str) -> dict[str, Any] | None:
    """The ``elastic:`` block a batch script exports (``HPCLAUNCH_ELASTIC``, shell-quoted
    JSON); ``None``: not an elastic job's script."""
    match = _ELASTIC_LINE.search(script)
    if match is None:
        return None
    try:
        words = shlex.split(match.group(1))
        block = json.loads(words[0]) if words else None
    except ValueError:
        return None
    return block if isinstance(block, dict) else None


def request_data(nodes: int, *, why: str, by: str, force: bool) -> dict[str, Any]:
    """A request for ``nodes`` nodes, made now; its ``request_id`` comes back in the
    ledger's ``resize_requested``, so that the asker reads its own answer, not an older one."""
    return {
        "nodes": nodes,
        "why": why,
        "by": by,
        "force": force,
        "requested_at": time.time(),
        "request_id": uuid.uuid4().hex,
    }


def write_request(control: Path, nodes: int, *, why: str, by: str, force: bool) -> None:
    """Ask the sidecar of the job whose control directory is ``control`` for ``nodes``
    nodes (where the job directory is on this machine's filesystem: the arbiter's case)."""

    _fs.write_json_atomic(control / jobdir.RESIZE, request_data(nodes, why=why, by=by, force=force))
