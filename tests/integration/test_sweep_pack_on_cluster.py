"""Issue 48: a packed sweep (``sweep.pack``) on the real cluster, one of its tasks preempted.

Six points, three to a task: Slurm sees two array tasks. Each point is a job step of its
task under its own sidecar, with its own log and ledger. A critical job that needs every
GPU of task 0's node preempts it while its second point runs: the point's sidecar hears
Slurm's warning (passed on by the pack), and the task is requeued. Started again, the task
skips its completed first point, runs the interrupted one again and then the third. Every
point ends COMPLETED in ``sweep status``, each ran to its end exactly once, and only the
preempted point ran twice. The other task never noticed.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import Cli, SlurmCluster
from .faults import wait_for
from .test_sidecar_on_cluster import _preempt

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

#: A point: a start marker, its work, an end marker; named by point and task attempt. Point 1
#: works 60 s in attempt 0 (longer than the grace: the preemption cuts it), others 5 s.
POINT = (
    'm="$0/p$1-a$HPCLAUNCH_ATTEMPT"; touch "$m-start"; '
    's=5; [ "$1$HPCLAUNCH_ATTEMPT" = 10 ] && s=60; sleep $s || exit $?; touch "$m-done"'
)


@pytest.fixture
def shared() -> Iterator[Path]:
    import shutil

    path = Path.home() / ".hpclaunch-it" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_preempted_packed_task_runs_only_its_unfinished_points(
    slurm_cluster: SlurmCluster, hpclaunch: Cli, shared: Path, tmp_path: Path
) -> None:
    spec = {
        "name": f"it-pack-{uuid.uuid4().hex[:6]}",
        "project": "research",
        "command": ["bash", "-c", POINT, str(shared), "{x}"],
        "launcher": "srun",
        "tier": "low",
        # a whole node's GPUs: the critical job can only have them by preempting the task
        "resources": {"gpus_per_node": 4, "time": "00:02:00", "mem": "200M"},
        "sweep": {"method": "grid", "parameters": {"x": list(range(6))}, "pack": 3},
    }
    path = tmp_path / "pack.yaml"
    path.write_text(yaml.safe_dump(spec))
    dry = hpclaunch("sweep", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "6 points in 2 array tasks (Slurm sees 2 jobs, not 6)" in dry.stdout
    assert "--array=0-1 " in dry.stdout
    out = hpclaunch("sweep", str(path))
    assert out.returncode == 0, out.stderr
    sweep_id = out.stdout.split()[0]
    status = _status(hpclaunch, sweep_id)
    (array,) = {t["job_id"].split("_")[0] for t in status["tasks"]}
    try:
        wait_for("point 1 to start", (shared / "p1-a0-start").exists, 120)
        preemptor = _preempt(f"{array}_0", nodes=1)

        def ended() -> bool:
            return _status(hpclaunch, sweep_id)["counts"] == {"COMPLETED": 6}

        wait_for("every point COMPLETED", ended, 240)
        # A point's ledger says success before its task's batch script ends, and slurmdbd
        # records the end after slurmctld (the CI of stop 56 read RUNNING on 22.05): wait for both
        wait_for("both tasks to leave the queue", lambda: not _queued(array), 60)
        wait_for("slurmdbd to record both ends", lambda: _recorded(array), 60)
    finally:
        subprocess.run(["scancel", array], check=False, capture_output=True)
    subprocess.run(["scancel", preemptor], check=False, capture_output=True)
    # Each point ran to its end exactly once, and never started again after that; point
    # 1 was cut in attempt 0 and ended in a later one. (Another test's job may preempt the
    # tasks once more, side by side: these hold whatever the number of preemptions.)
    marks = [p.name.split("-") for p in shared.iterdir()]
    done = {int(p[1:]): int(a[1:]) for p, a, kind in marks if kind == "done"}
    starts: dict[int, list[int]] = {}
    for p, a, kind in marks:
        if kind == "start":
            starts.setdefault(int(p[1:]), []).append(int(a[1:]))
    assert sorted(done) == list(range(6)), marks
    assert len([m for m in marks if m[2] == "done"]) == 6, marks
    assert all(max(starts[p]) == done[p] for p in done), marks
    assert done[0] == 0, marks
    assert 0 in starts[1], marks
    assert done[1] > 0, marks
    assert done[2] > 0, marks
    # Slurm's records: two tasks, task 0 preempted
    states = _sacct(f"{array}_0")
    assert states[0] == "PREEMPTED" or "REQUEUED" in states[0], states
    # Ended: COMPLETED, or PREEMPTED when a preemption came as a task's last point ended
    # (the work done, its sidecar keeps Slurm from running it again; seen in CI run 57,
    # another test's job preempting task 1 side by side); the points' ledgers say how
    # each ended (every point COMPLETED, above)
    assert states[-1] in ("COMPLETED", "PREEMPTED"), states
    assert _sacct(f"{array}_1")[-1] in ("COMPLETED", "PREEMPTED")
    tasks = subprocess.run(
        ["sacct", "-n", "-X", "-j", array, "-o", "JobID", "-P"], capture_output=True, text=True
    ).stdout.split()
    assert sorted(set(tasks)) == [f"{array}_0", f"{array}_1"], tasks
    # the preempted point's own ledger: attempt 0 ended by the preemption, the last one
    # succeeded, in its own log
    job_dir = Path(_status(hpclaunch, sweep_id)["job_dir"])
    ends = _ends(job_dir / "tasks" / "1")
    assert ends[0]["attempt"] == 0, ends
    assert ends[0]["reason"] != "success", ends
    assert ends[-1]["reason"] == "success", ends
    assert (job_dir / "tasks" / "1" / f"attempt-{ends[-1]['attempt']}.log").is_file()


def _status(cli: Cli, sweep_id: str) -> dict[str, object]:
    out = cli("sweep", "status", sweep_id, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


def _sacct(job: str) -> list[str]:
    """sacct's state of each run of ``job`` (-D: requeued runs too), oldest first."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-D", "-j", job, "-o", "State", "-P"], capture_output=True, text=True
    )
    return out.stdout.split()


def _queued(array: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", array, "-o", "%i"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def _recorded(array: str) -> bool:
    time.sleep(0.5)  # sacct asks slurmdbd: not in a tight loop
    live = {"RUNNING", "PENDING", "REQUEUED", "COMPLETING"}
    lasts = [_sacct(f"{array}_{task}")[-1:] for task in (0, 1)]
    return all(last and last[0] not in live for last in lasts)


def _ends(task: Path) -> list[dict[str, object]]:
    lines = (task / "events.jsonl").read_text().splitlines()
    events: Callable[[str], dict[str, object]] = json.loads
    return [e for e in map(events, lines) if e["event"] == "attempt_end"]
