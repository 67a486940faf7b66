"""GPU monitoring under the real sidecar (node-exec forks the sampler before it execs).

The tests say whether monitoring is on: turned off (``HPCLAUNCH_GPU_INTERVAL=0``) it is
recorded once and changes nothing for the job, on any machine; on a machine with an NVIDIA
driver and pynvml, one test checks real samples of the job's GPUs (it skips elsewhere,
saying so).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hpclaunch import jobdir
from hpclaunch.supervise.gpumon import load_nvml, read_metrics, start_detached
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.sidecar import Sidecar, SidecarConfig

from .test_sidecar import config, slurm_answers

DUMP_ENV = (
    "import os, sys; "
    "open(sys.argv[1], 'w').write(os.environ.get('WANDB_RUN_ID', '-') + ' ' "
    "+ os.environ.get('WANDB_RESUME', '-')); "
    "sys.exit(int(sys.argv[2]))"
)


OFF = "disabled (HPCLAUNCH_GPU_INTERVAL=0)"


def _monitor_off(tmp_path: Path) -> list[dict[str, object]]:
    return [e for e in read_ledger(tmp_path) if e["event"] == "gpu_monitor_off"]


def _monitoring(cfg: SidecarConfig, interval: str) -> SidecarConfig:
    return replace(cfg, env=dict(cfg.env or {}, HPCLAUNCH_GPU_INTERVAL=interval))


def _nvml_gpus() -> str | None:
    """Why this machine cannot sample GPUs, or ``None`` when it can."""
    nvml, why = load_nvml()
    if nvml is None:
        return why
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return f"nvmlInit failed: {exc}"
    try:
        count = int(nvml.nvmlDeviceGetCount())
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return None if count else "NVML sees no GPU"


def test_monitoring_off_is_recorded_once_and_the_exit_code_is_the_trainers(
    tmp_path: Path,
) -> None:
    cfg = _monitoring(config(tmp_path, "--steps", "3", "--fail"), "0")
    code = Sidecar(cfg, slurm_answers()).run()
    assert code != 0  # the trainer's own failure code, passed through
    ends = [e for e in read_ledger(tmp_path) if e["event"] == "attempt_end"]
    assert ends[-1]["reason"] == "user_error"
    assert ends[-1]["exit_code"] == code
    (off,) = _monitor_off(tmp_path)
    assert off["attempt"] == 0
    assert off["reason"] == OFF
    assert not (tmp_path / jobdir.GPU_METRICS).exists()


def test_success_is_unaffected_and_wandb_continues_one_run(tmp_path: Path) -> None:
    out = tmp_path / "wandb.txt"
    cfg = _monitoring(config(tmp_path), "0")
    env = dict(cfg.env or {}, HPCLAUNCH_SUBMISSION_ID="abc123")
    cfg = replace(cfg, env=env, command=(sys.executable, "-c", DUMP_ENV, str(out), "0"))
    assert Sidecar(cfg, slurm_answers()).run() == 0
    assert out.read_text() == "abc123 allow"
    assert len(_monitor_off(tmp_path)) == 1
    # The user's own run id wins (another job: after a success the job runs no more).
    env["WANDB_RUN_ID"] = "mine"
    again = tmp_path / "again"
    again.mkdir()
    cfg = replace(cfg, env=env, attempt=1, job_dir=again)
    assert Sidecar(cfg, slurm_answers()).run() == 0
    assert out.read_text() == "mine allow"
    assert len(_monitor_off(again)) == 1  # once per attempt (and node)


def test_a_gpu_of_the_job_is_sampled_where_nvml_works(tmp_path: Path) -> None:
    why = _nvml_gpus()
    if why is not None:
        pytest.skip(f"no GPU to sample on this machine ({why})")
    # The job's first GPU, by CUDA index; 0.2 s samples while the trainer runs ~2 s.
    cfg = config(tmp_path, "--steps", "40")
    cfg = replace(cfg, env=dict(cfg.env or {}, CUDA_VISIBLE_DEVICES="0"))
    assert Sidecar(_monitoring(cfg, "0.2"), slurm_answers()).run() == 0
    assert _monitor_off(tmp_path) == []
    samples = read_metrics((tmp_path / jobdir.GPU_METRICS).read_text())
    assert len(samples) >= 3, samples
    assert {s["gpu"] for s in samples} == {samples[0]["gpu"]}  # only the job's one GPU
    assert str(samples[0]["gpu"]).startswith(("GPU-", "MIG-"))
    assert all(isinstance(s["util"], int) and 0 <= s["util"] <= 100 for s in samples)
    assert all(isinstance(s["mem_total"], int) and s["mem_total"] > 0 for s in samples)
    assert {s["attempt"] for s in samples} == {0}


def test_only_the_nodes_first_task_samples(tmp_path: Path) -> None:
    env = {"HPCLAUNCH_JOB_DIR": str(tmp_path), "SLURM_LOCALID": "1"}
    assert start_detached(env) is None
    assert read_ledger(tmp_path) == []
