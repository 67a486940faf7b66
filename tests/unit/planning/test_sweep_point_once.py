"""A sweep point runs once (hpclaunch.supervise.sweep_task): a point whose attempt ended
``success`` is not run again, a second copy waits for the first, and the lock lasts as
long as the task (it passes through the exec). The cluster side: bench/RESULTS.md, the
slurmctld SIGKILL while tasks start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpclaunch.supervise.sweep_task import completed_at, main

SUCCESS = {"event": "attempt_end", "attempt": 0, "time": 1795655469.5, "reason": "success"}


def sweep(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A one-point sweep: its params file, a task's environment, the point's directory."""
    params = tmp_path / "sweep-params.jsonl"
    params.write_text(json.dumps({"index": 0, "params": {"lr": 0.1}}) + "\n")
    env = {"HPCLAUNCH_SWEEP_INDEX": "0", "HPCLAUNCH_JOB_DIR": str(tmp_path), "PATH": "/bin"}
    task = tmp_path / "tasks" / "0"
    task.mkdir(parents=True)
    return params, env, task


def test_a_completed_point_is_not_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params, env, task = sweep(tmp_path)
    (task / "events.jsonl").write_text(
        json.dumps({**SUCCESS, "reason": "preempted"}) + "\n" + json.dumps(SUCCESS) + "\n{torn"
    )
    # the command does not exist: had it been run, main would return 127
    assert main(["--params", str(params), "--", "/nonexistent/train", "{lr}"], env) == 0
    assert "sweep point 0 already completed (attempt 0 at 2026-" in capsys.readouterr().out


def test_only_success_counts_as_completed(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text(json.dumps({**SUCCESS, "reason": "preempted"}) + "\n")
    assert completed_at(str(tmp_path)) is None
    assert completed_at(str(tmp_path / "missing")) is None


def test_a_second_copy_waits_for_the_first_then_sees_it_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params, env, task = sweep(tmp_path)
    first = subprocess.Popen(  # the first copy: holds the lock 1 s, then succeeds
        [
            sys.executable,
            "-c",
            "import fcntl, json, os, sys, time\n"
            "fd = os.open(sys.argv[1] + '/.running', os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(1)\n"
            "open(sys.argv[1] + '/events.jsonl', 'a').write(sys.argv[2] + '\\n')\n",
            str(task),
            json.dumps(SUCCESS),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    assert first.stdout.readline() == "locked\n"
    started = time.monotonic()
    assert main(["--params", str(params), "--", "/nonexistent/train"], env) == 0
    assert time.monotonic() - started > 0.5
    out = capsys.readouterr().out
    assert "sweep point 0 is running in another job" in out
    assert "already completed" in out
    rest, _ = first.communicate()
    assert first.returncode == 0, rest


def test_the_lock_lasts_as_long_as_the_task(tmp_path: Path) -> None:
    """The exec'd command still holds the point: a new lock on it fails from inside."""
    params, env, _ = sweep(tmp_path)
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(os.environ['HPCLAUNCH_JOB_DIR'] + '/.running', os.O_RDWR)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    print('free')\n"
        "except BlockingIOError:\n"
        "    print('held')\n"
    )
    argv = ["--params", str(params), "--", sys.executable, "-c", probe]
    out = subprocess.run(
        [sys.executable, "-m", "hpclaunch.supervise.sweep_task", *argv],
        env={**os.environ, **env, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[-1] == "held"
