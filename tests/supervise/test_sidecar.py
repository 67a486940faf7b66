"""The sidecar with real child processes and real signals (no Slurm: the launch runs
``node-exec`` directly, as a single node; scontrol/squeue answer from a fake runner)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpclaunch import jobdir
from hpclaunch.errors import CommandTimeout, ProgramNotFound
from hpclaunch.supervise import control
from hpclaunch.supervise.failures import classify_exit
from hpclaunch.supervise.ledger import Ledger, read_ledger
from hpclaunch.supervise.sidecar import (
    EXIT_NOT_REQUEUED,
    EXIT_REQUEUE_FAILED,
    EXIT_REQUEUED,
    Sidecar,
    SidecarConfig,
)
from hpclaunch.supervise.signals import SignalCatcher
from hpclaunch.transport.base import CommandResult
from tests.unit.fakes import FakeRunner, result

TRAINER = str(Path(__file__).with_name("trainer.py"))
REPO = Path(__file__).resolve().parents[2]


def slurm_answers(time_left: str = "10:00") -> FakeRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue":
            return result(argv, out=f"{time_left}\n")
        return result(argv)

    return FakeRunner(answer)


def config(tmp_path: Path, *trainer_args: str, **fields: Any) -> SidecarConfig:
    env = dict(os.environ, SLURM_JOB_ID="4242", PYTHONPATH=str(REPO))
    env.pop("SLURM_JOB_NODELIST", None)
    fields.setdefault("grace", 3.0)
    fields.setdefault("stop_timeout", 1.0)
    return SidecarConfig(
        launcher="srun",
        command=(sys.executable, TRAINER, *trainer_args),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        **fields,
    )


@pytest.fixture
def signal_at_step(tmp_path: Path) -> Iterator[Any]:
    """signal_at_step(sig, step): send ``sig`` to this process once the trainer reports
    ``step`` (the sidecar runs in this process)."""
    threads: list[threading.Thread] = []

    def arm(sig: signal.Signals, step: int) -> None:
        def wait_then_kill() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if (control.read_step(tmp_path / "control" / jobdir.PROGRESS) or 0) >= step:
                    os.kill(os.getpid(), sig)
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=wait_then_kill, daemon=True)
        thread.start()
        threads.append(thread)

    yield arm
    for thread in threads:
        thread.join(timeout=1)


def events(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The last event of each kind."""
    return {e["event"]: e for e in read_ledger(tmp_path)}


def test_success_passes_through(tmp_path: Path) -> None:
    code = Sidecar(config(tmp_path, "--steps", "3"), slurm_answers()).run()
    assert code == 0
    ev = events(tmp_path)
    assert ev["attempt_start"]["argv"][:4] == [
        sys.executable,
        "-m",
        "hpclaunch.supervise",
        "node-exec",
    ]
    assert ev["attempt_end"]["reason"] == "success"
    assert ev["attempt_end"]["last_step"] == 3
    assert oct((tmp_path / "control").stat().st_mode & 0o777) == "0o700"


def test_preemption_signal_checkpoints_then_requeues(tmp_path: Path, signal_at_step: Any) -> None:
    runner = slurm_answers(time_left="30:00")
    signal_at_step(signal.SIGUSR1, 4)
    started = time.monotonic()
    code = Sidecar(config(tmp_path, "--steps", "1000"), runner).run()
    assert code == EXIT_REQUEUED
    assert time.monotonic() - started < 10  # the trainer's 30 s sleep was cut short
    assert ("scontrol", "requeue", "4242") in runner.calls
    request = json.loads((tmp_path / "control" / jobdir.REQUEST).read_text())
    assert request["reason"] == "preemption"
    assert request["deadline"] - request["requested_at"] <= 3
    ev = events(tmp_path)
    assert ev["signal_received"]["signal"] == "USR1"
    assert ev["checkpoint_committed"]["step"] >= 4
    assert ev["requeue_issued"]["target"] == "4242"
    end = ev["attempt_end"]
    assert end["reason"] == "preempted"
    assert end["requeued"] is True
    assert end["steps_lost"] == 0
    assert end["committed_step"] == ev["checkpoint_committed"]["step"]


def test_a_warning_caught_before_the_set_up_is_acted_on_once_the_launch_runs(
    tmp_path: Path,
) -> None:
    """``python -m hpclaunch.supervise`` catches signals before its imports and set-up and
    hands the catcher to the sidecar: Slurm's warning in that moment is not lost (one was in
    CI, stop 35, when the sidecar caught signals only once it launched)."""
    runner = slurm_answers(time_left="30:00")
    with SignalCatcher() as signals:
        signal.raise_signal(signal.SIGUSR1)
        code = Sidecar(config(tmp_path, "--steps", "1000"), runner).run(signals)
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    assert ev["signal_received"]["signal"] == "USR1"
    assert ev["attempt_end"]["reason"] == "preempted"
    assert ("scontrol", "requeue", "4242") in runner.calls


def test_a_stopped_attempt_ends_with_one_line_and_keeps_the_noise_aside(
    tmp_path: Path, signal_at_step: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "attempt-0.log"
    signal_at_step(signal.SIGUSR1, 4)
    cfg = config(tmp_path, "--steps", "1000", "--noisy-term", log_path=log)
    assert Sidecar(cfg, slurm_answers(time_left="30:00")).run() == EXIT_REQUEUED
    out = capfd.readouterr().out  # the sidecar's stdout: the attempt log in a job
    step = events(tmp_path)["checkpoint_committed"]["step"]
    lines = out.splitlines()
    assert f"checkpointed at {step}" in lines  # the trainer's own output passed through
    assert lines[-1] == (
        f"hpclaunch: stopped for requeue at step {step} (preemption); checkpoint "
        f"step-{step} committed (the launcher's shutdown output: attempt-0.stop.log)"
    )
    assert "Traceback" not in out
    aside = (tmp_path / "attempt-0.stop.log").read_text()
    assert aside.startswith("Traceback (most recent call last):\n")
    assert "SignalException: Process" in aside
    assert oct((tmp_path / "attempt-0.stop.log").stat().st_mode & 0o777) == "0o600"


def test_warning_near_the_end_is_the_time_limit(tmp_path: Path, signal_at_step: Any) -> None:
    signal_at_step(signal.SIGUSR2, 2)
    code = Sidecar(config(tmp_path, "--steps", "1000", lead=30), slurm_answers("0:30")).run()
    assert code == EXIT_REQUEUED
    assert events(tmp_path)["attempt_end"]["reason"] == "time_limit"
    assert json.loads((tmp_path / "control" / jobdir.REQUEST).read_text())["reason"] == "time_limit"


def test_a_time_limit_warning_leaves_the_trainer_all_the_time_there_is(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """Slurm warned early (46 s left, lead 20): the trainer may take until 10 s before the
    limit to commit, not only the lead (a slow start on a loaded machine); it answers at
    once here, and is requeued at once."""
    signal_at_step(signal.SIGUSR1, 2)
    started = time.monotonic()
    code = Sidecar(config(tmp_path, "--steps", "1000", lead=20), slurm_answers("0:46")).run()
    assert code == EXIT_REQUEUED
    assert time.monotonic() - started < 15
    request = json.loads((tmp_path / "control" / jobdir.REQUEST).read_text())
    assert request["reason"] == "time_limit"
    assert 34 <= request["deadline"] - request["requested_at"] <= 37


@pytest.mark.parametrize("end_in", [35.0, None])
def test_a_warning_while_squeue_fails_reads_the_end_time_slurm_set(
    tmp_path: Path, signal_at_step: Any, end_in: float | None
) -> None:
    """slurmctld busy under load: squeue times out, SLURM_JOB_END_TIME still tells a time
    limit (35 s left, lead 30) from a preemption; without it the warning is a preemption."""

    def squeue_times_out(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "squeue":
            raise CommandTimeout(argv, 10)
        return result(argv)

    cfg = config(tmp_path, "--steps", "1000", lead=30)
    if end_in is not None:
        end = str(int(time.time() + end_in))
        cfg = dataclasses.replace(cfg, env={**cfg.env, "SLURM_JOB_END_TIME": end})
    signal_at_step(signal.SIGUSR1, 2)
    assert Sidecar(cfg, FakeRunner(squeue_times_out)).run() == EXIT_REQUEUED
    requested = events(tmp_path)["checkpoint_requested"]
    if end_in is None:
        assert (requested["reason"], requested["time_left"]) == ("preemption", None)
    else:
        assert requested["reason"] == "time_limit"
        assert 25 < requested["time_left"] <= 35


def test_no_orphan_survives(tmp_path: Path, signal_at_step: Any) -> None:
    pids_file = tmp_path / "pids"
    signal_at_step(signal.SIGUSR1, 2)
    args = ("--steps", "1000", "--ignore-term", "--grandchild", "--no-checkpoint")
    args += ("--pids", str(pids_file))
    code = Sidecar(config(tmp_path, *args, grace=1.5), slurm_answers()).run()
    assert code == EXIT_REQUEUED  # no checkpoint in time: requeued with what was committed
    ev = events(tmp_path)
    assert "checkpoint_timeout" in ev
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        assert not _alive(pid), f"process {pid} of the launch survived"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_scontrol_missing_gives_exit_75(tmp_path: Path, signal_at_step: Any) -> None:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "scontrol":
            raise ProgramNotFound("scontrol")
        return result(argv, out="30:00\n")

    signal_at_step(signal.SIGUSR1, 2)
    code = Sidecar(config(tmp_path, "--steps", "1000"), FakeRunner(answer)).run()
    assert code == EXIT_REQUEUE_FAILED == 75
    failed = events(tmp_path)["requeue_failed"]
    assert failed["missing"] is True
    assert "scontrol" in failed["why"]


@pytest.mark.parametrize(("time_left", "requeued"), [("0:30", False), ("10:00", True)])
def test_crash_loop_breaker_stops_requeuing_but_never_a_preemption(
    tmp_path: Path, time_left: str, requeued: bool
) -> None:
    """The previous attempt was requeued without progress, and ended at step 5; this one's
    trainer gets no further before the warning. Near the time limit (30 s left) the breaker
    trips; far from it the warning is a preemption, which is requeued whatever the steps."""
    control.prepare(tmp_path / "control")
    control.write_json_atomic(tmp_path / "control" / jobdir.PROGRESS, {"step": 5})
    Ledger(tmp_path, 0).append("attempt_end", reason="time_limit", requeued=True, no_progress=True)
    runner = slurm_answers(time_left)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR1)).start()
    cfg = config(tmp_path, "--steps", "1000", "--sleep", "100", attempt=1, lead=30)
    code = Sidecar(cfg, runner).run()
    ev = events(tmp_path)
    assert ev["attempt_end"]["no_progress"] is True
    assert ev["attempt_end"]["reason"] == ("preempted" if requeued else "time_limit")
    issued = any(call[:2] == ("scontrol", "requeue") for call in runner.calls)
    assert issued is requeued
    if requeued:
        assert code == EXIT_REQUEUED
    else:
        assert code == EXIT_NOT_REQUEUED
        assert "crash-loop breaker" in ev["requeue_skipped"]["why"]


def test_stale_control_files_are_recorded_and_removed(tmp_path: Path) -> None:
    ctl = control.prepare(tmp_path / "control")
    control.write_json_atomic(ctl / jobdir.REQUEST, {"reason": "preemption", "requested_at": 1})
    control.write_json_atomic(ctl / jobdir.DONE, {"step": 9, "committed_at": 2})
    assert Sidecar(config(tmp_path, "--steps", "1"), slurm_answers()).run() == 0
    # One event for both (issue 27: every resume logged two).
    (stale,) = [e for e in read_ledger(tmp_path) if e["event"].startswith("stale_control")]
    assert stale["event"] == "stale_control_files"
    assert stale["files"] == {
        jobdir.REQUEST: {"reason": "preemption", "requested_at": 1},
        jobdir.DONE: {"step": 9, "committed_at": 2},
    }
    assert not (ctl / jobdir.REQUEST).exists()


@pytest.mark.parametrize(("reason", "code"), [("success", 0), ("user_error", 3)])
def test_a_run_slurm_starts_after_the_job_ran_to_its_end_launches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reason: str, code: int
) -> None:
    """Slurm 24.11+ requeues a job once more after a preemption whose grace ran out
    (requeue.py's docstring): that run ends at once, with the finished attempt's code."""
    Ledger(tmp_path, 2).append("attempt_end", reason=reason, exit_code=code, requeued=False)
    marker = tmp_path / "ran"
    cfg = config(tmp_path, "--steps", "1", "--pids", str(marker), attempt=3)
    assert Sidecar(cfg, slurm_answers()).run() == code
    ledger = read_ledger(tmp_path)
    assert [e["event"] for e in ledger] == ["attempt_end", "restart_refused"]
    refused = ledger[-1]
    assert (refused["attempt"], refused["after_attempt"], refused["reason"]) == (3, 2, reason)
    assert not marker.exists()
    assert "already ran the job to its end" in capsys.readouterr().out


@pytest.mark.parametrize("reason", ["preempted", "time_limit", "node_failure", "requeued"])
def test_a_job_whose_last_attempt_was_stopped_runs_again(tmp_path: Path, reason: str) -> None:
    Ledger(tmp_path, 0).append("attempt_end", reason=reason, exit_code=0, requeued=True)
    cfg = config(tmp_path, "--steps", "1", attempt=1)
    assert Sidecar(cfg, slurm_answers()).run() == 0
    kinds = [e["event"] for e in read_ledger(tmp_path)]
    assert "attempt_start" in kinds
    assert "restart_refused" not in kinds
    assert read_ledger(tmp_path)[-1]["reason"] == "success"


def run_as_batch_script(tmp_path: Path, *command: str) -> int:
    """``python -m hpclaunch.supervise run --launcher=srun -- COMMAND`` as the batch script
    runs it (outside Slurm: the launch runs here), its output in ``attempt-0.log``."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HPCLAUNCH_JOB_DIR=str(tmp_path))
    env.update(HPCLAUNCH_LOG_DIR=str(tmp_path), HPCLAUNCH_ATTEMPT="0")
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "hpclaunch.supervise", "run", "--launcher=srun", "--"]
    with (tmp_path / "attempt-0.log").open("w") as out:
        return subprocess.run(
            [*argv, *command],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=30,
            check=False,
        ).returncode


def test_user_error_through_the_command_line(tmp_path: Path) -> None:
    """The exit code passes through, no requeue, and the ledger quotes the traceback's last
    line."""
    assert run_as_batch_script(tmp_path, sys.executable, TRAINER, "--fail") == 1
    end = events(tmp_path)["attempt_end"]
    assert end["reason"] == "user_error"
    assert end["requeued"] is False
    assert end["exit_code"] == 1
    assert end["error_line"] == "ValueError: boom at step 3"
    assert any("Traceback" in line for line in end["tail"])


def test_a_job_slurmctld_forgot_is_job_lost_not_a_user_error(tmp_path: Path) -> None:
    """srun's words (recorded on 25.11) when slurmctld, killed just after starting the job,
    came back without it: the attempt ends ``job_lost`` with why, not ``user_error``."""
    said = (
        "srun: error: Unable to confirm allocation for job 170: Invalid job id specified\n"
        "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 170\n"
    )
    fake_srun = f"import sys; sys.stderr.write({said!r}); sys.exit(1)"
    assert run_as_batch_script(tmp_path, sys.executable, "-c", fake_srun) == 1
    end = events(tmp_path)["attempt_end"]
    assert end["reason"] == "job_lost"
    assert "slurmctld does not know this job" in end["why"]
    assert "error_line" not in end


#: srun's and slurmstepd's words as Slurm cancels a step (slurmstepd/req.c, 22.05-26.05).
STEP_CANCELLED = (
    "slurmstepd: error: *** STEP 311.0 ON n2 CANCELLED AT 2026-11-29T17:02:11 DUE TO {} ***\n"
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
    "srun: error: n2: task 0: Terminated\n"
)


@pytest.mark.parametrize(
    ("cause", "reason", "requeued"),
    [
        ("PREEMPTION", "preempted", False),
        ("TIME LIMIT", "time_limit", False),
        ("JOB REQUEUE", "requeued", True),
    ],
)
def test_a_step_slurm_cancelled_before_the_sidecar_heard_is_slurms_end_not_the_users(
    tmp_path: Path, cause: str, reason: str, requeued: bool
) -> None:
    """Clean-clone run 49: a preempted array task's step died (exit 143) before Slurm's
    SIGTERM reached the sidecar; the attempt ended ``user_error``, and the run Slurm
    requeued was refused as a rerun of a finished job. Now the step's words name Slurm's
    end, and the next attempt runs."""
    said = STEP_CANCELLED.format(cause)
    fake_srun = f"import sys; sys.stderr.write({said!r}); sys.exit(143)"
    assert run_as_batch_script(tmp_path, sys.executable, "-c", fake_srun) == 143
    end = events(tmp_path)["attempt_end"]
    assert (end["reason"], end["requeued"], end["exit_code"]) == (reason, requeued, 143)
    assert "before its SIGTERM reached the sidecar" in end["why"] or reason == "requeued"
    assert "error_line" not in end
    assert "retry" not in end
    cfg = config(tmp_path, "--steps", "1", attempt=1)
    assert Sidecar(cfg, slurm_answers()).run() == 0  # Slurm's next run is no rerun
    ledger = read_ledger(tmp_path)
    assert "restart_refused" not in [e["event"] for e in ledger]
    assert ledger[-1]["reason"] == "success"


#: srun's words when slurmctld was down as it asked about the job (recorded on 25.11 in
#: the slurmctld-kill sweep test): the step was never created.
CONTROLLER_MISSED = (
    "srun: error: slurm_send_node_msg: [socket:[950179]] slurm_bufs_sendto(msg_type="
    "REQUEST_HET_JOB_ALLOC_INFO) failed: Unexpected missing socket error\n"
    "srun: error: Unable to confirm allocation for job 840: Unexpected missing socket error\n"
    "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 840\n"
)


@pytest.mark.parametrize(
    "said",
    [
        CONTROLLER_MISSED,
        # slurmctld SIGKILLed while srun talked to it (recorded on 25.11, clean-clone run
        # after stop 55: taken for the command's own failure, the point ended FAILED)
        "srun: error: Unable to confirm allocation for job 476: Connection reset by peer\n"
        "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 476\n",
    ],
)
def test_srun_that_could_not_reach_slurmctld_is_not_a_user_error(said: str) -> None:
    reason, extra = classify_exit(said.splitlines())
    assert reason == "controller_unreachable", extra


def _fails_first(tmp_path: Path, then: str) -> str:
    """A command that says CONTROLLER_MISSED and exits 1 the first time, then runs ``then``."""
    mark = tmp_path / "launched-once"
    return (
        "import pathlib, sys\n"
        f"mark = pathlib.Path({str(mark)!r})\n"
        "if not mark.exists():\n"
        "    mark.touch()\n"
        f"    sys.stderr.write({CONTROLLER_MISSED!r})\n"
        "    sys.exit(1)\n"
        f"{then}\n"
    )


def test_a_launch_that_could_not_reach_slurmctld_is_tried_again(tmp_path: Path) -> None:
    """Nothing ran (srun never created the step), so the sidecar launches again after 2 s,
    says so in the ledger, and the attempt ends as the second launch does."""
    command = _fails_first(tmp_path, "print('ran'); sys.exit(0)")
    assert run_as_batch_script(tmp_path, sys.executable, "-c", command) == 0
    found = events(tmp_path)
    assert found["launch_retry"]["retry"] == 1
    assert found["launch_retry"]["wait"] == 2.0
    assert "nothing ran" in found["launch_retry"]["why"]
    assert found["attempt_end"]["reason"] == "success"


def test_after_a_retry_the_end_is_judged_by_the_last_launch(tmp_path: Path) -> None:
    """The second launch fails in the user's code: user_error with its error line, not
    controller_unreachable from the first launch's words."""
    command = _fails_first(tmp_path, "raise ValueError('boom after retry')")
    assert run_as_batch_script(tmp_path, sys.executable, "-c", command) == 1
    end = events(tmp_path)["attempt_end"]
    assert end["reason"] == "user_error"
    assert end["error_line"] == "ValueError: boom after retry"
    assert not any("Unexpected missing socket" in line for line in end["tail"])


@pytest.mark.parametrize(("restarts", "reason"), [("1", "requeued"), ("0", "cancelled")])
def test_sigterm_is_a_requeue_when_slurms_restart_count_went_up(
    tmp_path: Path, signal_at_step: Any, restarts: str, reason: str
) -> None:
    """``scontrol requeue`` SIGTERMs the batch shell with ``Restarts`` already raised;
    ``scancel`` leaves it unchanged (both measured on Slurm 22.05)."""

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=f"JobId=4242\n   Requeue=1 Restarts={restarts} BatchFlag=1\n")
        return result(argv, out="30:00\n")

    runner = FakeRunner(answer)
    signal_at_step(signal.SIGTERM, 3)
    code = Sidecar(config(tmp_path, "--steps", "1000", kill_wait=4.0), runner).run()
    assert code == 143
    assert ("scontrol", "show", "job", "4242") in runner.calls
    assert not any(call[:2] == ("scontrol", "requeue") for call in runner.calls)  # Slurm's job
    ev = events(tmp_path)
    assert ev["checkpoint_committed"]["step"] >= 3
    end = ev["attempt_end"]
    assert end["reason"] == reason
    assert end["requeued"] is (reason == "requeued")
    assert end["signal"] == "TERM"


RECORDED = REPO / "tests/unit/data/cluster-25.11"


@pytest.mark.parametrize(
    ("recording", "reason", "asked", "said"),
    [
        ("timelimit", "time_limit", "time_limit", "the time limit"),
        ("scancel", "cancelled", "cancel", "a cancel"),
    ],
)
def test_a_bare_sigterm_names_its_real_cause(
    tmp_path: Path,
    signal_at_step: Any,
    capfd: Any,
    recording: str,
    reason: str,
    asked: str,
    said: str,
) -> None:
    """Issue 27: a SIGTERM at the time limit (a job without --signal) was recorded as a
    preemption request and a cancel. ``scontrol show job`` at that SIGTERM says
    ``Reason=TimeLimit`` (recorded on 25.11, as is the scancel's ``Reason=None``)."""
    shown = (RECORDED / f"scontrol_show_job_sigterm_{recording}.txt").read_text()

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=shown)
        return result(argv, out="0:00\n")

    signal_at_step(signal.SIGTERM, 3)
    code = Sidecar(config(tmp_path, "--steps", "1000", kill_wait=4.0), FakeRunner(answer)).run()
    assert code == 143
    ev = events(tmp_path)
    assert ev["checkpoint_requested"]["reason"] == asked
    assert json.loads((tmp_path / "control" / jobdir.REQUEST).read_text())["reason"] == asked
    end = ev["attempt_end"]
    assert (end["reason"], end["requeued"]) == (reason, False)
    out = capfd.readouterr().out
    assert "hpclaunch: stopped at step" in out
    assert f"({said}); checkpoint step-" in out


def test_a_stop_without_a_commit_says_what_the_next_attempt_resumes_from(
    tmp_path: Path, signal_at_step: Any, capfd: Any
) -> None:
    """Issue 27: the log said "the next attempt resumes from the last one" with no
    checkpoint at all and no next attempt."""
    shown = (RECORDED / "scontrol_show_job_sigterm_timelimit.txt").read_text()

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=shown)
        return result(argv, out="0:00\n")

    signal_at_step(signal.SIGTERM, 3)
    cfg = config(tmp_path, "--steps", "1000", "--no-checkpoint", kill_wait=3.0)
    Sidecar(cfg, FakeRunner(answer)).run()
    out = capfd.readouterr().out
    assert "(the time limit); no checkpoint committed in time; there is no complete " in out
    assert "the next attempt" not in out


# A trainer whose periodic commit ends just after the request, before it saw the request
# (the done file says "periodic", as hpclaunch.runtime writes it), then answers the request
# ("preemption") after ANSWER_AFTER s (never when negative), or exits after the periodic one.
_PERIODIC_FIRST = """
import json, os, sys, time
from pathlib import Path
control = Path(os.environ["HPCLAUNCH_CONTROL_DIR"])
answer_after, exit_after_periodic = float(sys.argv[1]), sys.argv[2] == "exit"

def write(name, data):
    tmp = control / ("." + name)
    tmp.write_text(json.dumps(data))
    os.replace(tmp, control / name)

write("progress.json", {"step": 20})
while not (control / "checkpoint-request.json").exists():
    time.sleep(0.02)
write("checkpoint-done.json", {"step": 20, "committed_at": time.time(), "reason": "periodic"})
if exit_after_periodic:
    sys.exit(0)
write("progress.json", {"step": 21})
if answer_after >= 0:
    time.sleep(answer_after)
    write("checkpoint-done.json", {"step": 21, "committed_at": time.time(), "reason": "preemption"})
time.sleep(30)
"""


def periodic_first(tmp_path: Path, answer_after: float, then: str = "run") -> SidecarConfig:
    script = tmp_path / "periodic_first.py"
    script.write_text(_PERIODIC_FIRST)
    return dataclasses.replace(
        config(tmp_path), command=(sys.executable, str(script), str(answer_after), then)
    )


def test_a_periodic_commit_just_after_the_request_is_not_the_answer(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """The trainer commits on its schedule right after the request, then writes the requested
    checkpoint: the sidecar waits for that one instead of cutting it short (a CI run on a
    loaded host took the periodic step 80 and killed the on-request save of step 81)."""
    runner = slurm_answers(time_left="30:00")
    signal_at_step(signal.SIGUSR1, 20)
    cfg = dataclasses.replace(periodic_first(tmp_path, answer_after=1.0), grace=5.0)
    code = Sidecar(cfg, runner).run()
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    assert "checkpoint_timeout" not in ev
    committed = ev["checkpoint_committed"]
    assert (committed["step"], committed["reason"]) == (21, "preemption")
    assert committed["after"] >= 0.9
    assert ev["attempt_end"]["committed_step"] == 21


def test_only_a_periodic_commit_after_the_request_times_out(
    tmp_path: Path, signal_at_step: Any
) -> None:
    signal_at_step(signal.SIGUSR1, 20)
    code = Sidecar(periodic_first(tmp_path, answer_after=-1), slurm_answers("30:00")).run()
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    assert "checkpoint_committed" not in ev
    assert ev["checkpoint_timeout"]["waited"] >= 0.9  # grace 3 s - margin 2 s
    assert ev["checkpoint_timeout"]["periodic_step"] == 20
    assert ev["attempt_end"]["committed_step"] is None


def test_a_periodic_commit_the_launch_stops_after_is_the_answer(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """A trainer that re-checks the request after a commit (the README's loop) stops there."""
    signal_at_step(signal.SIGUSR1, 20)
    cfg = dataclasses.replace(periodic_first(tmp_path, -1, then="exit"), grace=10.0)
    started = time.monotonic()
    assert Sidecar(cfg, slurm_answers("30:00")).run() == EXIT_REQUEUED
    assert time.monotonic() - started < 6  # not the whole grace
    ev = events(tmp_path)
    assert "checkpoint_timeout" not in ev
    assert (ev["checkpoint_committed"]["step"], ev["checkpoint_committed"]["reason"]) == (
        20,
        "periodic",
    )
    assert ev["attempt_end"]["committed_step"] == 20


# -- who requeues a job Slurm preempts (requeue.py's docstring) --------------------------

#: ``scontrol show job`` during a preemption's grace (25.11.7 prints the time it started).
PREEMPTING = (
    "JobId=4242 JobName=x\n   PreemptEligibleTime=2026-11-25T07:56:48 "
    "PreemptTime=2026-11-25T07:56:50\n"
)
NOT_PREEMPTING = (
    "JobId=4242 JobName=x\n   PreemptEligibleTime=2026-11-25T07:56:48 PreemptTime=None\n"
)


def slurm_of(version: str, show_job: str) -> FakeRunner:
    """scontrol/squeue of a Slurm release (``sinfo --version``'s words) and job state."""

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv == ("scontrol", "--version"):
            return result(argv, out=f"{version}\n")
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=show_job)
        if argv[0] == "squeue":
            return result(argv, out="10:00\n")
        return result(argv)

    return FakeRunner(answer)


@pytest.mark.parametrize(
    ("version", "show_job", "by_slurm"),
    [
        ("slurm 25.11.7", PREEMPTING, True),  # Slurm requeues it when it exits
        ("slurm 24.11.7", PREEMPTING, True),
        ("slurm-wlm 22.05.8", PREEMPTING, False),  # 22.05 would end it COMPLETED
        ("slurm 25.11.7", NOT_PREEMPTING, False),  # the arbiter's signal: nobody else will
    ],
)
def test_a_job_slurm_preempts_is_requeued_by_slurm_from_24_11_on(
    tmp_path: Path, signal_at_step: Any, version: str, show_job: str, by_slurm: bool
) -> None:
    runner = slurm_of(version, show_job)
    signal_at_step(signal.SIGUSR1, 2)
    code = Sidecar(config(tmp_path, "--steps", "1000"), runner).run()
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    issued = [c for c in runner.calls if c[:2] == ("scontrol", "requeue")]
    if by_slurm:
        assert issued == []
        assert ev["requeue_by_slurm"]["target"] == "4242"
        assert "requeue_issued" not in ev
    else:
        assert issued == [("scontrol", "requeue", "4242")]
        assert "requeue_by_slurm" not in ev
    assert ev["attempt_end"]["requeued"] is True


def test_a_job_slurm_preempts_is_kept_from_requeue_when_the_policy_says_no(
    tmp_path: Path, signal_at_step: Any
) -> None:
    runner = slurm_of("slurm 25.11.7", PREEMPTING)
    signal_at_step(signal.SIGUSR1, 2)
    code = Sidecar(config(tmp_path, "--steps", "1000", max_requeues=0), runner).run()
    assert code == EXIT_NOT_REQUEUED
    assert ("scontrol", "update", "JobId=4242", "Requeue=0") in runner.calls
    assert not [c for c in runner.calls if c[:2] == ("scontrol", "requeue")]
    ev = events(tmp_path)
    assert ev["requeue_forbidden"]["ok"] is True
    assert "max_requeues is 0" in ev["requeue_skipped"]["why"]


@pytest.mark.parametrize(("restarts", "requeued"), [(1, True), (0, False)])
def test_scontrol_ended_by_the_requeues_own_sigterm_is_checked_by_the_restart_count(
    tmp_path: Path, signal_at_step: Any, restarts: int, requeued: bool
) -> None:
    # Seen on 25.11: the requeue's SIGTERM to the job's processes ended scontrol itself
    # (exit -15) before slurmctld's reply, though the job was requeued.
    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:2] == ("scontrol", "requeue"):
            return result(argv, -15)
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=f"JobId=4242 Restarts={restarts} PreemptTime=None\n")
        if argv == ("scontrol", "--version"):
            return result(argv, out="slurm 25.11.7\n")
        return result(argv, out="10:00\n")

    signal_at_step(signal.SIGUSR1, 2)
    code = Sidecar(config(tmp_path, "--steps", "1000"), FakeRunner(answer)).run()
    ev = events(tmp_path)
    if requeued:
        assert code == EXIT_REQUEUED
        assert "Restarts=1 shows the requeue" in ev["requeue_issued"]["seen"]
    else:
        assert code == EXIT_REQUEUE_FAILED
        assert ev["requeue_failed"]["why"] == "exit code -15"


def test_a_checkpoint_that_finds_the_disk_full_is_recorded_and_never_resumed(
    tmp_path: Path, signal_at_step: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """The requested checkpoint's write fails with the kernel's ENOSPC: the trainer dies of
    a clear CheckpointWriteError, the ledger records checkpoint_failed with the errno, the
    previous complete checkpoint stays the resume point and no partial one is left."""
    from hpclaunch.runtime import list_checkpoints, resume_point

    runner = slurm_answers(time_left="30:00")
    signal_at_step(signal.SIGUSR1, 5)
    code = Sidecar(config(tmp_path, "--steps", "1000", "--disk-full"), runner).run()
    assert code == EXIT_REQUEUED  # requeued with what was committed
    ev = events(tmp_path)
    failed = ev["checkpoint_failed"]
    assert failed["errno_name"] == "ENOSPC"
    assert failed["error"] == "No space left on device"
    assert failed["dir"] == str(tmp_path / "ckpt")
    complete = sorted(step for step, _ in list_checkpoints(tmp_path / "ckpt"))
    assert complete
    step = failed["step"]  # the first step that saw the request
    assert failed["resume_step"] == complete[-1] == 2 * ((step - 1) // 2)
    assert not [p for p in (tmp_path / "ckpt").iterdir() if p.name.startswith(".tmp-")]
    found = resume_point(tmp_path / "ckpt")
    assert found is not None
    assert found.step == complete[-1]
    end = ev["attempt_end"]
    assert end["reason"] == "preempted"
    # No checkpoint answered the request: the newest committed is the trainer's own.
    assert end["committed_step"] == complete[-1]
    assert end["steps_lost"] == step - complete[-1]  # from the resume point the failure named
    out = capfd.readouterr().out
    assert f"CheckpointWriteError: [Errno 28] checkpoint of step {step} was not written to " in out
    assert f"nothing was committed, the resume point stays step {complete[-1]} (" in out
    assert (
        f"checkpoint of step {step} failed (ENOSPC: No space left on device): the next attempt "
        f"resumes from step {complete[-1]}"
    ) in out


def test_a_trainer_that_stops_when_the_requested_checkpoint_fails_is_requeued(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """The requested checkpoint finds the disk full and the trainer stops with exit 0 (as
    examples/ddp_train.py does): that is no finished job. It was taken for one (clean-clone
    run 23: the job ended COMPLETED with its steps undone); it is requeued."""
    runner = slurm_answers(time_left="30:00")
    signal_at_step(signal.SIGUSR1, 5)
    args = ("--steps", "1000", "--disk-full", "--stop-on-failed-checkpoint")
    code = Sidecar(config(tmp_path, *args), runner).run()
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    assert ev["checkpoint_failed"]["reason"] == "preemption"
    assert ev["attempt_end"]["reason"] == "preempted"
    assert ev["attempt_end"]["requeued"] is True
    assert any(call[:2] == ("scontrol", "requeue") for call in runner.calls)


def test_a_trainer_that_saw_the_request_and_stopped_without_a_checkpoint_is_requeued(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """It saw the request through hpclaunch.runtime and exited 0 without saving: a stop for
    the request (requeued; it resumes from its last checkpoint, here the start), not a
    finished job. One that never looked (the test above) did finish."""
    runner = slurm_answers(time_left="30:00")
    signal_at_step(signal.SIGUSR1, 5)
    code = Sidecar(config(tmp_path, "--steps", "1000", "--stop-on-request"), runner).run()
    assert code == EXIT_REQUEUED
    ev = events(tmp_path)
    assert ev["attempt_end"]["reason"] == "preempted"
    assert ev["attempt_end"]["requeued"] is True


FAILED_NODE = (REPO / "tests/unit/data/cluster-25.11/scontrol_show_job_failed_node.txt").read_text()


@pytest.mark.parametrize("used", [0, 3])
def test_sigterm_after_a_node_failed_is_a_node_failure_that_counts(
    tmp_path: Path, signal_at_step: Any, used: int
) -> None:
    """Slurm SIGTERMs the batch shell of a job whose node went down with ``FailedNode`` set
    and ``Restarts`` raised (recorded on 25.11): the attempt ends ``node_failure``; with
    max_requeues (3) used up by earlier node failures, the requeued job is cancelled."""
    ledger = Ledger(tmp_path, 0)
    for _ in range(used):
        ledger.append("attempt_end", reason="node_failure", requeued=True, no_progress=False)

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=FAILED_NODE.replace("Restarts=1", f"Restarts={used + 1}"))
        return result(argv, out="30:00\n")

    runner = FakeRunner(answer)
    signal_at_step(signal.SIGTERM, 3)
    cfg = config(tmp_path, "--steps", "1000", kill_wait=4.0, max_requeues=3, attempt=used)
    code = Sidecar(cfg, runner).run()
    assert code == 143
    end = [e for e in read_ledger(tmp_path) if e["event"] == "attempt_end"][-1]
    assert end["reason"] == "node_failure"
    assert end["failed_node"] == "n2"
    assert end["requeued"] is (used < 3)
    cancels = runner.calls_to("scancel")
    if used < 3:
        assert not cancels
        assert "requeue 1 of 3" in end["why"]
    else:
        assert cancels == [("scancel", "4242")]
        assert "max_requeues (3) used up" in end["why"]
        skipped = events(tmp_path)["requeue_skipped"]
        assert (skipped["cancelled"], skipped["ok"]) == ("4242", True)


def test_a_node_failure_past_the_cap_survives_a_missing_scancel(
    tmp_path: Path, signal_at_step: Any
) -> None:
    ledger = Ledger(tmp_path, 0)
    for _ in range(3):
        ledger.append("attempt_end", reason="node_failure", requeued=True, no_progress=False)

    def answer(argv: tuple[str, ...]) -> CommandResult:
        if argv[0] == "scancel":
            raise ProgramNotFound("scancel")
        if argv[:3] == ("scontrol", "show", "job"):
            return result(argv, out=FAILED_NODE.replace("Restarts=1", "Restarts=4"))
        return result(argv, out="30:00\n")

    signal_at_step(signal.SIGTERM, 3)
    cfg = config(tmp_path, "--steps", "1000", kill_wait=4.0, max_requeues=3, attempt=3)
    assert Sidecar(cfg, FakeRunner(answer)).run() == 143
    skipped = events(tmp_path)["requeue_skipped"]
    assert skipped["ok"] is False
    assert skipped["cancel_failed"].startswith("scancel not found")
    assert events(tmp_path)["attempt_end"]["reason"] == "node_failure"


def test_the_error_line_of_a_torchrun_launch_is_the_failing_ranks() -> None:
    """Issue 27: it named what the surviving rank and torchrun said after rank 1 failed
    (recorded: torchrun 2.13, 2 CPU ranks on gloo, rank 1 raises)."""
    from hpclaunch.supervise.failures import error_line

    recorded = (REPO / "tests/supervise/data/torchrun-2.13-rank1-raises.txt").read_text()
    assert "ChildFailedError" in recorded
    assert "Connection closed by peer" in recorded
    assert error_line(recorded.splitlines()) == "ValueError: boom on rank 1"
    alone = ["Traceback (most recent call last):", "KeyError: 'lr'", "srun: error: n1: task 0"]
    assert error_line(alone) == "KeyError: 'lr'"


def test_a_cancelled_sidecar_ends_by_the_signal_as_a_plain_job(tmp_path: Path) -> None:
    """Issue 27: ``status`` showed exit 143 for a cancelled sidecar job and SIGTERM for a
    plain one. The command line now ends by the signal after its clean-up (Slurm then
    records 0:15 for both)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HPCLAUNCH_JOB_DIR=str(tmp_path))
    env.update(HPCLAUNCH_LOG_DIR=str(tmp_path), HPCLAUNCH_ATTEMPT="0", HPCLAUNCH_KILL_WAIT="2")
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "hpclaunch.supervise", "run", "--launcher=srun", "--"]
    proc = subprocess.Popen(
        [*argv, sys.executable, TRAINER, "--steps", "10000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while (control.read_step(tmp_path / "control" / jobdir.PROGRESS) or 0) < 3:
            assert time.monotonic() < deadline, "the trainer never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        proc.kill()
    end = events(tmp_path)["attempt_end"]
    assert (end["reason"], end["signal"]) == ("cancelled", "TERM")  # cleaned up first


def test_a_sigterm_ends_the_attempt_in_the_ledger_within_killwait_whatever_the_trainer_does(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """Slurm SIGKILLs the sidecar KillWait (5 s) after its SIGTERM. A trainer that neither
    answers the checkpoint request nor stops on SIGTERM used to keep the sidecar 3 s in
    the request and 3 s in the stop, past that, so its end was never written. The stop
    now gets only what is left but a second."""
    signal_at_step(signal.SIGTERM, 2)
    cfg = config(tmp_path, "--steps", "1000", "--ignore-term", "--no-checkpoint")
    cfg = dataclasses.replace(cfg, kill_wait=5.0, stop_timeout=3.0)
    Sidecar(cfg, slurm_answers()).run()
    ev = events(tmp_path)
    took = ev["attempt_end"]["time"] - ev["signal_received"]["when"]
    assert took <= 5.0 - 0.5, took
    assert ev["checkpoint_timeout"]["waited"] >= 2.5  # the trainer still had its time


def test_a_launch_that_finishes_as_the_warning_comes_is_a_success(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """The warning lands at step 18 of 20; the trainer (no checkpoint on request) finishes
    its last two steps and exits 0 before the grace is over: done, not requeued (on 22.05
    under load it was requeued and trained all its steps again)."""
    signal_at_step(signal.SIGUSR1, 18)
    runner = slurm_answers()
    cfg = config(tmp_path, "--steps", "20", "--sleep", "0.1", "--no-checkpoint")
    assert Sidecar(cfg, runner).run() == 0
    ev = events(tmp_path)
    assert ev["signal_received"]["signal"] == "USR1"
    assert ev["attempt_end"]["reason"] == "success"
    assert ev["attempt_end"]["warned"] == "preempted"
    assert not any(call[:2] == ("scontrol", "requeue") for call in runner.calls)


def test_a_command_killed_by_a_signal_exits_as_a_shell_says_it(tmp_path: Path) -> None:
    """128+N, as a shell reports a death by signal N (it exited 245 for a SIGSEGV, Python's
    sys.exit(-11); issue 45)."""
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    argv = [sys.executable, "-m", "hpclaunch.supervise", "run", "--launcher=srun"]
    argv += ["--nproc-per-node=1", "--", sys.executable, "-c", crash]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["HPCLAUNCH_JOB_DIR"] = str(tmp_path)
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 128 + signal.SIGSEGV


PELTED = """\
import os, signal, sys, threading, time
from hpclaunch.supervise.signals import SignalCatcher

sys.setswitchinterval(1e-6)  # the pelting thread runs between the waiter's bytecodes

with SignalCatcher((signal.SIGUSR1,)) as catcher:
    stop = threading.Event()

    def pelt():
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0)

    pelter = threading.Thread(target=pelt, daemon=True)
    pelter.start()
    got, end = 0, time.monotonic() + 4
    while time.monotonic() < end:
        got += catcher.wait(0.001) is not None
    stop.set()
    pelter.join()  # no signal after the handlers are gone
print(got)
"""


def test_signals_arriving_while_the_sidecar_waits_never_deadlock_it() -> None:
    """The handler set a threading.Event the main thread was waiting on: a signal in the
    instant that thread held the Event's lock hung the sidecar for good (seen once in the
    unit suite at the faked leap day). Thousands of signals against a waiting loop."""
    done = subprocess.run(
        [sys.executable, "-c", PELTED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 100


# -- expedited requeue (issue 48) -------------------------------------------------------

CLEAR = ("scontrol", "update", "JobId=4242", "Requeue=0")


@pytest.mark.parametrize(("args", "code"), [(("--fail",), 1), (("--steps", "2"), 0)])
def test_a_job_that_asked_an_expedited_requeue_clears_it_before_it_fails(
    tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    """With --requeue=expedite, Slurm requeues a job after any non-zero exit and holds it
    (job_mgr.c, 25.11.7): the sidecar clears the job's Requeue before it ends the job with
    an error, and only then; a job without the flag is left alone."""
    cfg = config(tmp_path, *args)
    assert cfg.env is not None
    expedited = dataclasses.replace(cfg, env={**cfg.env, "HPCLAUNCH_EXPEDITED_REQUEUE": "1"})
    runner = slurm_answers()
    assert Sidecar(expedited, runner).run() == code
    assert (CLEAR in runner.calls) is (code != 0)
    plain = slurm_answers()
    assert Sidecar(config(tmp_path / "plain", *args), plain).run() == code
    assert CLEAR not in plain.calls


def test_a_packed_point_that_finishes_as_the_warning_comes_still_requeues_its_task(
    tmp_path: Path, signal_at_step: Any
) -> None:
    """Issue 48: a point of a packed sweep task with points after it (HPCLAUNCH_PACK_MORE)
    is done, its task is not: the task is requeued (its next run skips the completed
    point), where an unpacked job would not be (the test above)."""
    signal_at_step(signal.SIGUSR1, 18)
    runner = slurm_answers()
    cfg = config(tmp_path, "--steps", "20", "--sleep", "0.1", "--no-checkpoint")
    assert cfg.env is not None
    cfg = dataclasses.replace(cfg, env={**cfg.env, "HPCLAUNCH_PACK_MORE": "1"})
    assert Sidecar(cfg, runner).run() == 0
    end = events(tmp_path)["attempt_end"]
    assert (end["reason"], end["requeued"], end["warned"]) == ("success", True, "preempted")
    assert ("scontrol", "requeue", "4242") in runner.calls
