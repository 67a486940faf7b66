"""GPU monitoring under the real sidecar (node-exec forks the sampler before it execs):
on this machine there is no NVML, which is recorded once and changes nothing for the job."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from hpclaunch.supervise.gpumon import start_detached
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.sidecar import Sidecar

from .test_sidecar import config, slurm_answers

DUMP_ENV = (
    "import os, sys; "
    "open(sys.argv[1], 'w').write(os.environ.get('WANDB_RUN_ID', '-') + ' ' "
    "+ os.environ.get('WANDB_RESUME', '-')); "
    "sys.exit(int(sys.argv[2]))"
)


def _monitor_off(tmp_path: Path) -> list[dict[str, object]]:
    return [e for e in read_ledger(tmp_path) if e["event"] == "gpu_monitor_off"]


def test_monitoring_off_is_recorded_once_and_the_exit_code_is_the_trainers(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, "--steps", "3", "--fail")
    code = Sidecar(cfg, slurm_answers()).run()
    assert code != 0  # the trainer's own failure code, passed through
    ends = [e for e in read_ledger(tmp_path) if e["event"] == "attempt_end"]
    assert ends[-1]["reason"] == "user_error"
    assert ends[-1]["exit_code"] == code
    (off,) = _monitor_off(tmp_path)
    assert off["attempt"] == 0
    assert "pynvml" in str(off["reason"]) or "nvmlInit" in str(off["reason"])
    assert not (tmp_path / "metrics.jsonl").exists()


def test_success_is_unaffected_and_wandb_continues_one_run(tmp_path: Path) -> None:
    out = tmp_path / "wandb.txt"
    cfg = config(tmp_path)
    env = dict(cfg.env or {}, HPCLAUNCH_SUBMISSION_ID="abc123")
    cfg = replace(cfg, env=env, command=(sys.executable, "-c", DUMP_ENV, str(out), "0"))
    assert Sidecar(cfg, slurm_answers()).run() == 0
    assert out.read_text() == "abc123 allow"
    assert len(_monitor_off(tmp_path)) == 1
    # The user's own run id wins.
    env["WANDB_RUN_ID"] = "mine"
    cfg = replace(cfg, env=env, attempt=1)
    assert Sidecar(cfg, slurm_answers()).run() == 0
    assert out.read_text() == "mine allow"
    assert len(_monitor_off(tmp_path)) == 2  # once per attempt (and node)


def test_only_the_nodes_first_task_samples(tmp_path: Path) -> None:
    env = {"HPCLAUNCH_JOB_DIR": str(tmp_path), "SLURM_LOCALID": "1"}
    assert start_detached(env) is None
    assert read_ledger(tmp_path) == []
