"""Out of memory in the sidecar: the job cgroup's limit, peak and OOM kills (cgroup v1 and
v2 trees as Slurm's task/cgroup lays them out), where the launch ran out, the watch that
stops a multi-rank launch, and the OOM retry that asks for more memory (fake scontrol; the
cluster tests are tests/integration/test_memory_on_cluster.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hpclaunch.jobspec.job import JobSpec
from hpclaunch.supervise.failures import oom_culprit
from hpclaunch.supervise.ledger import read_ledger
from hpclaunch.supervise.memory import JobMemory, job_cgroup, job_memory
from hpclaunch.supervise.on_oom import GRACE, OomWatch
from hpclaunch.supervise.retry import RetryPolicy, raised_memory
from hpclaunch.supervise.sidecar import EXIT_REQUEUED, Sidecar, SidecarConfig
from tests.supervise.test_retry import _scontrol

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"

V1_SELF = (
    "9:name=systemd:/docker/abc\n4:memory:/slurm/uid_0/job_31/step_batch/task_0\n"
    "3:cpuset:/\n0::/docker/abc\n"
)
V2_SELF = "0::/system.slice/n1_slurmstepd.scope/job_31/step_batch/user/task_0\n"


def _v1_tree(root: Path, kills: dict[str, int]) -> Path:
    job = root / "memory/slurm/uid_0/job_31"
    for sub, n in kills.items():
        d = job / sub if sub else job
        d.mkdir(parents=True, exist_ok=True)
        (d / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {n}\n")
    (job / "memory.limit_in_bytes").write_text("314572800\n")
    (job / "memory.max_usage_in_bytes").write_text("314400768\n")
    return job


def test_v1_limit_peak_and_kills_summed_over_the_steps(tmp_path: Path) -> None:
    job = _v1_tree(tmp_path, {"": 0, "step_0": 1, "step_0/task_0": 1, "step_batch": 0})
    assert job_cgroup(V1_SELF, tmp_path) == job
    assert job_memory(V1_SELF, tmp_path) == JobMemory(314572800, 314400768, 2)


def test_v1_unlimited_is_no_limit(tmp_path: Path) -> None:
    job = _v1_tree(tmp_path, {"": 0})
    (job / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    memory = job_memory(V1_SELF, tmp_path)
    assert memory is not None
    assert memory.limit is None


def test_v2_reads_max_peak_and_events(tmp_path: Path) -> None:
    job = tmp_path / "system.slice/n1_slurmstepd.scope/job_31"
    job.mkdir(parents=True)
    (job / "memory.max").write_text("314572800\n")
    (job / "memory.peak").write_text("1000\n")
    (job / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert job_memory(V2_SELF, tmp_path) == JobMemory(314572800, 1000, 1)
    (job / "memory.max").write_text("max\n")
    memory = job_memory(V2_SELF, tmp_path)
    assert memory is not None
    assert memory.limit is None


def test_outside_a_job_cgroup_nothing_is_known(tmp_path: Path) -> None:
    assert job_memory("4:memory:/process_api/1f13\n0::/\n", tmp_path) is None
    assert job_memory(V1_SELF, tmp_path) is None  # the line names a cgroup that is not there


def test_where_the_launch_ran_out() -> None:
    srun = ["rank 0 eating", "srun: error: n3: tasks 4-7: Out Of Memory", "srun: Terminating"]
    assert oom_culprit(srun, "srun") == {"oom_node": "n3", "oom_rank": "4-7"}
    # torchrun: srun's task is the node's agent; the summary names the rank.
    torchrun = (DATA / "torchrun-2.13-rank2-oom.txt").read_text().splitlines()
    assert oom_culprit(torchrun, "torchrun") == {"oom_node": "n1", "oom_rank": "2"}
    assert oom_culprit(["Traceback", "ValueError: x"], "srun") == {}


def test_the_watch_stops_a_multi_rank_launch_left_running_after_a_kill() -> None:
    seen = [JobMemory(300, 10, 3)]
    clock = [0.0]
    watch = OomWatch(multi_rank=True, read=lambda: seen[-1], clock=lambda: clock[0])
    assert not watch.poll()  # the 3 kills were there before the attempt
    seen.append(JobMemory(300, 300, 4))
    clock[0] = 0.1
    assert not watch.poll()  # read at most every CHECK_EVERY
    clock[0] = 1.0
    assert not watch.poll()  # seen now: the launch gets GRACE s to end by itself
    clock[0] = 1.0 + GRACE
    assert watch.poll()
    # The step's cgroup, and the kill it counted, went with the step (cgroup v1).
    seen.append(JobMemory(300, 300, 3))
    assert watch.fields() == {"mem_limit": 300, "mem_peak": 300, "oom_kills": 1}
    single = OomWatch(multi_rank=False, read=lambda: seen[-1], clock=lambda: clock[0])
    seen.append(JobMemory(300, 300, 9))
    clock[0] = 99.0
    assert not single.poll()  # one rank: its own end ends the launch
    assert single.new_kills() == 6
    unenforced = OomWatch(multi_rank=True, read=lambda: JobMemory(None, 5, 0))
    assert not unenforced.poll()


def _policy(factor: float, cap: int | None) -> RetryPolicy:
    spec = JobSpec.model_validate(
        {
            "name": "r",
            "command": ["x"],
            "launcher": "srun",
            "retry": {"times": 2, "when": ["oom"], "oom_memory_factor": factor},
        }
    )
    assert spec.retry is not None
    policy = RetryPolicy.from_env({"HPCLAUNCH_RETRY": spec.retry.env_value(cap)})
    assert policy is not None
    return policy


def test_more_memory_after_an_oom_capped_by_the_partition() -> None:
    assert raised_memory(_policy(1.5, 4000), 200) == (
        300,
        "memory 200 -> 300 MB (retry.oom_memory_factor x1.5)",
    )
    mb, why = raised_memory(_policy(1.5, 4000), 3000)
    assert mb == 4000
    assert "capped" in why
    mb, why = raised_memory(_policy(1.5, 4000), 4000)
    assert mb == 4000
    assert "cannot raise it further" in why
    assert raised_memory(_policy(1.1, None), 1000)[0] == 1100  # no float noise: not 1101


def _oom_config(tmp_path: Path, retry: dict[str, Any], mem: str) -> SidecarConfig:
    spec = JobSpec.model_validate(
        {"name": "r", "command": ["x"], "launcher": "srun", "retry": retry}
    )
    assert spec.retry is not None
    env = dict(os.environ, SLURM_JOB_ID="4242", PYTHONPATH=str(REPO), SLURM_MEM_PER_NODE=mem)
    env.pop("SLURM_JOB_NODELIST", None)
    env["HPCLAUNCH_RETRY"] = spec.retry.env_value(4000)
    # In a job the sidecar's output is the attempt log (sbatch --output): written there.
    log = tmp_path / "attempt-0.log"
    line = "srun: error: n1: task 0: Out Of Memory\n"
    code = f"import sys; open({str(log)!r}, 'a').write({line!r}); sys.exit(1)"
    return SidecarConfig(
        launcher="srun",
        command=(sys.executable, "-c", code),
        python=sys.executable,
        job_dir=tmp_path,
        env=env,
        stop_timeout=1.0,
        log_path=log,
    )


def test_an_oom_retry_asks_slurm_for_more_memory(tmp_path: Path) -> None:
    runner = _scontrol()
    retry = {"times": 2, "when": ["oom"], "backoff": 1, "oom_memory_factor": 1.5}
    assert Sidecar(_oom_config(tmp_path, retry, "200"), runner).run() == EXIT_REQUEUED
    assert ("scontrol", "update", "JobId=4242", "MinMemoryNode=300") in runner.calls
    kinds = [c[:2] for c in runner.calls]
    assert kinds.index(("scontrol", "requeue")) < kinds.index(("scontrol", "update"))
    ledger = {e["event"]: e for e in read_ledger(tmp_path)}
    assert (ledger["memory_raised"]["mem_mb"], ledger["memory_raised"]["was_mb"]) == (300, 200)
    end = ledger["attempt_end"]
    assert (end["reason"], end["retry_mem_mb"], end["oom_node"], end["oom_rank"]) == (
        "oom",
        300,
        "n1",
        "0",
    )


def test_at_the_partitions_memory_the_retry_says_so_and_asks_nothing(tmp_path: Path) -> None:
    runner = _scontrol()
    retry = {"times": 2, "when": ["oom"], "backoff": 1, "oom_memory_factor": 2}
    assert Sidecar(_oom_config(tmp_path, retry, "4000"), runner).run() == EXIT_REQUEUED
    assert not any("MinMemoryNode" in " ".join(c) for c in runner.calls)
    ledger = {e["event"]: e for e in read_ledger(tmp_path)}
    assert "cannot raise it further" in ledger["memory_not_raised"]["why"]


def test_the_factor_without_oom_in_when_is_refused_with_the_fix() -> None:
    with pytest.raises(ValidationError, match=r"add oom to when \(when: \[oom\]\)"):
        JobSpec.model_validate(
            {
                "name": "r",
                "command": ["x"],
                "launcher": "srun",
                "retry": {"times": 1, "when": ["node_failure"], "oom_memory_factor": 1.5},
            }
        )
    with pytest.raises(ValidationError, match="greater than 1"):
        _policy(1.0, None)


def test_kills_slurmstepd_reported_count_when_the_step_took_its_count_along() -> None:
    watch = OomWatch(multi_rank=False, read=lambda: JobMemory(300, 300, 0))
    watch.note_reported(
        [
            "[2026-12-07T06:56:18.690] error: Detected 2 oom_kill events in StepId=4.0. Some "
            "of the step tasks have been OOM Killed.",
            "error: Detected 1 oom_kill event in StepId=4.batch. Some of the step tasks ...",
        ]
    )
    assert watch.fields()["oom_kills"] == 3


def test_kills_in_slurm_22_05s_wording() -> None:
    """22.05 says "oom-kill event(s)"; its step's cgroup, and count, were gone when read."""
    watch = OomWatch(multi_rank=False, read=lambda: JobMemory(200 << 20, 200 << 20, 0))
    watch.note_reported((DATA / "srun-22.05-one-rank-oom.txt").read_text().splitlines())
    assert watch.fields()["oom_kills"] == 1


def test_the_dry_run_says_how_memory_grows_after_an_oom() -> None:
    spec = JobSpec.model_validate(
        {
            "name": "r",
            "command": ["x"],
            "launcher": "srun",
            "retry": {"times": 2, "when": ["oom"], "oom_memory_factor": 1.5},
        }
    )
    assert spec.retry is not None
    assert spec.retry.describe(4000) == (
        "retry: up to 2 time(s) on oom, the first 60 s after the failure, each wait doubled "
        "(at most 3600 s); after an OOM the next attempt asks 1.5x the memory enforced (at "
        "most 4,000 MB, the partition's nodes)"
    )
