"""The sidecar's resize commands (requeuehold, update NumNodes, release), run by the real
shell against a recording ``scontrol``, and the request file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import pytest

from hpclaunch.supervise.resize import (
    elastic_sizes,
    read_request,
    resize_at_requeue,
)
from hpclaunch.transport.local import LocalRunner

# Records its arguments; "requeuehold" does what Slurm's requeue does to the job's
# processes, to the shell that runs the commands: SIGTERM.
SCONTROL = """#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  show) echo "   NumNodes=4 NumCPUs=8 NumTasks=4 CPUs/Task=2 ReqB:S:C:T=0:0:*:*" ;;
  requeuehold) {on_hold} ;;
esac
exit 0
"""


def _scontrol(tmp_path: Path, on_hold: str) -> tuple[LocalRunner, Path]:
    log = tmp_path / "calls"
    tool = tmp_path / "bin" / "scontrol"
    tool.parent.mkdir()
    tool.write_text(SCONTROL.format(log=log, on_hold=on_hold))
    tool.chmod(0o755)
    runner = LocalRunner()
    runner.slurm_bin = str(tool.parent)
    return runner, log


def test_hold_update_release_in_order_though_the_hold_sigterms_the_shell(
    tmp_path: Path,
) -> None:
    runner, log = _scontrol(tmp_path, 'kill -TERM "$PPID"')
    outcome = resize_at_requeue(runner, "77", 2)
    assert log.read_text().splitlines() == [
        "show job 77",
        "requeuehold 77",
        "update JobId=77 NumNodes=2-2 NumTasks=2 NumCPUs=4",
        "release 77",
    ]
    assert (outcome.held, outcome.resized, outcome.released) == (True, True, True)
    assert outcome.why is None


def test_a_refused_hold_changes_nothing(tmp_path: Path) -> None:
    runner, log = _scontrol(tmp_path, "echo 'Job is not requeueable' >&2; exit 1")
    outcome = resize_at_requeue(runner, "77_3", 4)
    assert log.read_text().splitlines() == ["show job 77_3", "requeuehold 77_3"]
    assert (outcome.held, outcome.resized, outcome.released) == (False, False, False)
    assert outcome.why is not None
    assert "not requeueable" in outcome.why


def test_the_request_is_taken_once_and_the_sizes_come_from_the_job(tmp_path: Path) -> None:
    (tmp_path / "resize-request.json").write_text(json.dumps({"nodes": 2, "why": "test"}))
    assert read_request(tmp_path) == {"nodes": 2, "why": "test"}
    assert read_request(tmp_path) is None
    (tmp_path / "resize-request.json").write_text("{half")
    assert read_request(tmp_path) == {"invalid": "{half"}
    assert elastic_sizes({"HPCLAUNCH_ELASTIC": '{"nodes": [1, 2, 4]}'}) == (1, 2, 4)
    assert elastic_sizes({}) == ()


def test_the_attempt_after_a_resize_says_what_the_resize_cost() -> None:
    from hpclaunch.supervise.on_resize import resize_seconds

    now = time.time()
    resized = [
        {"event": "resize_requested", "time": now - 30, "refused": "too soon"},
        {"event": "resize_requested", "time": now - 12.5, "refused": None},
        {"event": "attempt_end", "time": now - 11, "reason": "resized"},
    ]
    assert resize_seconds(resized) == pytest.approx(12.5, abs=0.2)  # the request taken
    preempted = [*resized, {"event": "attempt_end", "time": now - 1, "reason": "preempted"}]
    assert resize_seconds(preempted) is None  # the last attempt was not resized
    assert resize_seconds([]) is None


def test_the_launch_is_stopped_before_the_requeue_starts_slurms_kill_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slurm's requeue gives the sidecar KillWait to finish: the ledger's end and the
    'resized' notice come after it, so stopping the launch must not (a clean-clone run lost
    a notice: 3.3 s of stopping after the requeue, KillWait 5 s, a loaded machine)."""
    from types import SimpleNamespace

    from hpclaunch.supervise import on_resize as module
    from hpclaunch.supervise.resize import ResizeOutcome

    calls: list[str] = []
    monkeypatch.setattr(
        module,
        "resize_at_requeue",
        lambda runner, target, nodes: (
            calls.append(f"requeuehold {target} {nodes}") or ResizeOutcome(True, True, True)
        ),
    )

    class Control:
        env: ClassVar[dict[str, str]] = {"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "4"}
        config = SimpleNamespace(resize_wait=5.0, attempt=0)
        ledger = SimpleNamespace(append=lambda event, **fields: calls.append(event))
        output = SimpleNamespace(divert=lambda path: None)
        runner = None
        stop_log = Path("stop.log")
        committed_step = 12

        def checkpoint(self, reason: str, deadline: float, launch: object) -> None:
            calls.append("checkpoint")

        def stop(self, launch: object, timeout: float | None = None) -> None:
            calls.append("stop")

        def end(self, reason: str, **fields: object) -> None:
            calls.append(f"end {reason}")

        def say_end(self, reason: str, requeued: bool, **fields: object) -> None:
            calls.append("say_end")

    launch = SimpleNamespace(history=[], proc=SimpleNamespace(returncode=0))
    code = module.on_resize(Control(), {"nodes": 2}, launch, (2, 4))  # type: ignore[arg-type]
    assert code == module.EXIT_REQUEUED
    assert calls == [
        "resize_requested",
        "checkpoint",
        "stop",
        "requeuehold 77 2",
        "resize_issued",
        "end resized",
        "say_end",
    ]
