"""Issue 48: packed sweeps (``sweep.pack``): the plan, the record and the points' states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpclaunch.config.site import load_site
from hpclaunch.errors import SpecError
from hpclaunch.jobspec.job import JobSpec
from hpclaunch.ops.sweep_status import point_state
from hpclaunch.planning.render import render
from hpclaunch.planning.sweep import plan_sweep
from hpclaunch.store.sweeps import SweepArray, SweepRecord
from hpclaunch.supervise.ledger import read_ledger
from tests.unit.conftest import HOME, SUBMISSION_ID, sweep_spec

SITE = load_site("local")
REPO = Path(__file__).resolve().parents[3]


def planned(pack: int, points: int = 7, **fields: object):  # type: ignore[no-untyped-def]
    spec = sweep_spec(
        sweep={"method": "grid", "parameters": {"x": list(range(points))}, "pack": pack},
        **fields,
    )
    return plan_sweep(spec, SITE, submission_id=SUBMISSION_ID, home=HOME, max_array_size=2)


def test_a_packed_sweep_has_a_task_per_pack_and_each_asks_for_its_points_time() -> None:
    sweep = planned(3, launcher="srun", resources={"time": "10"})
    # 7 points, 3 a task: 3 tasks, in arrays of at most 2 (MaxArraySize 2)
    assert [(a.offset, a.count) for a in sweep.arrays] == [(0, 2), (2, 1)]
    plan = sweep.plan
    assert plan.sweep_pack == 3
    assert plan.option("--time") == "00:30:00"  # 3 points of 10 minutes, one after another
    step = plan.launch_prefix[: plan.launch_prefix.index("--") + 1]
    assert step[1:3] == ("-m", "hpclaunch.supervise.sweep_pack")
    assert step[5:9] == ("--pack", "3", "--points", "7")
    note = next(n for n in plan.notes if n.startswith("sweep.pack 3"))
    assert "7 points in 3 array tasks (Slurm sees 3 jobs, not 7)" in note
    assert "each task asks 3 x that: 00:30:00" in note
    script = render(plan).script
    assert 'LOGDIR="$LOGDIR/packs/$HPCLAUNCH_SWEEP_INDEX"' in script
    assert 'LOGDIR="$LOGDIR/tasks/' not in script


def test_an_unpacked_sweep_is_as_before() -> None:
    sweep = planned(1, resources={"time": "10"})
    assert [(a.offset, a.count) for a in sweep.arrays] == [(0, 2), (2, 2), (4, 2), (6, 1)]
    assert sweep.plan.option("--time") == "00:10:00"
    assert "hpclaunch.supervise.sweep_task" in sweep.plan.launch_prefix
    assert not any(n.startswith("sweep.pack") for n in sweep.plan.notes)
    assert 'LOGDIR="$LOGDIR/tasks/$HPCLAUNCH_SWEEP_INDEX"' in render(sweep.plan).script


def test_a_pack_bigger_than_the_sweep_is_one_task() -> None:
    sweep = planned(50, points=4)
    assert [(a.offset, a.count) for a in sweep.arrays] == [(0, 1)]
    assert "--pack" in sweep.plan.launch_prefix
    assert sweep.plan.launch_prefix[sweep.plan.launch_prefix.index("--pack") + 1] == "4"


def test_an_adaptive_sweep_cannot_be_packed() -> None:
    with pytest.raises((SpecError, ValueError), match="pack: not for an adaptive sweep"):
        JobSpec.model_validate(
            {
                "name": "s",
                "command": ["x"],
                "sweep": {
                    "method": "tpe",
                    "parameters": {"lr": {"min": 0.1, "max": 1.0}},
                    "metric": {"name": "loss", "goal": "minimize"},
                    "trials": 4,
                    "pack": 2,
                },
            }
        )


def test_the_record_maps_points_to_their_packs_task() -> None:
    record = SweepRecord(
        "s", "n", "site", "/j", "/l", "/j/p", 7, "t", "low", "low", pack=3,
        arrays=(SweepArray("10", 0, 2), SweepArray("11", 2, 1)),
    )  # fmt: skip
    assert record.latest_tasks() == {
        0: "10_0", 1: "10_0", 2: "10_0", 3: "10_1", 4: "10_1", 5: "10_1", 6: "11_0",
    }  # fmt: skip
    assert record.task_job_id(4) == "10_1"
    assert record.task_of("11", 0) == 6
    assert list(record.points_of(2)) == [6]
    old = SweepRecord.from_dict({k: v for k, v in record.to_dict().items() if k != "pack"})
    assert old.pack == 1  # a record written before packing


@pytest.mark.parametrize(
    ("last", "task", "want"),
    [
        ({"event": "attempt_end", "reason": "success"}, "RUNNING", ("COMPLETED", False)),
        ({"event": "attempt_end", "reason": "user_error"}, "RUNNING", ("FAILED", False)),
        ({"event": "attempt_end", "reason": "oom"}, "FAILED", ("OUT_OF_MEMORY", False)),
        ({"event": "attempt_end", "reason": "preempted", "requeued": True}, "PENDING",
         ("PENDING", False)),
        ({"event": "attempt_end", "reason": "preempted", "requeued": True}, "RUNNING",
         ("PENDING", False)),  # the task runs again, not yet this point
        ({"event": "attempt_start"}, "RUNNING", ("RUNNING", False)),
        ({"event": "attempt_start"}, "TIMEOUT", ("TIMEOUT", False)),
        (None, "RUNNING", ("PENDING", False)),  # waits its turn in the pack
        (None, "CANCELLED", ("CANCELLED", True)),  # the task ended before reaching it
    ],
)  # fmt: skip
def test_a_points_state_comes_from_its_ledger_and_its_task(
    last: dict[str, object] | None, task: str, want: tuple[str, bool]
) -> None:
    assert point_state(last, task) == want


def run_pack(tmp_path: Path, index: int, command: str, **env: str) -> int:
    """``python -m hpclaunch.supervise.sweep_pack`` as a packed task's batch script runs it
    (launcher none: no sidecar), pack ``index`` of 5 points, 2 a pack."""
    params = tmp_path / "sweep-params.jsonl"
    params.write_text(
        "".join(json.dumps({"index": i, "params": {"x": i}}) + "\n" for i in range(5))
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HPCLAUNCH_"))}
    full.update(
        PYTHONPATH=str(REPO),
        HPCLAUNCH_JOB_DIR=str(tmp_path),
        HPCLAUNCH_LOG_DIR=str(tmp_path),
        HPCLAUNCH_ATTEMPT="0",
        HPCLAUNCH_SWEEP_INDEX=str(index),
        **env,
    )
    argv = [sys.executable, "-m", "hpclaunch.supervise.sweep_pack", "--params", str(params)]
    argv += ["--pack", "2", "--points", "5", "--keep=0", "--", "bash", "-c", command, "-", "{x}"]
    return subprocess.run(argv, env=full, capture_output=True, timeout=60, check=False).returncode


def test_a_pack_runs_its_points_in_turn_each_with_its_own_ledger_and_log(tmp_path: Path) -> None:
    says = 'echo "point $1 more=${HPCLAUNCH_PACK_MORE:-0}" >> "$HPCLAUNCH_SWEEP_DIR/ran"'
    assert run_pack(tmp_path, 1, says) == 0
    assert (tmp_path / "ran").read_text().splitlines() == ["point 2 more=1", "point 3 more=0"]
    for point in (2, 3):
        own = tmp_path / "tasks" / str(point)
        ends = [e for e in read_ledger(own) if e["event"] == "attempt_end"]
        assert [(e["reason"], e["exit_code"]) for e in ends] == [("success", 0)]
        assert f"sweep point {point}: " in (own / "attempt-0.log").read_text()
    # started again (a requeue): both points completed, nothing runs twice
    assert run_pack(tmp_path, 1, says) == 0
    assert len((tmp_path / "ran").read_text().splitlines()) == 2


def test_a_failed_point_does_not_stop_the_pack_and_fails_the_task(tmp_path: Path) -> None:
    command = 'echo "$1" >> "$HPCLAUNCH_SWEEP_DIR/ran"; test "$1" != 0'
    assert run_pack(tmp_path, 0, command) == 1
    assert (tmp_path / "ran").read_text().splitlines() == ["0", "1"]
    ends = [e for e in read_ledger(tmp_path / "tasks" / "0") if e["event"] == "attempt_end"]
    assert [(e["reason"], e["exit_code"], e["requeued"]) for e in ends] == [
        ("user_error", 1, False)
    ]
    # the last pack has one point (4): 5 points, 2 a pack
    assert run_pack(tmp_path, 2, command) == 0
    assert (tmp_path / "ran").read_text().splitlines() == ["0", "1", "4"]


def test_a_pack_whose_points_do_not_fit_the_time_limit_says_so() -> None:
    from hpclaunch.errors import PlanError

    with pytest.raises(PlanError) as exc:
        planned(32, points=40, resources={"time": "00:05:00"})
    assert exc.value.message.startswith(
        "sweep.pack 32: each task runs 32 points one after another, so it asks 32 x "
        "resources.time (00:05:00): resources.time: time 02:40:00 is over the limit"
    )
    assert exc.value.hint == "lower sweep.pack, or resources.time (a point's)"
