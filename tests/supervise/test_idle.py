"""The idle guard in the sidecar (real child processes): when every node's GPUs have been idle
for ``idle.stop_after``, the trainer is asked for a checkpoint, the launch stopped and the job
ended ``stopped_idle``, not requeued (the nodes' idle states written here as the GPU sampler
writes them: tests/unit/runtime/test_gpumon.py)."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.sidecar import EXIT_STOPPED_IDLE, Sidecar, SidecarConfig
from tests.unit.fakes import FakeRunner, result

REPO = Path(__file__).resolve().parents[2]
TRAINER = str(Path(__file__).with_name("trainer.py"))


def _idle_from_now_on(job_dir: Path, idle_since_ago: float) -> threading.Thread:
    """Once the attempt started, this node says its GPUs are idle (refreshed each 0.5 s)."""

    def write() -> None:
        deadline = time.monotonic() + 30
        since: float | None = None
        while time.monotonic() < deadline:
            kinds = [e["event"] for e in read_ledger(job_dir)]
            if "attempt_end" in kinds:
                return
            if "attempt_start" in kinds:
                folder = job_dir / "control" / "idle"
                folder.mkdir(parents=True, exist_ok=True)
                now = time.time()
                since = since or now - idle_since_ago
                state = {"since": since, "at": now, "interval": 1}
                (folder / f"{socket.gethostname()}.json").write_text(json.dumps(state))
            time.sleep(0.5)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_job_whose_gpus_sit_idle_is_checkpointed_and_stopped_not_requeued(tmp_path: Path) -> None:
    env = dict(os.environ, SLURM_JOB_ID="4242", PYTHONPATH=str(REPO))
    env.pop("SLURM_JOB_NODELIST", None)
    env.update(HPCLAUNCH_IDLE_STOP_SECONDS="3", HPCLAUNCH_GPU_IDLE_UTIL="5")
    config = SidecarConfig(
        launcher="srun",
        command=(sys.executable, TRAINER, "--steps", "100000", "--sleep", "0.05"),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        lead=10.0,
        stop_timeout=1.0,
    )
    writer = _idle_from_now_on(tmp_path, idle_since_ago=0)
    runner = FakeRunner(lambda argv: result(argv))
    started = time.monotonic()
    assert Sidecar(config, runner).run() == EXIT_STOPPED_IDLE
    assert time.monotonic() - started < 25
    writer.join(timeout=5)
    ledger = read_ledger(tmp_path)
    events = {e["event"]: e for e in ledger}
    assert "every GPU of the job below 5 %" in events["idle_stop"]["why"]
    assert events["checkpoint_requested"]["reason"] == "idle"
    assert events["checkpoint_committed"]["step"] >= 1
    end = events["attempt_end"]
    assert (end["reason"], end["requeued"], end["exit_code"]) == ("stopped_idle", False, 79)
    assert not any(c[:2] == ("scontrol", "requeue") for c in runner.calls)
    # Slurm starting it again (a requeue by someone) runs nothing: the job ended.
    again = Sidecar(SidecarConfig(**{**config.__dict__, "attempt": 1}), runner).run()
    assert again == EXIT_STOPPED_IDLE
    assert read_ledger(tmp_path)[-1]["event"] == "restart_refused"


def test_a_job_without_the_guard_or_with_busy_gpus_runs_on(tmp_path: Path) -> None:
    env = dict(os.environ, SLURM_JOB_ID="4242", PYTHONPATH=str(REPO))
    env.pop("SLURM_JOB_NODELIST", None)
    config = SidecarConfig(
        launcher="srun",
        command=(sys.executable, TRAINER, "--steps", "60", "--sleep", "0.1"),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        stop_timeout=1.0,
    )
    _idle_from_now_on(tmp_path, idle_since_ago=100)  # idle, but no stop_after: runs to its end
    assert Sidecar(config, FakeRunner(lambda argv: result(argv))).run() == 0
    assert read_ledger(tmp_path)[-1]["reason"] == "success"
