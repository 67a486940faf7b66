"""The daily commands on the real local cluster: status/ls columns, logs -f, cancel,
events, idempotent submit, and a machine without Slurm."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import HPCLAUNCH, REPO, Run, job_status, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

WriteSpec = Callable[..., Path]
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}


def submit(run: Run, spec: Path, *args: str) -> str:
    result = run("submit", str(spec), *args)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip()
    assert job_id.isdigit(), result.stdout
    return job_id


# Exclusive: both jobs must be in-quota (research's 8 GPUs free enough), which other tests'
# GPU jobs running beside it could change.
@pytest.mark.exclusive
def test_status_columns_for_a_one_gpu_and_a_two_node_job(
    hpclaunch: Run, write_spec: WriteSpec
) -> None:
    # Both run until the table is read (a fixed sleep 3 once ended the first job while the
    # second still waited for its nodes: clean-clone run 21), at most 2 minutes.
    release = Path.home() / ".hpclaunch-it" / f"release-{uuid.uuid4().hex[:8]}"
    release.parent.mkdir(parents=True, exist_ok=True)
    hold = f"for i in $(seq 1200); do [ -e {release} ] && break; sleep 0.1; done"
    one = write_spec(
        command=["bash", "-c", f"echo gpus=$CUDA_VISIBLE_DEVICES; {hold}"],
        resources={"gpus_per_node": 1, "time": "00:05:00", "mem": "100M"},
    )
    two = write_spec(
        command=["bash", "-c", f"echo on $(hostname); {hold}"],
        launcher="srun",
        tier="high",
        resources={"nodes": 2, "gpus_per_node": 1, "time": "00:05:00", "mem": "100M"},
    )
    one_id, two_id = submit(hpclaunch, one), submit(hpclaunch, two)
    try:
        for job_id in (one_id, two_id):
            wait_state(hpclaunch, job_id, {"RUNNING"} | FINAL)
        table = hpclaunch("ls", one_id, two_id)
    finally:
        release.touch()
    assert table.returncode == 0, table.stderr
    assert re.search(
        rf"^ *{one_id}\s+{one.stem}\s+medium\s+in-quota\s+normal\s+RUNNING\s+n\d\s+1\s+\S+\s+0\s*$",
        table.stdout,
        re.M,
    ), table.stdout
    assert re.search(
        rf"^ *{two_id}\s+{two.stem}\s+high\s+in-quota\s+high\s+RUNNING\s+n\[\d-\d\]"
        rf"\s+2\s+\S+\s+0\s*$",
        table.stdout,
        re.M,
    ), table.stdout
    for job_id in (one_id, two_id):
        done = wait_state(hpclaunch, job_id, FINAL)
        assert (done["state"], done["exit_code"], done["restarts"]) == ("COMPLETED", 0, 0)
    release.unlink()
    infos = {i["job_id"]: i for i in json.loads(hpclaunch("status", "--json").stdout)}
    assert (infos[one_id]["gpus"], infos[one_id]["tier"], infos[one_id]["qos"]) == (
        1,
        "medium",
        "normal",
    )
    assert (infos[two_id]["gpus"], infos[two_id]["node_count"], infos[two_id]["tier"]) == (
        2,
        2,
        "high",
    )


def test_logs_follow_shows_lines_while_the_job_runs(hpclaunch: Run, write_spec: WriteSpec) -> None:
    # The job ends once the test has seen it RUNNING (a fixed "sleep 3" had ended it before
    # the status call on the side host under load: clean-clone run 24), at most 2 minutes.
    release = Path.home() / ".hpclaunch-it" / f"release-{uuid.uuid4().hex[:8]}"
    release.parent.mkdir(parents=True, exist_ok=True)
    hold = f"for i in $(seq 1200); do [ -e {release} ] && break; sleep 0.1; done"
    spec = write_spec(command=["bash", "-c", f"echo first line; {hold}; echo last line"])
    job_id = submit(hpclaunch, spec)
    follow = subprocess.Popen(
        [HPCLAUNCH, "--site", "local", "logs", "-f", job_id, "--timeout", "60"],
        cwd=REPO,
        env=hpclaunch.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        lines = []
        while not lines or "first line" not in lines[-1]:
            line = follow.stdout.readline()
            assert line, f"logs -f ended before the first line: {lines}"
            lines.append(line)
        assert job_status(hpclaunch, job_id)["state"] == "RUNNING", "seen live, not afterwards"
        release.touch()
        rest, errors = follow.communicate(timeout=60)
    finally:
        release.touch()
        follow.kill()
        release.unlink(missing_ok=True)
    assert follow.returncode == 0, errors
    assert "last line\n" in rest
    assert f"{job_id}: COMPLETED" in errors
    assert "==> attempt 0 <==" in errors
    # Without -f: the whole log at once.
    assert "first line\nlast line\n" in hpclaunch("logs", job_id).stdout


def test_logs_of_a_job_hpclaunch_did_not_submit(hpclaunch: Run) -> None:
    result = hpclaunch("logs", "999999")
    assert result.returncode == 1
    assert "Error: job 999999 is not in the hpclaunch history" in result.stderr
    assert "Traceback" not in result.stderr


def test_cancel_by_id_by_name_and_all(hpclaunch: Run, write_spec: WriteSpec) -> None:
    # Every one is cancelled: they must still run then. With "sleep 5" the first one had
    # ended on a busy machine by the time the fourth was submitted (a clean-clone run).
    sleeper = {"command": ["sleep", "240"]}
    by_id, by_name = write_spec(**sleeper), write_spec(**sleeper)
    all_a, all_b = write_spec(**sleeper), write_spec(**sleeper)
    ids = {spec: submit(hpclaunch, spec) for spec in (by_id, by_name, all_a, all_b)}

    result = hpclaunch("cancel", ids[by_id])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{ids[by_id]}: cancelled ({by_id.stem}, was ")
    again = hpclaunch("cancel", ids[by_id])
    assert again.returncode == 0
    assert f"{ids[by_id]}: already finished" in again.stdout or "cancelled" in again.stdout

    result = hpclaunch("cancel", "--name", by_name.stem)
    assert result.returncode == 0, result.stderr
    assert f"{ids[by_name]}: cancelled ({by_name.stem}" in result.stdout

    result = hpclaunch("cancel", "--all", "--yes")
    assert result.returncode == 0, result.stderr
    assert f"{ids[all_a]}: cancelled" in result.stdout
    assert f"{ids[all_b]}: cancelled" in result.stdout
    for job_id in ids.values():
        assert wait_state(hpclaunch, job_id, FINAL)["state"] == "CANCELLED"
    nothing = hpclaunch("cancel", "--all", "--yes")
    assert "nothing to cancel" in nothing.stderr


def test_submit_twice_with_one_submission_id_makes_one_job(
    hpclaunch: Run, write_spec: WriteSpec
) -> None:
    spec = write_spec(command=["true"])
    sid = f"it-retry-{spec.stem}"
    first = submit(hpclaunch, spec, "--submission-id", sid)
    hpclaunch.history.unlink()  # as if the first try died before recording the job
    second = hpclaunch("submit", str(spec), "--submission-id", sid)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == first
    assert "not submitted again" in second.stderr
    queued = subprocess.run(
        ["squeue", "-h", "--states=all", "--name", spec.stem, "-o", "%i|%k"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert queued.stdout.split() == [f"{first}|hpclaunch:{sid}"]


def test_events_lists_the_attempts(hpclaunch: Run, write_spec: WriteSpec) -> None:
    spec = write_spec(command=["bash", "-c", "exit 4"])
    result = hpclaunch("submit", str(spec), "--wait", "--timeout", "60")
    job_id = result.stdout.strip()
    # slurmdbd may lag the controller by a moment.
    deadline = time.monotonic() + 10
    while True:
        events = json.loads(hpclaunch("events", job_id, "--json").stdout)
        if events["attempts"] and events["attempts"][-1]["state"] == "FAILED":
            break
        assert time.monotonic() < deadline, events
        time.sleep(0.2)
    assert events["submission"]["name"] == spec.stem
    assert events["attempts"][-1]["exit_code"] == 4
    text = hpclaunch("events", job_id).stdout
    assert "attempt 0: FAILED exit 4" in text
    # launcher none: no sidecar, no events.jsonl, and events says why (not "not started")
    assert "runs without the sidecar (launcher: none)" in text
    assert "no sidecar ledger" not in text
    table = hpclaunch("status", job_id).stdout
    assert re.search(
        rf"{job_id}\s+{spec.stem}\s+medium\s+in-quota\s+normal\s+FAILED\s.*\s4\s*$", table, re.M
    )


def test_without_slurm_on_path_the_cli_names_the_missing_command(hpclaunch: Run) -> None:
    # The cli backend's error (pyslurm runs no commands: it needs none on PATH).
    env = {**hpclaunch.env, "PATH": str(Path(HPCLAUNCH).parent), "HPCLAUNCH_BACKEND": "cli"}
    result = subprocess.run(
        [HPCLAUNCH, "--site", "local", "status", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "Error: Slurm's 'squeue' command is not found on this machine" in result.stderr
    assert "Hint: run hpclaunch on the cluster's login node" in result.stderr
    assert "Traceback" not in result.stderr
    assert os.path.exists(HPCLAUNCH)


def test_status_of_pending_array_tasks_by_their_task_ids(hpclaunch: Run) -> None:
    """squeue folds pending array tasks into one "123_[1,3]" line unless asked with --array:
    each task must still be found by its own id."""
    array = subprocess.run(
        [
            *("sbatch", "--parsable", "--hold", "--array=0-3", "-t", "1", "--mem=50M"),
            *("--output=/dev/null", "--wrap", "true"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        result = hpclaunch("status", f"{array}_1", f"{array}_3", "--json")
        assert result.returncode == 0, result.stderr
        states = {
            info["job_id"]: (info["state"], info["reason"]) for info in json.loads(result.stdout)
        }
        assert states == {
            f"{array}_1": ("PENDING", "JobHeldUser"),
            f"{array}_3": ("PENDING", "JobHeldUser"),
        }
    finally:
        subprocess.run(["scancel", array], check=False)


def test_a_job_slurm_ended_shows_why_in_logs_and_status(
    hpclaunch: Run, write_spec: WriteSpec
) -> None:
    # time: 1 minute (the shortest); the job sleeps past it and Slurm ends it (TIMEOUT).
    over = write_spec(
        command=["bash", "-c", "echo started; sleep 300"], resources={"time": 1, "mem": "100M"}
    )
    over_id = submit(hpclaunch, over)
    # A job waiting for it, cancelled before it ever runs.
    never = write_spec(
        command=["true"],
        resources={"time": 1, "mem": "100M"},
        dependencies=[{"job": over_id, "type": "afterok"}],
    )
    never_id = submit(hpclaunch, never)
    wait_state(hpclaunch, never_id, {"PENDING"})
    cancelled = hpclaunch("cancel", never_id)
    assert cancelled.returncode == 0, cancelled.stderr

    info = wait_state(hpclaunch, over_id, {"TIMEOUT"}, timeout=150)
    deadline = time.monotonic() + 30
    while info["exit_signal"] is None:  # sacct has the batch step once slurmdbd wrote it
        assert time.monotonic() < deadline, info
        time.sleep(0.5)
        info = job_status(hpclaunch, over_id)
    assert (info["exit_code"], info["exit_signal"]) == (0, 15), info  # SIGTERM, not "0"
    logs = hpclaunch("logs", over_id)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines()[1] == "started"
    assert re.search(
        rf"\*\*\* JOB {over_id} ON n\d CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*$", logs.stdout
    ), logs.stdout
    assert f"==> slurm-{over_id}.out (Slurm's own messages) <==" in logs.stderr

    table = hpclaunch("status", over_id, never_id)
    assert table.returncode == 0, table.stderr
    assert re.search(rf"^ *{over_id} .*\bTIMEOUT\b.*\bSIGTERM\s*$", table.stdout, re.M), (
        table.stdout
    )
    row = re.search(rf"^ *{never_id} .*$", table.stdout, re.M)
    assert row is not None, table.stdout
    assert "CANCELLED" in row.group(0)
    assert row.group(0).rstrip().endswith("never ran"), table.stdout
    assert "Dependency" not in row.group(0)  # no stale reason on a finished job


def test_ctrl_c_in_submit_follow_leaves_the_job_and_says_how_to_cancel(
    hpclaunch: Run, write_spec: WriteSpec
) -> None:
    import signal

    spec = write_spec(command=["bash", "-c", "echo up; sleep 120"])
    proc = subprocess.Popen(
        [HPCLAUNCH, "--site", hpclaunch.site, "submit", str(spec), "--follow"],
        cwd=REPO,
        env=hpclaunch.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As in a terminal: a suite started in the background (`cmd &` in a script) has
        # SIGINT ignored, which children inherit and Python then keeps ignoring.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    try:
        job_id = proc.stdout.readline().strip()  # the id comes first, then the log
        assert job_id.isdigit(), job_id
        assert proc.stdout.readline().startswith("hpclaunch: job")  # the attempt's first line
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:  # a failure must not leave it running for a later test's garbage collection
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert f"job {job_id} is still in Slurm (only the following stopped)" in err
    assert f"hpclaunch cancel {job_id}" in err
    assert "Traceback" not in err
    assert job_status(hpclaunch, job_id)["state"] == "RUNNING"


def test_submit_follow_ends_with_slurms_own_lines(hpclaunch: Run, write_spec: WriteSpec) -> None:
    """Issue 27: ``submit --follow`` never showed what Slurm itself wrote for the job
    (here slurmstepd's "couldn't chdir": the start directory is gone when the job starts),
    which ``logs`` shows; it now ends with them as ``logs -f`` does."""
    workdir = Path.home() / ".hpclaunch-it" / f"gone-{os.getpid()}-{time.monotonic_ns()}"
    workdir.mkdir(parents=True)
    spec = write_spec(
        command=["bash", "-c", "echo ran in $PWD"],
        workdir=str(workdir),
        sbatch_extra={"--hold": None},
    )
    proc = subprocess.Popen(
        [HPCLAUNCH, "--site", hpclaunch.site, "submit", str(spec), "--follow", "--timeout", "90"],
        cwd=REPO,
        env=hpclaunch.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        job_id = proc.stdout.readline().strip()
        assert job_id.isdigit(), job_id
        workdir.rmdir()
        subprocess.run(["scontrol", "release", job_id], check=True)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    slurm_said = hpclaunch("logs", job_id)
    assert f"==> slurm-{job_id}.out (Slurm's own messages) <==" in slurm_said.stderr
    chdir = [x for x in slurm_said.stdout.splitlines() if "couldn't chdir" in x]
    assert chdir, slurm_said.stdout  # 25.11 writes it twice, slurmd's and slurmstepd's
    assert f"==> slurm-{job_id}.out (Slurm's own messages) <==" in err, err
    assert out.rstrip().endswith(chdir[-1]), out
