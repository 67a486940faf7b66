"""The argv of every launcher, exactly: what the sidecar starts and what each node execs."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from hpclaunch.supervise.launchers import node_argv, node_env, step_argv
from hpclaunch.supervise.node import node_command
from hpclaunch.supervise.rendezvous import Rendezvous

PY = "/shared/venv/bin/python"
CMD = ["python", "train.py", "--lr", "0.1"]
RDZV = Rendezvous("4242", "n1", 24242, ("n1", "n2"), 1, 4, gpus=True)
EXEC = [
    PY,
    "-m",
    "hpclaunch.supervise",
    "node-exec",
    "--launcher={}",
    "--nnodes=2",
    "--nproc-per-node=4",
    "--master-addr=n1",
    "--master-port=24242",
    "--job-id=4242",
    "--",
    *CMD,
]


def _exec(launcher: str) -> list[str]:
    return [arg.format(launcher) if "{}" in arg else arg for arg in EXEC]


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed", "accelerate"])
def test_step_argv_one_launcher_per_node(launcher: str) -> None:
    argv = step_argv(launcher, RDZV, CMD, python=PY, cpus_per_node=8)  # type: ignore[arg-type]
    assert argv == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=8",
        *_exec(launcher),
    ]


def test_step_argv_srun_one_task_per_process() -> None:
    argv = step_argv("srun", RDZV, CMD, python=PY, cpus_per_node=8)
    assert argv == [
        "srun",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=2",
        *_exec("srun"),
    ]
    # Without SLURM_CPUS_PER_TASK (--cpus-per-gpu jobs) srun reads the batch environment.
    assert "--cpus-per-task=2" not in step_argv("srun", RDZV, CMD, python=PY)


def test_torchrun() -> None:
    assert node_argv("torchrun", RDZV, CMD) == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=n1:24242",
        "--rdzv-id=4242",
        "--no-python",
        *CMD,
    ]


def test_deepspeed_runs_its_per_node_launcher_itself() -> None:
    """DeepSpeed's launch.py, not its runner (which dies of SIGTERM without passing it on
    where proctrack/cgroup signals only the step's tasks): world_info as the runner encodes
    it, decoded here as launch.py decodes it."""
    argv = node_argv("deepspeed", RDZV, CMD)
    assert argv[:4] == ["python3", "-u", "-m", "deepspeed.launcher.launch"]
    assert argv[5:] == [
        "--master_addr=n1",
        "--master_port=24242",
        "--node_rank=1",
        "--no_python",
        "--no_local_rank",
        *CMD,
    ]
    flag, encoded = argv[4].split("=", 1)
    assert flag == "--world_info"
    world = json.loads(base64.urlsafe_b64decode(encoded))
    assert list(world.items()) == [("n1", [0, 1, 2, 3]), ("n2", [0, 1, 2, 3])]


def test_accelerate() -> None:
    assert node_argv("accelerate", RDZV, CMD) == [
        "accelerate",
        "launch",
        "--multi_gpu",
        "--num_machines=2",
        "--machine_rank=1",
        "--main_process_ip=n1",
        "--main_process_port=24242",
        "--num_processes=8",
        "--no_python",
        *CMD,
    ]
    cpu = Rendezvous("4242", "n1", 24242, ("n1", "n2"), 0, 1, gpus=False)
    # --cpu would take accelerate's one-process-per-machine launcher: a world of 1 per node
    assert node_argv("accelerate", cpu, CMD)[2] == "--multi_gpu"
    assert node_env("accelerate", cpu, {})["ACCELERATE_USE_CPU"] == "true"
    assert "ACCELERATE_USE_CPU" not in node_env("accelerate", RDZV, {})


def test_srun_runs_the_command_itself_with_rank_variables() -> None:
    assert node_argv("srun", RDZV, CMD) == CMD
    env = node_env("srun", RDZV, {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"})
    assert env == {
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "24242",
        "NODE_RANK": "1",
        "NNODES": "2",
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
    }
    assert "RANK" not in node_env("torchrun", RDZV, {"SLURM_PROCID": "5"})


def test_node_exec_takes_the_node_rank_from_the_srun_task(tmp_path: Path) -> None:
    env = {"SLURM_NODEID": "1", "CUDA_VISIBLE_DEVICES": "0,1", "KEEP": "me"}
    env.update(SLURM_STEP_NODELIST="n[3-4]", TMPDIR=str(tmp_path))
    argv, new_env = node_command(
        "deepspeed",
        nnodes=2,
        nproc_per_node=2,
        master_addr="n1",
        master_port=20001,
        job_id="7",
        command=CMD,
        env=env,
    )
    world = json.loads(base64.urlsafe_b64decode(argv[4].split("=", 1)[1]))
    assert list(world) == ["n3", "n4"]  # Slurm's order: --node_rank indexes it
    assert world["n3"] == [0, 1]
    assert "--node_rank=1" in argv
    assert new_env["KEEP"] == "me"
    assert new_env["NODE_RANK"] == "1"
    assert new_env["MASTER_PORT"] == "20001"
