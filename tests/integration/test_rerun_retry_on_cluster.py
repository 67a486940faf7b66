"""Issue 32 on the cluster: ``hpclaunch rerun`` with a changed argument, and ``retry:``: a job
failing with an exit code it names is requeued, waits out its backoff in the queue (Slurm's
``BeginTime``) and then succeeds; one failing with a code it does not name is not retried.
The retried failure is told to the job's webhook (issue 45: only the final end was)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.webhook import Webhook, webhook_server

from .conftest import HPCLAUNCH, Run, squeue, wait_state

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

PYTHON = str(Path(sys.executable))
#: Fails with exit code $FAIL_CODE on the job's first attempt, succeeds after.
FAIL_ONCE = (
    "import os, sys\n"
    "attempt = int(os.environ['HPCLAUNCH_ATTEMPT'])\n"
    "print(f'attempt {attempt}', flush=True)\n"
    "sys.exit(int(os.environ['FAIL_CODE']) if attempt == 0 else 0)\n"
)


def _ledger(run: Run, job_id: str) -> list[dict[str, object]]:
    events = run("events", job_id, "--json")
    assert events.returncode == 0, events.stderr
    ledger = json.loads(events.stdout)["ledger"]
    assert isinstance(ledger, list)
    return ledger


def test_a_rerun_with_a_changed_argument_runs_the_jobs_spec_from_its_directory(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    script = shared_dir / "show.py"
    script.write_text(f"#!{PYTHON}\nimport sys\nprint('arg=' + sys.argv[1])\n")
    script.chmod(0o755)
    # Submitted from the script's directory, with relative paths; rerun from elsewhere.
    spec = write_spec(script="./show.py", args=["first"])
    first = subprocess.run(
        [HPCLAUNCH, "--site", "local", "submit", str(spec), "--wait", "--timeout", "90"],
        cwd=shared_dir,
        env=hpclaunch.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip()
    spec.write_text("name: edited-since\ncommand: ['false']\n")  # the rerun does not read it
    again = hpclaunch("rerun", first_id, "--set", "args=[second]", "--wait", "--timeout", "90")
    assert again.returncode == 0, again.stderr
    second_id = again.stdout.strip()
    assert f"rerun of job {first_id}" in again.stderr
    assert "arg=first" in hpclaunch.log(first_id)
    assert "arg=second" in hpclaunch.log(second_id)
    rows = hpclaunch.submitted()
    assert rows[second_id]["rerun_of"] == first_id
    assert rows[second_id]["name"] == rows[first_id]["name"]
    assert rows[second_id]["spec_hash"] != rows[first_id]["spec_hash"]
    listed = hpclaunch("history")
    line = next(x for x in listed.stdout.splitlines() if x.startswith(second_id))
    assert line.rstrip().endswith(first_id)


@pytest.fixture
def hook() -> Iterator[Webhook]:
    with webhook_server() as server:
        yield server


def test_a_named_exit_code_is_retried_after_its_backoff_and_an_unnamed_one_is_not(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path, hook: Webhook
) -> None:
    hpclaunch.env["XDG_CONFIG_HOME"] = str(shared_dir / "config")
    saved = hpclaunch("notify", "add", "lab", input_text=hook.url + "\n")
    assert saved.returncode == 0, saved.stderr
    script = shared_dir / "fail_once.py"
    script.write_text(FAIL_ONCE)
    retry = {"times": 2, "when": [{"exit_code": [3]}], "backoff": 20}
    named = write_spec(
        command=[PYTHON, str(script)],
        launcher="srun",
        env={"FAIL_CODE": "3"},
        retry=retry,
        notify={"webhook": "lab", "events": ["failed", "completed"]},
    )
    other = write_spec(
        command=[PYTHON, str(script)],
        launcher="srun",
        env={"FAIL_CODE": "4"},
        retry=retry,
    )
    retried = hpclaunch("submit", str(named))
    not_retried = hpclaunch("submit", str(other))
    assert retried.returncode == 0, retried.stderr
    assert not_retried.returncode == 0, not_retried.stderr
    job, plain = retried.stdout.strip(), not_retried.stdout.strip()
    # Requeued by the sidecar, the job waits out its backoff in the queue, and says why.
    waiting = wait_state(hpclaunch, job, {"PENDING"}, timeout=90)
    while not waiting.get("restarts"):
        waiting = wait_state(hpclaunch, job, {"PENDING"}, timeout=60)
    assert squeue(job, "%r") == "BeginTime"
    status = hpclaunch("status", job)
    assert f"job {job}: retried: user_error (exit code 3): retry 1 of 2 in 20 s" in status.stdout
    done = wait_state(hpclaunch, job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=120)
    assert done["state"] == "COMPLETED", done
    ledger = _ledger(hpclaunch, job)
    ends = [e for e in ledger if e["event"] == "attempt_end"]
    assert [(e["reason"], e["exit_code"], e.get("retry")) for e in ends] == [
        ("user_error", 3, 1),
        ("success", 0, None),
    ]
    scheduled = [e for e in ledger if e["event"] == "retry_scheduled"]
    assert len(scheduled) == 1
    assert "delay_failed" not in scheduled[0]
    second_start = next(e for e in ledger if e["event"] == "attempt_start" and e["attempt"] == 1)
    # StartTime=now+20 (Slurm's now: whole seconds, so up to 1 s before ours) is kept: the
    # next attempt starts after it, later than Slurm's own requeue delay (11 s here) would.
    at = float(scheduled[0]["at"])  # type: ignore[arg-type]
    started_at = float(second_start["time"])  # type: ignore[arg-type]
    assert started_at >= at - 1.0, f"started {at - started_at:.1f} s before its start time"
    assert started_at - float(ends[0]["time"]) > 15  # type: ignore[arg-type]
    events = hpclaunch("events", job)
    assert "retry_scheduled" in events.stdout
    # Told of the failure it retries, then of the end (issue 45: only the end was told).
    deadline = time.monotonic() + 30
    while len(hook.of_job(job)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    told = [(b["hpclaunch"]["event"], b["text"]) for b in hook.of_job(job)]
    assert [event for event, _ in told] == ["failed", "completed"], told
    assert "failed (user_error, exit code 3)" in told[0][1], told
    assert "retry 1 starts in 20 s (its retry: policy)" in told[0][1], told
    report = hpclaunch("report", job)  # names what the policy did (issue 45)
    assert report.returncode == 0, report.stderr
    assert "  - attempt 0: user_error (exit code 3): retry 1 of 2 in 20 s" in report.stdout
    # The exit code the policy does not name: one attempt, the job FAILED with its code.
    end = wait_state(hpclaunch, plain, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=90)
    assert (end["state"], end["exit_code"], end["restarts"]) == ("FAILED", 4, 0), end
    plain_ledger = _ledger(hpclaunch, plain)
    assert not [e for e in plain_ledger if str(e["event"]).startswith("retry")]
