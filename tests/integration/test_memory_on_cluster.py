"""Issue 48 on the cluster, whose nodes enforce memory (task/cgroup, ConstrainRAMSpace:
docker/slurm-cluster/etc/cgroup.conf): a job past its ``mem:`` is killed by the kernel and
ends OUT_OF_MEMORY at once, one rank or four (torchrun, rank 2 past its share: the others do
not wait for it), ``status``, ``events`` and ``report`` say which node and rank, a function
job's ``result()`` raises JobFailed naming OUT_OF_MEMORY, and ``retry: {when: [oom],
oom_memory_factor}`` runs the next attempt with more memory, which completes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Run, wait_state

# compat: also on Slurm 22.05 (scripts/test): its nodes enforce memory the same way.
pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]

PYTHON = str(Path(sys.executable))
#: Holds MB megabytes (20 at a time) on rank RANK (every rank when unset), then sleeps: the
#: other ranks stand for ranks waiting in a collective. FULL_ON_ATTEMPT: only that attempt
#: and later ones get through (the retry test).
EAT = (
    "import os, sys, time\n"
    "rank = int(os.environ.get('RANK', os.environ.get('SLURM_PROCID', '0')))\n"
    "attempt = int(os.environ.get('HPCLAUNCH_ATTEMPT', '0'))\n"
    "mb = int(sys.argv[1])\n"
    "if os.environ.get('IMPORT_TORCH'):\n"
    "    import torch  # a rank holds at least this much (~225 MB), torchrun's agent too\n"
    "print(f'rank {rank} attempt {attempt} up', flush=True)\n"
    "if os.environ.get('EAT_RANK') in (None, str(rank)):\n"
    "    held = [bytearray(20 << 20) for _ in range(mb // 20)]\n"
    "    print(f'rank {rank} holds {mb} MB', flush=True)\n"
    "time.sleep(float(os.environ.get('EAT_SLEEP', '0')))\n"
    "print(f'rank {rank} done', flush=True)\n"
)


def _script(shared_dir: Path) -> Path:
    path = shared_dir / "eat.py"
    path.write_text(EAT)
    return path


def _events(run: Run, job_id: str) -> dict[str, Any]:
    shown = run("events", job_id, "--json")
    assert shown.returncode == 0, shown.stderr
    events: dict[str, Any] = json.loads(shown.stdout)
    return events


def _ends(events: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in events["ledger"] if e["event"] == "attempt_end"]


def test_one_rank_past_its_memory_ends_out_of_memory_and_says_where(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    spec = write_spec(
        command=[PYTHON, str(_script(shared_dir)), "400"],
        launcher="srun",
        resources={"time": "00:05:00", "mem": "200M"},
    )
    done = hpclaunch("submit", str(spec), "--wait", "--timeout", "90")
    assert done.returncode != 0
    job_id = done.stdout.strip()
    status = json.loads(hpclaunch("status", job_id, "--json").stdout)[0]
    assert status["state"] == "OUT_OF_MEMORY", status
    assert status["reason"] == f"OutOfMemory (step {job_id}.0)"
    assert status["out_of_memory"].startswith("rank 0 on n"), status
    end = _ends(_events(hpclaunch, job_id))[-1]
    assert end["reason"] == "oom"
    assert end["oom_rank"] == "0"
    assert end["oom_node"].startswith("n")
    assert end["mem_limit"] == 200 << 20  # the job cgroup's: what was enforced
    assert end["oom_kills"] >= 1
    report = hpclaunch("report", job_id)
    assert report.returncode == 0, report.stderr
    assert f"out of memory: rank 0 on {end['oom_node']} ran out of memory" in report.stdout
    assert "memory: it ran out at its 200 MiB limit" in report.stdout
    assert "oom_memory_factor" in report.stdout  # the advice names the retry that helps


def test_four_ranks_end_at_once_when_rank_2_runs_out(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    spec = write_spec(
        command=["python", str(_script(shared_dir)), "1400"],
        launcher="torchrun",
        venv=str(REPO / ".venv"),
        # Each rank as big as torchrun's agent, so that the kernel picks rank 2 (the
        # largest process) when the cgroup is full, not the agent. torch's libraries are
        # file pages shared by every process: the cgroup holds them once (~300 MB).
        env={"EAT_RANK": "2", "EAT_SLEEP": "300", "IMPORT_TORCH": "1"},
        resources={"time": "00:10:00", "mem": "1500M", "gpus_per_node": 4},
    )
    done = hpclaunch("submit", str(spec), "--wait", "--timeout", "150", timeout=200)
    assert done.returncode != 0
    job_id = done.stdout.strip()
    status = json.loads(hpclaunch("status", job_id, "--json").stdout)[0]
    assert status["state"] == "OUT_OF_MEMORY", status
    # The other three ranks sleep 300 s: the step ended because rank 2 was killed.
    minutes, seconds = status["elapsed"].split(":")[-2:]
    assert int(minutes) * 60 + int(seconds) < 60, status
    end = _ends(_events(hpclaunch, job_id))[-1]
    assert (end["reason"], end["oom_rank"]) == ("oom", "2"), end
    assert status["out_of_memory"].startswith(f"rank 2 on {end['oom_node']}"), status
    assert "rank 2 holds" not in hpclaunch.log(job_id)


FUNCTION_JOB = """
import sys
import hpclaunch
from hpclaunch.errors import JobFailed


def hungry(mb):
    held = [bytearray(20 << 20) for _ in range(mb // 20)]
    return len(held)


session = hpclaunch.Session(site="local")
job = session.submit(hungry, 600, project="research", resources={"time": "00:05:00", "mem": "250M"})
try:
    job.result(timeout=120)
except JobFailed as exc:
    print("STATE", exc.state)
    print("MESSAGE", exc.message.splitlines()[0])
    print("HINT", exc.hint)
    sys.exit(0)
sys.exit("no JobFailed")
"""


def test_a_function_job_out_of_memory_raises_job_failed_naming_it(hpclaunch: Run) -> None:
    ran = subprocess.run(
        [PYTHON, "-c", FUNCTION_JOB],
        cwd=REPO,
        env=hpclaunch.env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = dict(line.split(" ", 1) for line in ran.stdout.splitlines() if " " in line)
    assert lines["STATE"] == "OUT_OF_MEMORY", ran.stdout
    assert "OUT_OF_MEMORY" in lines["MESSAGE"]
    assert "resources.mem" in lines["HINT"]


def test_a_retry_on_oom_asks_for_more_memory_and_completes(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    spec = write_spec(
        command=[PYTHON, str(_script(shared_dir)), "300"],
        launcher="srun",
        resources={"time": "00:05:00", "mem": "200M"},
        retry={"times": 2, "when": ["oom"], "backoff": 1, "oom_memory_factor": 2},
    )
    submitted = hpclaunch("submit", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    final = wait_state(hpclaunch, job_id, {"COMPLETED", "FAILED", "OUT_OF_MEMORY"}, timeout=150)
    assert final["state"] == "COMPLETED", final
    events = _events(hpclaunch, job_id)
    raised = [e for e in events["ledger"] if e["event"] == "memory_raised"]
    assert [(e["was_mb"], e["mem_mb"]) for e in raised] == [(200, 400)]
    ends = _ends(events)
    assert [e["reason"] for e in ends] == ["oom", "success"]
    assert ends[0]["retry_mem_mb"] == 400
    assert ends[1]["mem_limit"] == 400 << 20  # the second attempt ran under the new limit
    attempts = events["attempts"]
    assert [a["state"] for a in attempts][-1] == "COMPLETED"
    assert "mem=400M" in (attempts[-1]["tres"] or "")
    assert "holds 300 MB" in hpclaunch.log(job_id)
