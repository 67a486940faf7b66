"""Functions as jobs on the cluster (``Session.submit(fn, ...)``, issue 30): a script's own
functions (``__main__``: sent by value) run under the sidecar on a node; the value comes
back, the function's own exception comes back as itself (``except ShardError`` catches it)
with the job's traceback, a job cancelled by someone else is ``JobFailed`` with Slurm's
state (``job.cancel()`` itself gives ``CancelledError``, as futures do), and another
process reads the result later by the job's id."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from typing import Any

import pytest

from .conftest import REPO, Run
from .test_session_on_cluster import readme_block, run_python

pytestmark = [pytest.mark.slurm, pytest.mark.backends]

SCRIPT = """\
import json, socket, subprocess, sys, time
import hpclaunch
from hpclaunch.errors import JobFailed


class ShardError(Exception):
    pass


def scale(values, factor=2):
    return [v * factor for v in values], socket.gethostname()


def fails(shard):
    raise ShardError(f"shard {shard} is corrupt")


def sleeps():
    time.sleep(600)


options = {"project": "research", "resources": {"time": "00:05:00", "mem": "200M"}}
session = hpclaunch.Session(site="local")
ok = session.submit(scale, [1, 2], factor=10, **options)
bad = session.submit(fails, 7, **options)
slow = session.submit(sleeps, name="sleeper", **options)
seen = {"ids": [ok.id, bad.id, slow.id]}
values, host = ok.result(timeout=150)
seen["result"] = [values, host]
try:
    bad.result(timeout=150)
except ShardError as exc:
    seen["raised"] = [str(exc), getattr(exc, "__notes__", [])]
while slow.state.value != "RUNNING":
    time.sleep(0.5)
subprocess.run(["scancel", slow.id], check=True)  # by someone else: an admin, the CLI
error = slow.exception(timeout=120)
seen["failed"] = [type(error).__name__, getattr(error, "state", None), str(error)]
print(json.dumps(seen))
"""


def test_a_scripts_functions_run_as_jobs_and_what_they_gave_comes_back(hpclaunch: Run) -> None:
    seen = run_script(hpclaunch, SCRIPT)
    ok, bad, slow = seen["ids"]
    values, host = seen["result"]
    assert values == [10, 20]
    assert host.startswith("n")  # a node's, not this login node's
    text, notes = seen["raised"]
    assert text == "shard 7 is corrupt"
    if notes:  # Python 3.11+
        assert notes[-1].startswith(f"Traceback in job {bad}:")
        assert "in fails" in notes[-1]
    kind, state, message = seen["failed"]
    assert (kind, state) == ("JobFailed", "CANCELLED")
    assert f"job {slow} ended CANCELLED" in message
    # The CLI knows them as jobs it made; another process reads the result by id.
    assert hpclaunch.submitted()[ok]["name"] == "scale"
    assert hpclaunch.submitted()[slow]["name"] == "sleeper"
    later = run_python(
        hpclaunch,
        f"import hpclaunch; print(hpclaunch.Session(site='local').job('{ok}').result()[0])",
    )
    assert later.returncode == 0, later.stderr
    assert later.stdout.strip() == "[10, 20]"
    events = hpclaunch("events", bad, "--json")
    assert events.returncode == 0, events.stderr
    ends = [e for e in json.loads(events.stdout)["ledger"] if e["event"] == "attempt_end"]
    assert [(e["reason"], e["requeued"]) for e in ends] == [("user_error", False)]


ENDS = """\
import json, os, subprocess, time
import hpclaunch
from hpclaunch.calls import payload
from hpclaunch.errors import EnvironmentMismatch, JobFailed


def count(total):
    from hpclaunch import runtime

    ckpt = runtime.resume_point()
    start = ckpt.step if ckpt else 0
    for step in range(start + 1, total + 1):
        time.sleep(0.2)
        runtime.report_progress(step)
        if runtime.checkpoint_requested():
            runtime.commit_checkpoint(step, lambda d: (d / "step").write_text(str(step)))
            break  # the sidecar requeues the job; the next attempt starts from here
    return {"start": start, "attempt": int(os.environ["HPCLAUNCH_ATTEMPT"])}


def sleeps():
    time.sleep(600)


options = {"project": "research", "resources": {"time": "00:05:00", "mem": "200M"}}
session = hpclaunch.Session(site="local")
resumed = session.submit(count, 150, **options)
late = session.submit(
    sleeps, project="research", resources={"time": "00:01:00", "mem": "100M"},
    checkpoint={"max_requeues": 0},  # no warning, no requeue: Slurm ends it at its limit
)
real = payload.fingerprint
payload.fingerprint = lambda names: {**real(names), "packages": {"numpy": "0.1"}}
other = session.submit(sleeps, **options)  # as if submitted from another environment
payload.fingerprint = real
seen = {"ids": [resumed.id, late.id, other.id]}

progress = os.path.join(resumed.job_dir, "control", "progress.json")
while not (os.path.exists(progress) and json.load(open(progress))["step"] >= 20):
    time.sleep(0.2)
# What Slurm does at a preemption (PreemptParameters=send_user_signal): USR1 to the batch step.
subprocess.run(["scancel", "--batch", "--signal=USR1", resumed.id], check=True)
seen["resumed"] = resumed.result(timeout=240)
for name, job in (("late", late), ("other", other)):
    error = job.exception(timeout=240)
    seen[name] = [type(error).__name__, getattr(error, "state", None), str(error),
                  getattr(error, "hint", None)]
print(json.dumps(seen))
"""


def test_a_warned_function_resumes_from_its_checkpoint_and_failures_say_why(
    hpclaunch: Run,
) -> None:
    seen = run_script(hpclaunch, ENDS)
    resumed, late, other = seen["ids"]
    assert seen["resumed"]["attempt"] == 1  # requeued once, and the value is the last run's
    assert seen["resumed"]["start"] >= 20  # from its checkpoint, not from step 0
    kind, state, message, hint = seen["late"]
    assert (kind, state) == ("JobFailed", "TIMEOUT")
    assert f"job {late} ended TIMEOUT" in message
    assert "resources.time" in hint
    kind, _, message, _ = seen["other"]
    assert kind == "EnvironmentMismatch"
    assert "numpy" in message  # named, before anything was unpickled
    assert hpclaunch.submitted()[other]["name"] == "sleeps"
    events = hpclaunch("events", resumed, "--json")
    assert events.returncode == 0, events.stderr
    ends = [e for e in json.loads(events.stdout)["ledger"] if e["event"] == "attempt_end"]
    assert [e["requeued"] for e in ends] == [True, False]


def test_the_readmes_function_example_runs_as_written(hpclaunch: Run) -> None:
    out = run_python(hpclaunch, readme_block("### A function as a job"), timeout=300)
    assert out.returncode == 0, out.stderr
    first, losses = out.stdout.strip().splitlines()
    job_id, _, value = first.partition(" ")
    assert hpclaunch.submitted()[job_id]["tier"] == "low"
    assert value.startswith("{'lr': 0.1, 'loss': 0.1666")
    assert "'host': 'n" in value
    assert losses == str([1.0 / (1 + lr * 100) for lr in (0.01, 0.1, 1.0)])


# At most 16 tasks at a time: all 105 at once would take every CPU of the cluster from the
# modules beside it (the elastic module's 4-node job once waited over 120 s behind them).
MAP = """\
import json
from concurrent.futures import as_completed
import hpclaunch


def square(x):
    return x * x


session = hpclaunch.Session(site="local")
run = session.map(square, range(105), project="research", max_concurrent=16,
                  resources={"time": "00:05:00", "mem": "100M"})
results = run.results(timeout=300)
# Each item a future of its own task (issue 45), over both arrays: settled as they end.
jobs = run.jobs()
ended = {job.id: job.result() for job in as_completed(jobs, timeout=120)}
print(json.dumps({"sweep": run.sweep_id, "arrays": [r.job_id for r in run.arrays],
                  "results": results, "items": [[job.id, ended[job.id]] for job in jobs]}))
"""


def _most_at_once(array_id: str) -> int:
    """The most tasks of an array that ran at the same time, from sacct's start and end
    times (whole seconds: a task that ends as another starts is not counted with it)."""
    out = subprocess.run(
        ["sacct", "-j", array_id, "-X", "-n", "-P", "-o", "Start,End"],
        capture_output=True,
        text=True,
        check=True,
    )
    edges = []
    for line in out.stdout.split():
        start, end = line.split("|")
        edges += [(end, -1), (start, 1)]  # at the same second, an end before a start
    running = most = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


def test_map_over_more_items_than_max_array_size_gives_every_value_in_order(
    hpclaunch: Run,
) -> None:
    seen = run_script(hpclaunch, MAP)
    assert len(seen["arrays"]) == 2  # MaxArraySize=101 on the test cluster: 101 + 4
    assert _most_at_once(seen["arrays"][0]) <= 16
    assert seen["results"] == [x * x for x in range(105)]
    first, second = seen["arrays"]
    assert seen["items"][0] == [f"{first}_0", 0]
    assert seen["items"][100] == [f"{first}_100", 100 * 100]
    assert seen["items"][103] == [f"{second}_2", 103 * 103]  # task 2 of the second array
    assert [value for _, value in seen["items"]] == seen["results"]
    status = hpclaunch("sweep", "status", seen["sweep"], "--json")
    assert status.returncode == 0, status.stderr
    assert '"COMPLETED": 105' in status.stdout


def test_the_function_example_runs_as_written(hpclaunch: Run) -> None:
    out = run_example(hpclaunch, "examples/function_job.py")
    assert out.returncode == 0, out.stderr
    first, *grid = out.stdout.strip().splitlines()
    assert "'loss': 0.1666" in first
    assert [line.split(":")[0] for line in grid] == ["lr 0.001", "lr 0.01", "lr 0.1", "lr 1.0"]
    assert all(" on n" in line for line in grid)


def test_the_notebook_style_example_runs_as_written(hpclaunch: Run) -> None:
    out = run_example(hpclaunch, "examples/notebook_futures.py")
    assert out.returncode == 0, out.stderr
    *scores, best = out.stdout.strip().splitlines()
    assert sorted(line.split(":")[0] for line in scores) == [
        "checkpoint 100",
        "checkpoint 200",
        "checkpoint 400",
    ]
    assert any(line.startswith("checkpoint 400: score 0.9975 (job ") for line in scores)
    assert best == "best checkpoint: 400"


def run_example(hpclaunch: Run, path: str) -> subprocess.CompletedProcess[str]:
    """An example script as a user runs it, from the repository's root."""
    return subprocess.run(
        [sys.executable, path],
        cwd=REPO,
        env=dict(hpclaunch.env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def run_script(hpclaunch: Run, code: str) -> Any:
    """``code`` as a user's script in a directory of its own on the path every node shares
    (the jobs start there); the JSON of its last line."""
    work = REPO / ".pytest-session" / uuid.uuid4().hex
    work.mkdir(parents=True)
    try:
        out = run_python(hpclaunch, code, cwd=work, timeout=420)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Issue 48: items packed into array tasks; one item fails, the others' values come back.
PACKED_MAP = """\
import json
import hpclaunch


def inverse(x):
    return 1 / x


session = hpclaunch.Session(site="local")
run = session.map(inverse, [1, 2, 0, 4, 5], pack=2, project="research",
                  resources={"time": "00:01:00", "mem": "100M"})
values = run.results(timeout=300, return_exceptions=True)
print(json.dumps({"sweep": run.sweep_id, "arrays": [r.job_id for r in run.arrays],
                  "values": [v if not isinstance(v, BaseException) else type(v).__name__
                             for v in values],
                  "items": [job.id for job in run.jobs()]}))
"""


def test_a_packed_map_runs_two_items_a_task_and_a_failure_hides_no_value(
    hpclaunch: Run,
) -> None:
    seen = run_script(hpclaunch, PACKED_MAP)
    assert seen["values"] == [1.0, 0.5, "ZeroDivisionError", 0.25, 0.2]
    (array,) = seen["arrays"]
    # 5 items, 2 a task: tasks 0, 0, 1, 1, 2
    assert seen["items"] == [f"{array}_{t}" for t in (0, 0, 1, 1, 2)]
    status = hpclaunch("sweep", "status", seen["sweep"], "--json")
    assert status.returncode == 0, status.stderr
    counts = json.loads(status.stdout)["counts"]
    assert counts == {"COMPLETED": 4, "FAILED": 1}, counts
