"""Issue 45 on the cluster: what a new user hit with job ids and retries.

- an unknown id raises ``JobNotFound`` at the first wait (it waited for ever), a malformed
  one at once;
- the local backend's jobs in the shared history break neither ``status`` nor ``history``
  (squeue refused the whole call for one ``local-1``);
- a map's array id names its sweep (``report ARRAY`` said "has not started");
- a function job's retry with the same ``submission_id`` never changes what the job runs;
- an id Slurm gave again (a reset controller, a wrapped MaxJobId) never tells the other
  job's story in ``status``, ``report``, ``events`` or the history.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from hpclaunch.store.history import SubmissionRecord, record_state, record_submission

from .conftest import Run
from .test_calls_on_cluster import run_script

pytestmark = [pytest.mark.slurm, pytest.mark.backends]

SCRIPT = """\
import json, time
import hpclaunch
from hpclaunch.errors import CallError, JobNotFound


def tag(x):
    return {"x": x}


options = {"project": "research", "resources": {"time": "00:05:00", "mem": "100M"}}
session = hpclaunch.Session(site="local")
seen = {}
local = hpclaunch.Session(site="local", backend="local").submit(tag, 0)
seen["local"] = [local.id, local.result(timeout=60)]
first = session.submit(tag, 1, submission_id=SUBMISSION, **options)
try:
    session.submit(tag, 2, submission_id=SUBMISSION, **options)
    seen["retry"] = "submitted"
except CallError as exc:
    seen["retry"] = str(exc)
seen["again"] = session.submit(tag, 1, submission_id=SUBMISSION, **options).id == first.id
seen["first"] = [first.id, first.result(timeout=150)]
started = time.monotonic()
try:
    session.job("99999999").result(timeout=120)
except JobNotFound as exc:
    seen["unknown"] = [str(exc), time.monotonic() - started]
try:
    session.job("abc")
except JobNotFound as exc:
    seen["malformed"] = str(exc)
run = session.map(tag, [5, 6], **options)
seen["map"] = [run.sweep_id, run.arrays[0].job_id, run.results(timeout=150)]
try:
    session.job(run.arrays[0].job_id)
except JobNotFound as exc:
    seen["array"] = str(exc)
print(json.dumps(seen))
"""


def test_unknown_ids_local_jobs_array_ids_and_retries(hpclaunch: Run) -> None:
    code = SCRIPT.replace("SUBMISSION", repr(f"ids-{uuid.uuid4().hex[:12]}"))
    seen = run_script(hpclaunch, code)
    local_id = seen["local"][0]
    assert seen["local"] == [local_id, {"x": 0}]
    assert local_id.startswith("local-")
    assert "already names a job of another call" in seen["retry"]
    assert seen["again"] is True
    assert seen["first"][1] == {"x": 1}  # the retry's arguments never reached the job
    message, waited = seen["unknown"]
    assert "unknown to the history and to Slurm" in message
    assert waited < 30
    assert "is not a job id" in seen["malformed"]
    sweep_id, array_id, results = seen["map"]
    assert results == [{"x": 5}, {"x": 6}]
    assert f"is the array of sweep {sweep_id}" in seen["array"]

    # The local job in the history breaks neither status nor history (both went to squeue).
    status = hpclaunch("status", "--json", local_id, seen["first"][0])
    assert status.returncode == 0, status.stderr
    states = {row["job_id"]: row["state"] for row in json.loads(status.stdout)}
    assert states == {local_id: "COMPLETED", seen["first"][0]: "COMPLETED"}
    listed = hpclaunch("status")
    assert listed.returncode == 0, listed.stderr
    history = hpclaunch("history")
    assert history.returncode == 0, history.stderr
    assert local_id in history.stdout
    report = hpclaunch("report", array_id)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith(f"sweep {sweep_id} ")


def test_a_reused_id_never_tells_another_jobs_story(hpclaunch: Run, tmp_path: Path) -> None:
    """The history's job 2 (``hid-elastic``, COMPLETED after 4 attempts) was reported as
    "CANCELLED after 1 attempt", from the reset cluster's unrelated job 2 (``wrap``)."""
    other = subprocess.run(
        [
            *("sbatch", "--parsable", "--hold", "--job-name=wrap", "-t", "1", "--mem=50M"),
            *("--output=/dev/null", "--wrap", "true"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(["scancel", other], check=True)
    # What hpclaunch recorded of its own job under that id, before the cluster gave it again.
    job_dir = tmp_path / "job"
    job_dir.mkdir(mode=0o700)
    record_submission(
        SubmissionRecord(
            *(other, None, "hid-elastic", f"reused-{uuid.uuid4().hex[:8]}", str(job_dir)),
            site="local",
            submitted_at="2026-01-02T03:04:05+00:00",
            tier="medium",
            project="research",
            state="COMPLETED",
            attempts=4,
            exit_code=0,
        ),
        path=hpclaunch.history,
    )
    said = "now names another job ('wrap', CANCELLED)"

    status = hpclaunch("status", "--json", other)
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)
    assert (row["name"], row["state"]) == ("hid-elastic", "COMPLETED")
    assert said in row["reason"]
    report = hpclaunch("report", other)
    assert report.returncode == 0, report.stderr
    head = report.stdout.splitlines()[0]
    assert head.endswith("COMPLETED after 4 attempts"), head
    assert said in report.stdout
    assert "attempts (waited" not in report.stdout  # none of the other job's attempts
    events = hpclaunch("events", other)
    assert events.returncode == 0, events.stderr
    assert said in events.stdout
    # A record last seen running is asked about by ``history``: the other job's end is not
    # stored as this one's.
    record_state(other, state="RUNNING", attempts=4, exit_code=None, path=hpclaunch.history)
    history = hpclaunch("history", "--json")
    assert history.returncode == 0, history.stderr
    assert hpclaunch.submitted()[other]["state"] == "RUNNING"
