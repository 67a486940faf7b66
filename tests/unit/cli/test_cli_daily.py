"""The daily commands (status/ls, logs, cancel, events, completion, submit retries) through
click's CliRunner, against the fake Slurm of conftest.py behind the real CliBackend."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpclaunch import jobdir
from hpclaunch.cli import cli
from hpclaunch.planning.script_start import EXIT_NO_WORKDIR
from hpclaunch.store.history import history_path
from hpclaunch.transport.base import CommandResult
from tests.unit.conftest import HELLO, Env, assert_clean_error, remember, run
from tests.unit.fakes import FakeJob, FakeSlurm

# -- status / ls ------------------------------------------------------------------------


def test_ls_is_status_with_tier_from_the_history(env: Env, slurm: FakeSlurm) -> None:
    run(env, "submit", HELLO)
    slurm.jobs["1000"].qos = "low"  # the history's tier wins over the QOS mapping
    data = json.loads(run(env, "ls", "--json").stdout)
    assert [(d["job_id"], d["tier"], d["qos"], d["gpus"]) for d in data] == [
        ("1000", "medium", "low", 0)
    ]


def test_status_polls_once_for_many_jobs(env: Env, slurm: FakeSlurm) -> None:
    for i in range(1, 51):
        slurm.jobs[str(i)] = FakeJob(f"j{i}", ["COMPLETED"], in_squeue=i % 2 == 0)
    calls: list[str] = []
    original = FakeSlurm.__call__

    def counting(self: FakeSlurm, argv: tuple[str, ...]) -> CommandResult:
        calls.append(argv[0])
        return original(self, argv)

    pytest.MonkeyPatch().setattr(FakeSlurm, "__call__", counting)
    try:
        result_ = run(env, "status", *map(str, range(1, 51)))
    finally:
        pytest.MonkeyPatch().setattr(FakeSlurm, "__call__", original)
    assert result_.exit_code == 0, result_.output
    assert calls == ["squeue", "sacct"]


# -- logs ---------------------------------------------------------------------------------


def test_logs_prints_every_attempt_with_headers(env: Env, tmp_path: Path) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "attempt-0.log").write_text("first try\npreempted\n")
    (logs / "attempt-1.log").write_text("resumed\nno newline yet")
    remember(env, "42", logs)
    out = run(env, "logs", "42")
    assert out.exit_code == 0, out.output
    assert out.stdout == "first try\npreempted\nresumed\nno newline yet\n"
    assert out.stderr == "==> attempt 0 <==\n==> attempt 1 <==\n"
    one = run(env, "logs", "42", "--attempt", "1")
    assert one.stdout == "resumed\nno newline yet\n"


def test_logs_end_with_what_slurm_wrote_and_a_missing_attempt_is_an_error(
    env: Env, tmp_path: Path
) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "attempt-0.log").write_text("step 1\n")
    # A line slurmstepd 22.05 wrote in the local cluster's slurm-65.out at a time limit.
    killed = (
        "slurmstepd-n1: error: *** JOB 42 ON n1 CANCELLED AT 2026-11-24T18:03:30 DUE TO TIME "
        "LIMIT ***"
    )
    (tmp_path / "job" / "slurm-42.out").write_text(killed + "\n")
    remember(env, "42", logs)
    out = run(env, "logs", "42")
    assert out.exit_code == 0, out.output
    assert out.stdout == f"step 1\n{killed}\n"
    assert out.stderr == "==> attempt 0 <==\n==> slurm-42.out (Slurm's own messages) <==\n"
    missing = run(env, "logs", "42", "--attempt", "3")
    assert missing.exit_code == 1
    assert "Error: job 42 has no attempt 3: its attempts with a log are 0 (in " in missing.stderr
    assert "Hint: 'hpclaunch logs 42 --attempt 0' shows the newest" in missing.stderr


def test_logs_of_a_sweeps_array_id_names_its_tasks(env: Env, tmp_path: Path) -> None:
    from hpclaunch.store.sweeps import SweepArray, SweepRecord, save_sweep

    sweep = SweepRecord(
        sweep_id="abcd1234",
        name="s",
        site="hpclaunch",
        job_dir=str(tmp_path),
        log_dir=str(tmp_path),
        params_file=str(tmp_path / "p.jsonl"),
        points=3,
        submitted_at="2026-11-24T00:00:00+00:00",
        tier="low",
        qos="low",
        arrays=(SweepArray("77", 0, 3),),
    )
    save_sweep(sweep, Path(env["XDG_STATE_HOME"]) / "hpclaunch" / "sweeps")
    out = run(env, "logs", "77")
    assert out.exit_code == 1, out.output
    assert "job 77 is an array of sweep abcd1234 (3 tasks)" in out.stderr
    assert "use 77_<task>, e.g. 'hpclaunch logs 77_0'" in out.stderr


def test_logs_follow_prints_until_the_job_ends(
    env: Env,
    slurm: FakeSlurm,
    tmp_path: Path,
) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "attempt-0.log").write_text("attempt zero\n")
    remember(env, "7", logs)
    slurm.jobs["7"] = FakeJob("j", ["RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"])
    original = slurm._squeue

    def squeue_and_write(argv: tuple[str, ...]) -> CommandResult:
        if slurm.jobs["7"].state == "RUNNING" and (logs / "attempt-0.log").exists():
            (logs / "attempt-1.log").write_text("attempt one\n")
        return original(argv)

    slurm._squeue = squeue_and_write  # type: ignore[method-assign]
    out = run(env, "logs", "-f", "7")
    assert out.exit_code == 0, out.output
    assert out.stdout == "attempt zero\nattempt one\n"
    assert "7: REQUEUED\n7: PENDING\n7: RUNNING\n7: COMPLETED\n" in out.stderr


def test_logs_follow_of_a_failed_job_exits_1(
    env: Env,
    slurm: FakeSlurm,
    tmp_path: Path,
) -> None:
    remember(env, "8", tmp_path / "none")
    slurm.jobs["8"] = FakeJob("j", ["FAILED"], exit_code="3:0")
    out = run(env, "logs", "-f", "8")
    assert out.exit_code == 1
    assert "job 8 ended FAILED, exit code 3" in out.stderr


def test_logs_of_a_job_not_in_the_history(env: Env) -> None:
    out = run(env, "logs", "99")
    assert_clean_error(out, 1, "job 99 is not in the hpclaunch history")
    assert "scontrol show job 99" in out.stderr


# -- cancel -------------------------------------------------------------------------------


def test_cancel_by_id_is_idempotent(env: Env, slurm: FakeSlurm) -> None:
    slurm.jobs["5"] = FakeJob("five", ["RUNNING"])
    first = run(env, "cancel", "5")
    assert first.exit_code == 0, first.output
    assert first.stdout == "5: cancelled (five, was RUNNING)\n"
    again = run(env, "cancel", "5")
    assert again.exit_code == 0
    assert again.stdout == "5: already finished (CANCELLED, exit code 0)\n"


def test_cancel_unknown_id_exits_1(env: Env, slurm: FakeSlurm) -> None:
    out = run(env, "cancel", "404")
    assert out.exit_code == 1
    assert "404: not found" in out.stderr


def test_cancel_by_name_matches_exactly(env: Env, slurm: FakeSlurm) -> None:
    slurm.jobs["1"] = FakeJob("train 'a'", ["RUNNING"])
    slurm.jobs["2"] = FakeJob("train", ["PENDING"])
    out = run(env, "cancel", "--name", "train 'a'")
    assert out.exit_code == 0, out.output
    assert out.stdout == "1: cancelled (train 'a', was RUNNING)\n"
    assert slurm.jobs["2"].state == "PENDING"
    none = run(env, "cancel", "--name", "nope")
    assert none.exit_code == 0
    assert "no unfinished job of yours is named 'nope'" in none.stderr


def test_cancel_all_asks_first(env: Env, slurm: FakeSlurm, tmp_path: Path) -> None:
    for job_id, states in (("1", ["RUNNING"]), ("2", ["COMPLETED"]), ("3", ["PENDING"])):
        slurm.jobs[job_id] = FakeJob(f"j{job_id}", states)
        remember(env, job_id, tmp_path)
    refused = CliRunner().invoke(cli, ["cancel", "--all"], env=env, input="n\n")
    assert refused.exit_code == 1
    assert "Cancel these 2 jobs?" in refused.stderr
    assert slurm.jobs["1"].state == "RUNNING"
    out = run(env, "cancel", "--all", "--yes")
    assert out.exit_code == 0, out.output
    assert out.stdout == "1: cancelled (j1, was RUNNING)\n3: cancelled (j3, was PENDING)\n"
    assert slurm.jobs["3"].state == "CANCELLED"


def test_cancel_needs_something_to_cancel(env: Env) -> None:
    out = run(env, "cancel")
    assert out.exit_code == 2
    assert "name the jobs" in out.stderr


# -- events -------------------------------------------------------------------------------


def test_events_shows_the_record_and_the_attempts(
    env: Env,
    slurm: FakeSlurm,
    tmp_path: Path,
) -> None:
    remember(env, "9", tmp_path / "logs", name="trainer")  # job dir: tmp_path

    slurm.attempt_lines["9"] = (
        "9|PREEMPTED|0:0|s|st|e|00:00:01|n1|None|||||\n9|RUNNING|0:0|s|st|Unknown|0:02|n2||||||\n"
    )
    out = run(env, "events", "9")
    assert out.exit_code == 0, out.output
    assert "job 9 'trainer'" in out.stdout
    # Slurm's 0:0 of an attempt it ended says nothing (issue 27: "PREEMPTED exit 0" beside
    # a ledger with 137): the launch's exit is attempt_end's launch_exit.
    assert "attempt 0: PREEMPTED  start s" in out.stdout
    assert "attempt 1: RUNNING  start st" in out.stdout
    assert "no sidecar ledger" in out.stdout
    data = json.loads(run(env, "events", "9", "--json").stdout)
    assert [a["state"] for a in data["attempts"]] == ["PREEMPTED", "RUNNING"]
    assert data["submission"]["name"] == "trainer"
    assert data["ledger"] is None
    # The sidecar's ledger, in the job directory, is merged in by attempt.
    from hpclaunch.supervise.ledger import Ledger

    Ledger(tmp_path, 0).append("signal_received", signal="USR1")
    Ledger(tmp_path, 0).append(
        "attempt_end", reason="preempted", exit_code=137, requeued=True, steps_lost=0
    )
    Ledger(tmp_path, 1).append("attempt_start", nodes=["n2"])
    merged = run(env, "events", "9")
    assert merged.exit_code == 0, merged.output
    lines = merged.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "attempt 0: PREEMPTED" in line)
    assert "signal_received signal=USR1" in lines[first + 1]
    assert (
        "attempt_end reason=preempted launch_exit=137 requeued=True steps_lost=0"
        in (lines[first + 2])
    )
    assert "attempt 1: RUNNING" in lines[first + 3]
    assert "attempt_start nodes=['n2']" in lines[first + 4]
    assert "no sidecar ledger" not in merged.stdout
    data = json.loads(run(env, "events", "9", "--json").stdout)
    kinds = [e["event"] for e in data["ledger"]]
    assert kinds == ["signal_received", "attempt_end", "attempt_start"]


def test_events_of_an_unknown_job(env: Env, slurm: FakeSlurm) -> None:
    assert_clean_error(run(env, "events", "404"), 1, "neither in the hpclaunch history")


# -- completion -------------------------------------------------------------------------


def test_completion_script_and_job_ids_from_the_history(env: Env, tmp_path: Path) -> None:
    script = run(env, "completion", "bash")
    assert script.exit_code == 0
    assert "_HPCLAUNCH_COMPLETE=bash_complete" in script.stdout
    remember(env, "123", tmp_path, name="a")
    remember(env, "456", tmp_path, name="b")
    complete = {
        **env,
        "_HPCLAUNCH_COMPLETE": "bash_complete",
        "COMP_WORDS": "hpclaunch logs 4",
        "COMP_CWORD": "2",
    }
    out = CliRunner().invoke(cli, [], env=complete, prog_name="hpclaunch")
    assert out.stdout.split() == ["plain,456"]


# -- submit retries -------------------------------------------------------------------------


def test_submit_with_the_same_submission_id_twice_makes_one_job(
    env: Env,
    slurm: FakeSlurm,
) -> None:
    first = run(env, "submit", "--submission-id", "nightly-7", HELLO)
    assert (first.exit_code, first.stdout) == (0, "1000\n")
    history_path(env).unlink()  # even when the history lost it, Slurm's tag finds the job
    second = run(env, "submit", "--submission-id", "nightly-7", HELLO)
    assert (second.exit_code, second.stdout) == (0, "1000\n")
    assert "already carries submission id nightly-7: not submitted again" in second.stderr
    assert len(slurm.submitted) == 1
    assert slurm.jobs["1000"].comment == "hpclaunch:nightly-7"  # found by squeue's %k


def test_a_submission_id_reused_for_a_changed_spec_exits_1_unless_forced(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\ncommand: ['true']\nresources: {time: 5}\n")
    assert run(env, "submit", "--submission-id", "n-1", str(spec)).stdout == "1000\n"
    # The same spec, laid out differently: the same job, as before.
    spec.write_text("name: j\nresources:\n  time: 5\ncommand: ['true']\n")
    same = run(env, "submit", "--submission-id", "n-1", str(spec))
    assert (same.exit_code, same.stdout) == (0, "1000\n")
    spec.write_text("name: j\ncommand: ['true']\nresources: {time: 9}\n")
    changed = run(env, "submit", "--submission-id", "n-1", str(spec))
    assert changed.exit_code == 1, changed.output
    assert changed.stdout == ""
    assert "Error: submission id n-1 already names job 1000, submitted from a different spec" in (
        changed.stderr
    )
    assert "--force" in changed.stderr
    forced = run(env, "submit", "--submission-id", "n-1", "--force", str(spec))
    assert (forced.exit_code, forced.stdout) == (0, "1000\n")
    assert "Warning: submission id n-1" in forced.stderr
    assert len(slurm.submitted) == 1  # never a second job


def test_bad_submission_id_is_a_config_error(env: Env, slurm: FakeSlurm) -> None:
    assert_clean_error(
        run(env, "submit", "--submission-id", "a b", HELLO), 2, "invalid submission id"
    )


# -- no Slurm here ------------------------------------------------------------------------


def test_without_slurm_on_path_the_error_names_the_command(env: Env, tmp_path: Path) -> None:
    env = {**env, "HPCLAUNCH_BACKEND": "cli", "PATH": str(tmp_path / "empty")}
    saved = os.environ.get("PATH")
    try:  # LocalRunner looks programs up in this process's PATH
        os.environ["PATH"] = env["PATH"]
        out = run(env, "status", "1")
    finally:
        os.environ["PATH"] = saved or ""
    assert_clean_error(out, 1, "Slurm's 'squeue' command is not found on this machine")
    assert "login node" in out.stderr
    assert "--site" in out.stderr


def test_a_plain_job_says_it_has_no_sidecar_in_events_and_top(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    # job dir = tmp_path: a launcher-none script, as templates/command.sh.j2 renders it
    (tmp_path / "job.sbatch").write_text("#!/bin/bash\nexec bash -c 'echo hi'\n")
    remember(env, "12", logs)
    events = run(env, "events", "12")
    assert "runs without the sidecar (launcher: none)" in events.stdout
    assert "not started" not in events.stdout
    assert "submitted 20" in events.stdout  # local ISO, no "+00:00"
    assert "+00:00" not in events.stdout
    top = run(env, "top", "12")
    assert top.exit_code == 0, top.output
    assert "GPU monitoring needs a launcher" in top.stdout
    # With the sidecar, no ledger yet means the job has not started.
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\nexec /v/bin/python -m hpclaunch.supervise run --launcher=srun -- x\n"
    )
    events = run(env, "events", "12")
    assert "no sidecar ledger (events.jsonl) yet: the job has not started" in events.stdout
    assert "no sample is due yet" in run(env, "top", "12").stdout


def test_status_gives_the_scripts_own_reason_when_the_node_lacked_the_workdir(
    env: Env, slurm: FakeSlurm, tmp_path: Path
) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    why = "the node n3 has no directory /tmp/mine (the job's workdir; ...)"
    (logs / jobdir.START_FAILURE).write_text(why + "\n")
    remember(env, "77", logs)
    slurm.jobs["77"] = FakeJob("job", ["FAILED"], exit_code=f"{EXIT_NO_WORKDIR}:0")
    data = json.loads(run(env, "status", "77", "--json").stdout)
    assert (data[0]["state"], data[0]["reason"]) == ("FAILED", why)
    # Another exit code: the file is not the reason (nothing else is read).
    slurm.jobs["77"] = FakeJob("job", ["FAILED"], exit_code="1:0")
    data = json.loads(run(env, "status", "77", "--json").stdout)
    assert data[0]["reason"] != why
