"""Sweeps on the real cluster (MaxArraySize=101, docker/slurm-cluster/etc/*/slurm.conf).

* a 3x3 grid with max_concurrent 2 runs as ONE array ``%2``: sacct shows at most 2 tasks at
  once and 9 COMPLETED; each task saw its own point and reported metrics (sweep status);
* 300 points become 3 arrays (indices 0..100), chained by the cap; every point runs exactly
  once (each task appends a line to a file named after its point);
* ``scontrol requeue <array>_<task>`` on one running task (under the sidecar) requeues that
  task alone (``sacct -D`` lists it twice, the others once) and it finishes; its ledger and
  logs are its own (``hpclaunch events/logs <array>_<task>``).

The three sweeps are submitted at once and checked by separate tests (about 1.5 min).
"""

from __future__ import annotations

import getpass
import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from .browser import CHROMIUM, browser, console_errors
from .cluster import SlurmCluster
from .conftest import Cli, SubmittedSweeps

# compat: also run on Slurm 22.05 (scripts/test); see pyproject.toml markers.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends, pytest.mark.exclusive]

# Reports its point as metrics; sleeps so that the %2 cap is visible in sacct's times.
GRID_TASK = (
    "import sys, time\n"
    "from hpclaunch import runtime\n"
    "a, b = sys.argv[1], sys.argv[2]\n"
    "assert runtime.sweep_params() == {'a': int(a), 'b': b}, (runtime.sweep_params(), a, b)\n"
    "time.sleep(3)\n"
    "runtime.report_metrics({'score': int(a) * 10, 'tag': b})\n"
)
# Attempt 0 of point 1 waits to be requeued; everything else ends at once. The requeue
# kills the step's processes one by one: the shell may outlive its sleep by a moment, so an
# interrupted sleep ends the shell too (else it could append attempt 0's line on its way out).
REQUEUE_TASK = (
    'if [ "$HPCLAUNCH_ATTEMPT" = 0 ] && [ "$0" = 1 ]; then touch "$1.running"; '
    "sleep 120 || exit $?; fi; "
    'echo "$HPCLAUNCH_ATTEMPT" >> "$1"'
)


@dataclass
class Sweeps(SubmittedSweeps):
    shared: Path


@pytest.fixture(scope="module")
def sweeps(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory, backend: str
) -> Iterator[Sweeps]:
    cli = Cli(tmp_path_factory.mktemp("state"))
    shared = Path.home() / ".hpclaunch-it" / f"sweep-{uuid.uuid4().hex[:8]}"
    shared.mkdir(parents=True)
    spec_dir = tmp_path_factory.mktemp("specs")
    python = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python")
    res = {"time": "00:05:00", "mem": "50M"}
    specs = {
        "grid": {
            "command": [python, "-c", GRID_TASK, "{a}", "{b}"],
            "sweep": {
                "method": "grid",
                "parameters": {"a": [1, 2, 3], "b": ["x y", "$(touch canary)", "q'\"z"]},
                "max_concurrent": 2,
            },
        },
        "many": {
            "command": ["sh", "-c", 'echo x >> "$0"', f"{shared}/many/{{i}}"],
            "sweep": {
                "method": "list",
                "points": [{"i": i} for i in range(300)],
                "max_concurrent": 24,
            },
        },
        "requeue": {
            "command": ["sh", "-c", REQUEUE_TASK, "{i}", f"{shared}/requeue/{{i}}"],
            "launcher": "srun",
            "sweep": {"method": "list", "points": [{"i": 0}, {"i": 1}, {"i": 2}]},
        },
    }
    (shared / "many").mkdir()
    (shared / "requeue").mkdir()
    ids = {}
    for name, fields in specs.items():
        spec = {"name": f"it-sweep-{name}", "project": "research", "resources": res, **fields}
        path = spec_dir / f"{name}.yaml"
        path.write_text(json.dumps(spec))
        out = cli("sweep", str(path))
        assert out.returncode == 0, out.stderr
        ids[name] = out.stdout.strip()
    yield Sweeps(cli=cli, ids=ids, shared=shared)
    arrays = [r["job_id"] for r in cli.submitted().values()]
    if arrays:
        subprocess.run(["scancel", *arrays], check=False, capture_output=True)
    shutil.rmtree(shared, ignore_errors=True)


#: States a task's accounting record holds while slurmdbd has not heard of its end yet.
_UNSETTLED = frozenset({"PENDING", "RUNNING", "COMPLETING", "REQUEUED_PENDING"})


def _sacct(job_ids: list[str], *extra: str, timeout: float = 60) -> list[list[str]]:
    """The jobs' accounting rows once every one is final. slurmdbd hears of a job's end
    after slurmctld does: sweep status (squeue) had a requeued task COMPLETED while
    sacct -D still showed its second run RUNNING (22.05 on a loaded CI machine)."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(
            [
                "sacct",
                "-n",
                "-P",
                "-X",
                *extra,
                f"--jobs={','.join(job_ids)}",
                "--format=JobID,State,Start,End",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("|") for line in out.stdout.splitlines() if line]
        if not any(row[1] in _UNSETTLED for row in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(1)


def _max_overlap(rows: list[list[str]]) -> int:
    spans = [(datetime.fromisoformat(r[2]), datetime.fromisoformat(r[3])) for r in rows]
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


def test_grid_runs_as_one_array_at_most_two_at_once(sweeps: Sweeps) -> None:
    data = sweeps.wait_done("grid", timeout=120)
    assert len(data["arrays"]) == 1
    assert data["counts"] == {"COMPLETED": 9}
    job = data["arrays"][0]["job_id"]
    rows = _sacct([job])
    assert len(rows) == 9
    assert {r[1] for r in rows} == {"COMPLETED"}
    assert _max_overlap(rows) <= 2
    for task in data["tasks"]:
        assert task["metrics"] == {"score": task["params"]["a"] * 10, "tag": task["params"]["b"]}
    assert len({json.dumps(t["params"], sort_keys=True) for t in data["tasks"]}) == 9
    assert not (Path.cwd() / "canary").exists()
    table = sweeps.cli("sweep", "status", sweeps.ids["grid"])
    assert table.returncode == 0, table.stderr
    assert "COMPLETED 9" in table.stdout
    assert "score" in table.stdout
    for order, descending in (("score", False), ("-score", True)):
        out = sweeps.cli("sweep", "status", sweeps.ids["grid"], "--sort", order, "--json")
        assert out.returncode == 0, out.stderr
        scores = [t["metrics"]["score"] for t in json.loads(out.stdout)["tasks"]]
        assert scores == sorted(scores, reverse=descending)
    bad = sweeps.cli("sweep", "status", sweeps.ids["grid"], "--sort", "nope")
    assert bad.returncode == 2
    assert "no task has a metric or parameter 'nope' (known: a, b, score, tag)" in bad.stderr
    _assert_the_sweeps_page(sweeps, data)
    listed = sweeps.cli("sweep", "list")
    assert listed.stdout.splitlines()[0].split() == [
        "SWEEP",
        "SUBMITTED",
        "POINTS",
        "ARRAYS",
        "NAME",
    ]
    assert any(line.startswith(sweeps.ids["grid"]) for line in listed.stdout.splitlines())


def _assert_the_sweeps_page(sweeps: Sweeps, data: dict[str, Any]) -> None:
    """``report SWEEP --html --metric score`` in headless Chromium: every task's row, the
    score against each parameter, no console error."""
    page = sweeps.shared / "sweep.html"
    out = sweeps.cli("report", sweeps.ids["grid"], "--html", str(page), "--metric", "score")
    assert out.returncode == 0, out.stderr
    if CHROMIUM is None:
        pytest.skip("no chromium here to render the page (apt-get install chromium)")
    dom = browser(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<tr class="task">') == len(data["tasks"]) == 9
    # score against a (numbers) and against b (text: categories), a dot per task each
    assert dom.stdout.count("<circle ") == 2 * 9
    assert "score against a" in dom.stdout
    assert "score against b" in dom.stdout
    assert console_errors(dom) == []
    shot = page.with_suffix(".png")
    assert browser(page, f"--screenshot={shot}").returncode == 0
    assert shot.stat().st_size > 5_000


def test_sweep_cancel_cancels_every_task(sweeps: Sweeps, tmp_path: Path) -> None:
    spec = tmp_path / "long.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "it-sweep-cancel",
                "project": "research",
                "command": ["sleep", "{s}"],
                "resources": {"time": "00:05:00", "mem": "50M"},
                "sweep": {"method": "list", "points": [{"s": 300}] * 4, "max_concurrent": 2},
            }
        )
    )
    out = sweeps.cli("sweep", str(spec))
    assert out.returncode == 0, out.stderr
    sweep_id = sweeps.ids["cancel"] = out.stdout.strip()
    for _ in range(2):  # safe to repeat
        cancelled = sweeps.cli("sweep", "cancel", sweep_id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert f"sweep {sweep_id}: cancelled arrays" in cancelled.stdout
    data = sweeps.wait_done("cancel", timeout=60)
    assert data["counts"] == {"CANCELLED": 4}, data["counts"]


def test_a_placeholder_typo_is_refused_before_anything_is_submitted(
    sweeps: Sweeps, tmp_path: Path
) -> None:
    """Issue 27: ``{hiden}`` for the parameter ``hidden`` was submitted and every task
    failed. Now the sweep (and its dry run) stops with the field, a guess and the escape."""
    name = f"it-sweep-typo-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "typo.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": name,
                "project": "research",
                "command": ["echo", "--hidden", "{hiden}", "--seed", "{seed}"],
                "resources": {"time": "00:05:00", "mem": "50M"},
                "sweep": {"method": "grid", "parameters": {"hidden": [64, 128], "seed": [1]}},
            }
        )
    )
    for extra in ((), ("--dry-run",)):
        out = sweeps.cli("sweep", str(spec), *extra)
        assert out.returncode != 0, out.stdout
        assert f"{spec}: command: {{hiden}} is not a sweep parameter (parameters: hidden, " in (
            out.stderr
        )
        assert "did you mean {hidden}? write {{hiden}} for a literal {hiden}" in out.stderr
        assert "Traceback" not in out.stderr
    queued = subprocess.run(
        ["squeue", "-h", "--name", name, "-o", "%i"], capture_output=True, text=True, check=True
    )
    assert queued.stdout.strip() == ""
    listed = sweeps.cli("sweep", "list")
    assert name not in listed.stdout


def test_a_sweep_beyond_max_job_count_is_refused_and_one_near_it_warned(
    sweeps: Sweeps, tmp_path: Path
) -> None:
    """Issue 45: 60,000 points were planned against the cluster's MaxJobCount of 10,000
    without a word (each array task is a job: it would fail part-way), the plan one 20 KB
    line. Read from the cluster (``scontrol show config``); nothing is submitted."""
    name = f"it-sweep-big-{uuid.uuid4().hex[:6]}"

    def spec(values: int) -> Path:
        path = tmp_path / f"big-{values}.yaml"
        grid = {"a": list(range(values)), "b": list(range(1000))}
        command = ["echo", "{a}", "{b}"]
        resources = {"time": "00:05:00", "mem": "50M"}
        sweep = {"method": "grid", "parameters": grid}
        fields = {"name": name, "project": "research", "command": command, "sweep": sweep}
        path.write_text(json.dumps({**fields, "resources": resources}))
        return path

    refused = sweeps.cli("sweep", "--dry-run", str(spec(60)))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "60000 points are 60000 jobs to Slurm (each array task counts) against the " in (
        refused.stderr
    )
    assert "MaxJobCount of 10000" in refused.stderr
    assert "Hint: split it into sweeps of at most 5000 points" in refused.stderr
    assert sweeps.cli("sweep", str(spec(60))).returncode == 2  # and not submitted
    near = sweeps.cli("sweep", "--dry-run", str(spec(6)))
    assert near.returncode == 0, near.stderr
    assert "Warning: 6000 points are 6000 jobs" in near.stderr
    assert max(len(line) for line in near.stdout.splitlines()) < 300  # readable
    assert "... and 5980 more" in near.stdout
    # The association's own limit (MaxSubmitJobs), read with the jobs counted against it.
    user = getpass.getuser()
    limit = ["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "account=research"]
    subprocess.run([*limit, "set", "MaxSubmitJobs=20"], check=True, capture_output=True)
    try:
        small = tmp_path / "small.yaml"
        small.write_text(
            json.dumps(
                {
                    "name": name,
                    "project": "research",
                    "tier": "medium",  # no GPU: in research (the module's sweeps are low)
                    "command": ["echo", "{a}"],
                    "resources": {"time": "00:05:00", "mem": "50M"},
                    "sweep": {"method": "grid", "parameters": {"a": list(range(30))}},
                }
            )
        )
        deadline = time.monotonic() + 30  # slurmdbd passes the limit on to slurmctld
        while True:
            over = sweeps.cli("sweep", "--dry-run", str(small))
            if over.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert over.returncode == 2, over.stdout[-2000:] + over.stderr
        # Another test's jobs may hold some of the 20, or more (a limit set late).
        head = (
            "30 points are 30 jobs to Slurm (each array task counts), and the MaxSubmitJobs "
            f"of user {user} in account research "
        )
        assert head in over.stderr, over.stderr
        said = re.search(r"takes (\d+) more now \((\d+) of 20 held\)", over.stderr)
        full = re.search(r"is full \((\d+) jobs held, limit 20\)", over.stderr)
        if said is not None:
            assert int(said.group(1)) + int(said.group(2)) == 20
            assert f"Hint: split it into sweeps of at most {said.group(1)} points" in (over.stderr)
        else:
            assert full is not None, over.stderr
            assert int(full.group(1)) >= 20
            assert "Hint: wait for jobs held against it to end" in over.stderr
    finally:
        subprocess.run([*limit, "set", "MaxSubmitJobs=-1"], check=True, capture_output=True)
    queued = subprocess.run(
        ["squeue", "-h", "--name", name, "-o", "%i"], capture_output=True, text=True, check=True
    )
    assert queued.stdout.strip() == ""


def test_sweep_wait_with_set_and_partition_exits_0_when_every_task_completed(
    sweeps: Sweeps, tmp_path: Path
) -> None:
    spec = tmp_path / "wait.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": f"it-sweep-wait-{uuid.uuid4().hex[:6]}",
                "project": "research",
                "command": ["echo", "{x}"],
                "resources": {"time": "00:05:00", "mem": "50M"},
                "sweep": {"method": "grid", "parameters": {"x": [1, 2]}},
            }
        )
    )
    out = sweeps.cli(
        "sweep", str(spec), "--wait", "--partition", "debug", "--set", "resources.time=3"
    )
    assert out.returncode == 0, out.stderr
    sweep_id = out.stdout.strip()
    assert f"sweep {sweep_id}: 2 COMPLETED" in out.stderr
    (array,) = json.loads(sweeps.cli("sweep", "status", sweep_id, "--json").stdout)["arrays"]
    # slurmctld's own record of the tasks (kept MinJobAge, 300 s), not sacct: on 22.05 in CI
    # (stop 35) sacct -X printed one row with an empty partition and time limit right after
    # the tasks ended; slurmdbd is written asynchronously and this test is about the request.
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job", array["job_id"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    asked = {
        " ".join(f for f in line.split() if f.startswith(("Partition=", "TimeLimit=")))
        for line in shown
    }
    assert len(shown) == 2, shown
    assert asked == {"TimeLimit=00:03:00 Partition=debug"}, shown


def test_300_points_become_arrays_below_max_array_size_each_run_once(sweeps: Sweeps) -> None:
    config = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    assert "MaxArraySize            = 101" in config, (
        "the cluster must run with MaxArraySize=101 (docker/slurm-cluster/etc/*/slurm.conf)"
    )
    data = sweeps.wait_done("many", timeout=150)
    assert [a["count"] for a in data["arrays"]] == [101, 101, 98]
    assert data["counts"] == {"COMPLETED": 300}
    files = sorted((sweeps.shared / "many").iterdir(), key=lambda p: int(p.name))
    assert [p.name for p in files] == [str(i) for i in range(300)]
    assert all(p.read_text() == "x\n" for p in files)
    rows = _sacct([a["job_id"] for a in data["arrays"]], "-D")
    assert len(rows) == 300  # no task ran twice
    assert _max_overlap(rows) <= 24


def test_one_requeued_task_is_requeued_alone_and_finishes(sweeps: Sweeps) -> None:
    marker = sweeps.shared / "requeue" / "1.running"
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline, "point 1 never started"
        time.sleep(0.2)
    data = sweeps.status("requeue")
    (array,) = data["arrays"]
    job = array["job_id"]
    task = next(t for t in data["tasks"] if t["point"] == 1)["job_id"]
    subprocess.run(["scontrol", "requeue", task], check=True, capture_output=True)
    data = sweeps.wait_done("requeue", timeout=90)
    assert data["counts"] == {"COMPLETED": 3}
    out = sweeps.shared / "requeue"
    assert [(out / str(i)).read_text() for i in range(3)] == ["0\n", "1\n", "0\n"]
    rows = _sacct([job], "-D")
    by_task: dict[str, list[str]] = {}
    for row in rows:
        by_task.setdefault(row[0], []).append(row[1])
    assert by_task[f"{job}_1"] == ["REQUEUED", "COMPLETED"]
    assert by_task[f"{job}_0"] == ["COMPLETED"]
    assert by_task[f"{job}_2"] == ["COMPLETED"]
    # The task's own ledger (tasks/1/events.jsonl) and logs, by its <array>_<task> id.
    events = sweeps.cli("events", task, "--json")
    assert events.returncode == 0, events.stderr
    ledger = json.loads(events.stdout)["ledger"]
    ends = [e for e in ledger if e["event"] == "attempt_end"]
    logs = sweeps.cli("logs", task)
    # Once (a clean-clone run, [pyslurm]) attempt 0 recorded neither the SIGTERM nor its end;
    # cause unknown: say everything the task left, and keep the cluster's logs
    # (/var/tmp/hpclaunch-cluster-logs after `cluster.sh down`).
    assert [e["reason"] for e in ends] == ["requeued", "success"], (ledger, logs.stdout)
    assert logs.returncode == 0, logs.stderr
    assert "==> attempt 1 <==" in logs.stderr
    assert "sweep point 1" in logs.stdout


def test_a_sweep_beyond_its_quota_runs_split_in_quota_and_over_quota(
    sweeps: Sweeps, tmp_path: Path
) -> None:
    # research holds none of its 8 guaranteed GPUs; 12 one-GPU tasks may run at once. Judged
    # per task, 4 of them waited at the quota (AssocGrpGRES) beside 8 idle GPUs.
    spec = tmp_path / "split.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "it-sweep-split",
                "project": "research",
                "tier": "medium",
                "command": ["sleep", "{s}"],
                "resources": {"gpus_per_node": 1, "time": "00:05:00", "mem": "50M"},
                "sweep": {"method": "list", "points": [{"s": 120}] * 12, "max_concurrent": 12},
            }
        )
    )
    out = sweeps.cli("sweep", str(spec))
    assert out.returncode == 0, out.stderr
    assert (
        "project research has 8 of its guaranteed GPUs free; this sweep runs 12 tasks at once: "
        "8 in-quota, 4 over-quota on idle GPUs" in out.stderr
    )
    sweep_id = sweeps.ids["split"] = out.stdout.strip()
    arrays = [a["job_id"] for a in sweeps.status("split")["arrays"]]
    assert len(arrays) == 2
    deadline = time.monotonic() + 60
    while True:  # every task runs at once: none waits at the quota
        squeue = subprocess.run(
            ["squeue", "-h", "-r", f"--jobs={','.join(arrays)}", "-o", "%i|%a|%q|%T|%r"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        running = [line for line in squeue if "|RUNNING|" in line]
        if len(running) == 12:
            break
        assert time.monotonic() < deadline, squeue
        time.sleep(0.5)
    by_part = sorted({(line.split("|")[1], line.split("|")[2]) for line in running})
    assert by_part == [("research", "normal"), ("research-oq", "overquota")]
    assert sum(line.split("|")[1] == "research" for line in running) == 8
    cancelled = sweeps.cli("sweep", "cancel", sweep_id)
    assert cancelled.returncode == 0, cancelled.stderr
