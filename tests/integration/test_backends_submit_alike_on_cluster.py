"""A job submitted through pyslurm is the job sbatch makes: the same record in slurmctld
(``scontrol show job``) and the same Slurm variables in its batch script's environment.

This is what lets the in-job modules (sidecar, tiers, arbiter: warnings, preemption, time
limits, requeues, resizes) run with the cli backend alone: what a backend decides there is
the job it submits, shown alike here for a spec of each shape they use, and what it reads
and does afterwards (queue, status, requeue, hold, signal) is shown alike in
``test_backends_agree_on_cluster``.

Found by it (25.11): a pyslurm job's environment had no ``SLURM_CPUS_PER_TASK``,
``SLURM_TRES_PER_TASK``, ``SLURM_NTASKS_PER_NODE`` nor ``SLURM_PRIO_PROCESS`` (sbatch exports
them itself; ``jobdesc.sbatch_environment`` and the pyslurm backend now do), and had
``SLURM_PROFILE=Energy,Lustre,Network,Task`` (pyslurm's default asks for every profile).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import SlurmCluster
from .conftest import TEST_BACKENDS, Cli, squeue

pytestmark = [pytest.mark.slurm]

VENV = str(Path(__file__).resolve().parents[2] / ".venv")
HELD = {"--hold": None}
#: Specs of each shape the in-job modules submit (their tiers, launchers, checkpoint
#: settings, GPUs, node lists and elasticity), held so that they take nothing.
SPECS: dict[str, dict[str, Any]] = {
    "torchrun-low": {
        "command": ["python", "examples/ddp_train.py", "--steps", "150"],
        "launcher": "torchrun",
        "tier": "low",
        "venv": VENV,
        "resources": {"nodes": 2, "gpus_per_node": 1, "time": "00:05:00", "mem": "200M"},
    },
    "time-limit-medium": {
        "command": ["python", "examples/ddp_train.py", "--steps", "100000"],
        "launcher": "torchrun",
        "tier": "medium",
        "venv": VENV,
        "checkpoint": {"signal_lead_time": 20, "max_requeues": 1},
        "sbatch_extra": {"--exclude": "n1"},
        "resources": {"time": "10", "mem": "200M"},
    },
    "srun-cpus": {
        "command": ["python", "-c", "print(1)"],
        "launcher": "srun",
        "tier": "low",
        "resources": {"nodes": 2, "cpus_per_task": 2, "time": "00:02:00", "mem": "100M"},
    },
    "elastic": {
        "command": ["python", "examples/elastic_train.py", "--steps", "100"],
        "launcher": "torchrun",
        "processes_per_node": 1,
        "tier": "low",
        "venv": VENV,
        "resources": {"nodes": 4, "gpus_per_node": 4, "time": "00:10:00", "mem": "300M"},
        "elastic": {"nodes": [2, 4], "global_batch": 16, "max_batch_per_gpu": 4},
    },
    "critical": {
        "command": ["sleep", "5"],
        "tier": "critical",
        "resources": {"nodes": 2, "gpus_per_node": 4, "time": "00:05:00", "mem": "100M"},
    },
}
#: Fields that differ between any two jobs (ids, times) or name the job's own directory.
_PER_JOB = frozenset(
    {
        "JobId",
        "ArrayJobId",
        "SubmitTime",
        "EligibleTime",
        "AccrueTime",
        "StartTime",
        "EndTime",
        "LastSchedEval",
        "Command",
        "Comment",
        "StdOut",
        "StdErr",
        "Priority",  # 0 for both while held; a pending job's is recalculated in between
    }
)
#: Where a pyslurm job differs from sbatch's, and why that is no difference in behaviour.
_KNOWN = {
    # sbatch records its own command line; a job made through the API has none.
    "SubmitLine",
    # sbatch turns --cpus-per-task into TresPerTask=cpu=N as well (src/common/slurm_opt.c,
    # 24.11+); pyslurm 25.11.2's tres_per_task takes GPUs only. What the job gets is the
    # same: CpusPerTask is equal, and the batch environment has SLURM_TRES_PER_TASK from
    # jobdesc.sbatch_environment (the last test of this module).
    "TresPerTask",
    # libslurm's slurm_init_job_desc_msg leaves oom_kill_step 0 where sbatch leaves it
    # unset (src/api/init_msg.c, 25.11.7); 0 is the default of a slurm.conf without
    # TaskPluginParam=OOMKillStep, and pyslurm 25.11.2 has no attribute to unset it.
    "OOMKillStep",
}
_FIELD = re.compile(r"[A-Z][A-Za-z0-9_:/]*=")
#: Batch-environment variables that name the job, its node or its times.
_ENV_PER_JOB = re.compile(
    r"SLURM_(JOB_?ID|JOB_NAME|TASK_PID|JOB_START_TIME|JOB_END_TIME|SUBMIT_DIR|"
    r"SUBMIT_HOST|JOB_NODELIST|NODELIST|TOPOLOGY_ADDR|CPU_BIND.*|CLUSTER_NAME|CONF|"
    r"JOB_UID|JOB_USER|JOB_GID|JOB_GROUP|SCRIPT_CONTEXT|UMASK)|SLURMD_NODENAME"
)


@pytest.fixture(scope="module")
def clis(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Cli]]:
    if "pyslurm" not in TEST_BACKENDS:
        pytest.skip("pyslurm not among $HPCLAUNCH_TEST_BACKENDS")
    clis = {}
    for backend in ("cli", "pyslurm"):
        cli = Cli(tmp_path_factory.mktemp(f"state-{backend}"))
        cli.env["HPCLAUNCH_BACKEND"] = backend
        clis[backend] = cli
    yield clis
    ids = [i for cli in clis.values() for i in cli.submitted()]
    subprocess.run(["scancel", *ids], check=False, capture_output=True)


def _submit(cli: Cli, spec: dict[str, Any], spec_dir: Path, *command: str) -> str:
    path = spec_dir / f"{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(json.dumps(spec))
    out = cli(*command, str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def _cancel(job_id: str) -> None:
    """Cancel the job and wait until squeue no longer lists it pending."""
    subprocess.run(["scancel", job_id], check=True)
    deadline = time.monotonic() + 30
    while squeue(job_id, "%T") == "PENDING":
        assert time.monotonic() < deadline, f"{job_id} still pending after scancel"
        time.sleep(0.2)


def _record(job_id: str, job_dir: str) -> dict[str, str]:
    """``scontrol show job -o``'s fields, less those of :data:`_PER_JOB`, the job's own
    directory written as ``<dir>``."""
    text = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True
    ).stdout.replace(job_dir, "<dir>")
    # Words of SubmitLine's value (sbatch's argv, "--array=...") are not fields.
    fields = dict(x.split("=", 1) for x in text.split() if _FIELD.match(x))
    return {k: v for k, v in fields.items() if k not in _PER_JOB}


def _differences(a: dict[str, str], b: dict[str, str]) -> dict[str, tuple[str, str]]:
    keys = (a.keys() | b.keys()) - _KNOWN
    return {k: (a.get(k, "-"), b.get(k, "-")) for k in sorted(keys) if a.get(k) != b.get(k)}


@pytest.mark.parametrize("shape", sorted(SPECS))
def test_both_backends_submit_the_same_job(
    clis: dict[str, Cli], shape: str, tmp_path: Path
) -> None:
    spec = {"name": f"alike-{shape}", "project": "research", **SPECS[shape]}
    spec["sbatch_extra"] = {**spec.get("sbatch_extra", {}), **HELD}
    records = {}
    for backend, cli in clis.items():
        job_id = _submit(cli, spec, tmp_path, "submit")
        records[backend] = _record(job_id, cli.submitted()[job_id]["job_dir"])
        _cancel(job_id)  # its GPUs would count against the project's quota for the next
    assert records["cli"]["JobState"] == "PENDING"
    assert records["cli"]["Reason"] == "JobHeldUser"
    assert _differences(records["cli"], records["pyslurm"]) == {}


def test_both_backends_submit_the_same_sweep_array(clis: dict[str, Cli], tmp_path: Path) -> None:
    spec = {
        "name": "alike-sweep",
        "project": "research",
        "command": ["echo", "{a}"],
        "resources": {"time": "00:05:00", "mem": "50M"},
        "sweep": {"method": "grid", "parameters": {"a": [1, 2, 3]}, "max_concurrent": 2},
        "sbatch_extra": HELD,
    }
    records = {}
    for backend, cli in clis.items():
        _submit(cli, spec, tmp_path, "sweep")
        row = cli.submitted_rows()[-1]
        records[backend] = _record(row["job_id"], row["job_dir"])
        _cancel(row["job_id"])
    assert records["cli"]["ArrayTaskId"] == "0-2%2"
    assert _differences(records["cli"], records["pyslurm"]) == {}


def test_both_backends_give_the_batch_script_the_same_slurm_variables(
    clis: dict[str, Cli], tmp_path: Path
) -> None:
    spec = {
        "name": "alike-env",
        "project": "research",
        "command": ["bash", "-c", 'env > "$HPCLAUNCH_JOB_DIR/env.txt"'],
        "resources": {"cpus_per_task": 2, "time": "00:02:00", "mem": "50M"},
    }
    found = {}
    for backend, cli in clis.items():
        job_id = _submit(cli, spec, tmp_path, "submit")
        path = Path(cli.submitted()[job_id]["job_dir"]) / "env.txt"
        deadline = time.monotonic() + 120
        while not (path.exists() and path.read_text().endswith("\n")):
            assert time.monotonic() < deadline, f"{backend}'s job {job_id} wrote no env.txt"
            time.sleep(0.2)
        lines = path.read_text().splitlines()
        found[backend] = {
            k: v
            for k, v in (x.split("=", 1) for x in lines if x.startswith("SLURM") and "=" in x)
            if not _ENV_PER_JOB.fullmatch(k)
        }
    assert found["cli"]["SLURM_CPUS_PER_TASK"] == "2"
    assert _differences(found["cli"], found["pyslurm"]) == {}
