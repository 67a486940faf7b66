"""One task of a sweep, inside the job: find its point, give it its own directory, exec.

The batch script of a sweep execs::

    <python> -m hpclaunch.supervise.sweep_task --params <job dir>/sweep-params.jsonl \
        --keep N -- ARGV...

with ``HPCLAUNCH_SWEEP_INDEX`` = the array's offset (the script's first argument) +
``SLURM_ARRAY_TASK_ID``. This step:

1. reads line ``HPCLAUNCH_SWEEP_INDEX`` of the params file (the point);
2. points the runtime at ``<job dir>/tasks/<index>/`` (``HPCLAUNCH_JOB_DIR``, so the control
   files, the sidecar's ledger and ``final-metrics.json`` are the task's own; the checkpoint
   directory ``tasks/<index>/checkpoints``, or ``<checkpoint.dir>/tasks/<index>`` when the spec
   names one; ``HPCLAUNCH_LOG_DIR`` ``<log dir>/tasks/<index>``), exports the point as JSON in
   ``HPCLAUNCH_SWEEP_PARAMS`` (:func:`hpclaunch.runtime.sweep_params`) and gives each task its
   own W&B run id unless the spec set one;
3. runs each point once: it holds an exclusive lock on ``tasks/<index>/.running`` for as
   long as the task runs (the file descriptor passes through the exec), so a second copy
   of the point waits for the first; and a point whose sidecar ledger says an attempt
   ended ``success`` is not run again. Both happen when slurmctld, killed, forgets the
   tasks it started in its last seconds (it saves its state at most every 5 s) and starts
   them again while, or after, the first copies run (measured on 25.11);
4. replaces ``{name}`` in ARGV (after its first ``N`` words, the launcher prefix) with the
   point's values, each word staying one argv word (no shell), and execs it.

An adaptive sweep's task (``--study <job dir>/study.json``) has an empty point: after step
3 it asks the study for its trial (:func:`take_study_trial`; the same trial again after a
requeue, kept in ``tasks/<index>/trial.json``), takes the trial's parameters as its point,
and exports ``HPCLAUNCH_STUDY`` and ``HPCLAUNCH_TRIAL`` for the trainer and the sidecar.

It imports only the standard library and :mod:`hpclaunch.jobdir` (which imports nothing): it
runs before every task. An adaptive sweep's task imports Optuna too.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import json
import os
import posixpath
import re
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from hpclaunch import jobdir
from hpclaunch.supervise.tracker_env import task_tracker_env

__all__ = [
    "completed_at",
    "format_value",
    "hold_point",
    "main",
    "placeholders",
    "points_of",
    "read_point",
    "substitute",
    "task_dir",
    "task_env",
]

#: ``{name}``: the point's value; ``{{name}}``: a literal ``{name}`` (group 1).
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TaskError(Exception):
    """The task cannot start (a broken params file, a missing index)."""


def format_value(value: Any) -> str:
    """A parameter value as an argv word: text as is, ``true``/``false``, numbers as
    Python prints them (``0.001``, ``1e-05``, ``64``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value)


def placeholders(words: Sequence[str]) -> set[str]:
    """The ``{name}`` placeholders used in ``words`` (not the ``{{name}}`` escapes)."""
    return {m.group(2) for word in words for m in _PLACEHOLDER.finditer(word) if m.group(2)}


def substitute(words: Sequence[str], params: Mapping[str, Any]) -> list[str]:
    """Replace ``{name}`` in each word by the point's value of ``name``.

    Only names of the point are replaced; ``{{name}}`` becomes a literal ``{name}``; any
    other brace (``{"a": 1}``, ``{0}``) is left as written. Each word stays one argv word
    whatever the value holds (quotes, ``$()``, blanks, newlines): nothing goes through a
    shell.
    """

    def value(match: re.Match[str]) -> str:
        if match.group(1):
            return "{" + match.group(1) + "}"
        name = match.group(2)
        return format_value(params[name]) if name in params else match.group(0)

    return [_PLACEHOLDER.sub(value, word) for word in words]


def read_point(path: str, index: int) -> dict[str, Any]:
    """The params of point ``index`` (line ``index`` of the params file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh):
                if number == index:
                    data = json.loads(line)
                    if not isinstance(data, dict) or data.get("index") != index:
                        raise TaskError(f"{path}, line {index + 1}: not the entry of point {index}")
                    params = data.get("params")
                    if not isinstance(params, dict):
                        raise TaskError(f"{path}, line {index + 1}: no params mapping")
                    return params
    except OSError as exc:
        raise TaskError(f"cannot read the sweep's params file: {exc}") from exc
    except ValueError as exc:
        raise TaskError(f"{path}, line {index + 1}: not JSON: {exc}") from exc
    raise TaskError(f"{path} has no point {index} (the sweep has fewer points)")


def points_of(pack: int, size: int, points: int) -> range:
    """The points of pack ``pack`` of a packed sweep (``sweep.pack`` = ``size``, ``points``
    in all): ``pack * size`` .. ``(pack + 1) * size - 1``, fewer in the last; with ``size``
    1, point ``pack`` alone."""
    return range(pack * size, min((pack + 1) * size, points))


def task_dir(directory: str, index: int) -> str:
    """Where sweep point ``index`` keeps its files under a sweep's job (or log, or
    checkpoint) directory: ``<directory>/tasks/<index>``, on every side of hpclaunch."""
    return posixpath.join(directory, "tasks", str(index))


def sweep_params_text(params: Mapping[str, Any]) -> str:
    """``HPCLAUNCH_SWEEP_PARAMS``: the point as JSON (:func:`hpclaunch.runtime.sweep_params`)."""
    return json.dumps(dict(params), ensure_ascii=False, sort_keys=True)


def task_env(env: Mapping[str, str], index: int, params: Mapping[str, Any]) -> dict[str, str]:
    """The variables that make the runtime and the sidecar use the task's own directory."""
    job_dir = env.get("HPCLAUNCH_JOB_DIR") or os.getcwd()
    own = task_dir(job_dir, index)
    log_dir = env.get("HPCLAUNCH_LOG_DIR") or job_dir
    ckpt = env.get("HPCLAUNCH_CHECKPOINT_DIR")
    if not ckpt or os.path.normpath(ckpt) == os.path.join(job_dir, jobdir.CHECKPOINTS):
        ckpt = os.path.join(own, jobdir.CHECKPOINTS)
    else:
        ckpt = task_dir(ckpt, index)
    out = {
        "HPCLAUNCH_SWEEP_DIR": job_dir,
        "HPCLAUNCH_SWEEP_INDEX": str(index),
        "HPCLAUNCH_SWEEP_PARAMS": sweep_params_text(params),
        "HPCLAUNCH_JOB_DIR": own,
        "HPCLAUNCH_CONTROL_DIR": os.path.join(own, jobdir.CONTROL),
        "HPCLAUNCH_CHECKPOINT_DIR": ckpt,
        "HPCLAUNCH_LOG_DIR": task_dir(log_dir, index),
    }
    # One W&B run per task (the sidecar would give every task the submission's run id).
    run_id = re.sub(r"[^a-z0-9]", "", env.get("HPCLAUNCH_SUBMISSION_ID", "").lower())[:48]
    if run_id and "WANDB_RUN_ID" not in env:
        out["WANDB_RUN_ID"] = f"{run_id}t{index}"
    return out


def hold_point(task_dir: str, index: int) -> int | None:
    """Lock ``<task_dir>/.running`` (waiting while another copy of the point holds it) and
    keep the descriptor open across the exec: the lock lasts as long as the task. ``None``
    on a filesystem without locks (Lustre mounted without ``flock``): no guard then."""
    fd = os.open(os.path.join(task_dir, ".running"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"hpclaunch: sweep point {index} is running in another job (slurmctld "
                "restarted and forgot it?): waiting for that one to end",
                flush=True,
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    os.set_inheritable(fd, True)
    return fd


def completed_at(task_dir: str) -> str | None:
    """When an attempt of this point ended ``success`` (its sidecar's ledger,
    ``events.jsonl``), as ISO time; ``None`` if none did (or the ledger is unreadable)."""
    try:
        with open(os.path.join(task_dir, "events.jsonl"), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:  # a torn last line
            continue
        ended = isinstance(event, dict) and event.get("event") == "attempt_end"
        if ended and event.get("reason") == "success" and isinstance(event.get("time"), float):
            when = datetime.datetime.fromtimestamp(event["time"], tz=datetime.timezone.utc)
            return f"attempt {event.get('attempt')} at {when.isoformat(timespec='seconds')}"
    return None


def take_study_trial(
    study: str, task_dir: str, index: int, env: Mapping[str, str]
) -> tuple[int, dict[str, Any]] | None:
    """The trial (number, parameters) task ``index`` runs; ``None`` when its trial already
    ended (a copy of the task that slurmctld started again).

    Raises:
        TaskError: The study cannot be read or reached.
    """
    from hpclaunch.study import engine  # noqa: PLC0415 (optuna: only in a study's task)
    from hpclaunch.study.config import (  # noqa: PLC0415 (only in a study's task)
        STUDY_LOCK,
        read_study,
    )
    from hpclaunch.study.orphans import sweep_lock  # noqa: PLC0415 (only in a study's task)

    try:
        config = read_study(study)
        # The first task makes the study (and, in a new RDB, Optuna's tables); one at a time:
        # three tasks starting together in an empty MariaDB raced to write its schema version
        # (IntegrityError "Duplicate entry 'v3.2.0.a'") and one failed.
        with sweep_lock(Path(study).parent / STUDY_LOCK):
            engine.create_study(config)
        array = env.get("SLURM_ARRAY_JOB_ID", env.get("SLURM_JOB_ID", ""))
        owner = {"task": str(index), "job_id": f"{array}_{env.get('SLURM_ARRAY_TASK_ID', '')}"}
        taken = engine.take_trial(config, task_dir, owner)
    except Exception as exc:  # an unreadable file, an unreachable RDB, a missing study
        raise TaskError(f"cannot open the sweep's study ({study}): {exc}") from exc
    if not isinstance(taken, engine.TakenTrial):
        state = taken.state.name.lower()
        print(f"hpclaunch: sweep point {index}: trial {taken.number} already {state}", flush=True)
        return None
    again = " (resumed after a requeue)" if taken.resumed else ""
    print(f"hpclaunch: sweep point {index}: trial {taken.number}{again}", flush=True)
    return taken.number, taken.params


def main(argv: Sequence[str] | None = None, environ: MutableMapping[str, str] | None = None) -> int:
    """Entry point; execs the command (returns only on an error, with exit code 2)."""
    parser = argparse.ArgumentParser(prog="python -m hpclaunch.supervise.sweep_task")
    parser.add_argument("--params", required=True, help="the sweep's params file")
    parser.add_argument("--keep", type=int, default=0, help="leading words not substituted")
    parser.add_argument("--study", help="an adaptive sweep's study.json: ask it for the trial")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    raw = env.get("HPCLAUNCH_SWEEP_INDEX", "")
    try:
        if not command:
            raise TaskError("no command after --")
        if not raw.isdigit():
            raise TaskError(f"HPCLAUNCH_SWEEP_INDEX is {raw!r}, not a point index")
        index = int(raw)
        params = read_point(args.params, index)
    except TaskError as exc:
        print(f"hpclaunch sweep task: {exc}", file=sys.stderr)
        return 2
    env.update(task_env(env, index, params))
    task_dir = env["HPCLAUNCH_JOB_DIR"]
    os.makedirs(task_dir, exist_ok=True)
    lock = hold_point(task_dir, index)
    done = completed_at(task_dir)
    if done is not None:
        print(
            f"hpclaunch: sweep point {index} already completed ({done}): not run again",
            flush=True,
        )
        if lock is not None:
            os.close(lock)
        return 0
    if args.study:
        try:
            trial = take_study_trial(args.study, task_dir, index, env)
        except TaskError as exc:
            print(f"hpclaunch sweep task: {exc}", file=sys.stderr)
            return 2
        if trial is None:
            return 0
        number, params = trial
        env["HPCLAUNCH_SWEEP_PARAMS"] = sweep_params_text(params)
        env["HPCLAUNCH_STUDY"], env["HPCLAUNCH_TRIAL"] = args.study, str(number)
    env.update(task_tracker_env(env, params, int(env["HPCLAUNCH_TRIAL"]) if args.study else None))
    keep = max(0, args.keep)
    final = command[:keep] + substitute(command[keep:], params)
    print(f"hpclaunch: sweep point {index}: {env['HPCLAUNCH_SWEEP_PARAMS']}", flush=True)
    try:
        os.execvpe(final[0], final, env)
    except OSError as exc:
        print(f"hpclaunch sweep task: cannot run {final[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 127  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
