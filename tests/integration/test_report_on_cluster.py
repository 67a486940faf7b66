"""``hpclaunch report`` of a real job of the cluster that was warned, requeued and completed,
and its HTML page in a real headless browser (Debian's ``chromium``).

The job: a 1-node DDP trainer under the srun launcher on 2 GPUs, sampled every second through
the NVML stand-in of ``tests/integration/stubs/nvml`` (the cluster's GPUs are fake devices
without a driver; the sampler makes the same calls as on real GPUs). Once it has committed a
checkpoint, the test sends what Slurm sends at a preemption (``scancel --batch
--signal=USR1``): the sidecar checkpoints and requeues it, and attempt 1 resumes and
completes. The page is loaded headless: it must show both attempts, the timeline, the GPU
charts, and no console error; its screenshot is kept next to the page.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .browser import CHROMIUM, browser, console_errors
from .conftest import Cli, wait_progress, wait_state

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
VENV = str(REPO / ".venv")
STUBS = str(Path(__file__).resolve().parent / "stubs" / "nvml")


def _submit(hpclaunch: Cli, tmp_path: Path) -> str:
    train = ["python", "examples/ddp_train.py", "--steps", "120", "--every", "20"]
    spec = {
        "name": f"it-report-{tmp_path.name[-6:]}",
        "project": "research",
        "command": [*train, "--sleep", "0.2", "--log-dir", str(tmp_path / "steps")],
        "launcher": "srun",
        "venv": VENV,
        "resources": {"nodes": 1, "gpus_per_node": 2, "time": "10", "mem": "800M"},
        "env": {"PYTHONPATH": STUBS},
        "checkpoint": {"signal_lead_time": 20, "max_requeues": 2},
        # Slurm samples memory every 2 s (the cluster's 30 s would see little of attempts
        # this short): what the report's memory peak is checked against.
        "sbatch_extra": {"--acctg-freq": "task=2"},
    }
    path = tmp_path / "report.yaml"
    path.write_text(json.dumps(spec))
    # A sample a second (default 30 s): the sampler reads it from the environment sbatch
    # passes on from the submitting shell.
    hpclaunch.env["HPCLAUNCH_GPU_INTERVAL"] = "1"
    out = hpclaunch("submit", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_the_report_of_a_warned_requeued_and_completed_job(hpclaunch: Cli, tmp_path: Path) -> None:
    job_id = _submit(hpclaunch, tmp_path)
    job_dir = Path(hpclaunch.submitted()[job_id]["job_dir"])
    wait_progress(job_dir, 25, timeout=240, job_id=job_id)  # a checkpoint (step 20) is committed
    time.sleep(3)  # a few more samples in attempt 0
    # While it runs: when it should end, from the trainer's report_progress(step, total=120).
    status = hpclaunch("status", job_id)
    assert status.returncode == 0, status.stderr
    assert re.search(rf"job {job_id}: step \d+/120 at [\d.]+ steps/s, ends ~", status.stdout), (
        status.stdout
    )
    assert "before its time limit" in status.stdout  # 10 minutes: far more than it needs
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True)
    assert wait_state(hpclaunch, job_id, {"COMPLETED", "FAILED", "CANCELLED"}, 300)["state"] == (
        "COMPLETED"
    )

    out = hpclaunch("report", job_id, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    first, second = data["attempts"]
    assert (first["ended"], second["ended"], data["state"]) == ("preempted", "success", "COMPLETED")
    assert (first["committed_step"] or 0) >= 20
    # The trainer's last report (step 120, rate-limited, never forced: examples/ddp_train.py)
    # reached progress.json at its exit (issue 45: a 10-step task showed step 8).
    assert second["last_step"] == 120
    # Its newest commit is the trainer's own (step 120), and a success loses nothing.
    assert (second["committed_step"], second["steps_lost"]) == (120, None)
    assert first["ran_s"] > 0
    assert second["queued_s"] is not None
    # Each attempt's 2 GPUs, not its node's 4: the requeued attempt may run on another node
    # (it did beside the other tests, run 29) or on other GPUs of the same one (run 34: GPUs
    # 0-1, then 2-3 of n1), so the report's GPUs are those the samples name, 2 per attempt.
    nodes = {first["nodes"], second["nodes"]}
    assert {gpu["node"] for gpu in data["gpus"]} == nodes
    samples = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    by_attempt: dict[int, set[tuple[str, str]]] = {}
    for sample in samples:
        by_attempt.setdefault(sample["attempt"], set()).add((sample["node"], sample["gpu"]))
    assert [len(gpus) for _, gpus in sorted(by_attempt.items())] == [2, 2], by_attempt
    assert {(g["node"], g["gpu"]) for g in data["gpus"]} == set().union(*by_attempt.values())
    for gpu in data["gpus"]:
        assert gpu["samples"] >= 5
        assert 20 <= gpu["util_p10"] <= gpu["util_mean"] <= gpu["util_p90"] <= 100
        assert gpu["mem_total_mib"] == 80 * 1024
        # Energy: the stand-in's power (100-400 W) over the time the samples span.
        assert 100 * gpu["seconds"] / 3.6e6 <= gpu["energy_kwh"] <= 400 * gpu["seconds"] / 3.6e6
    # Every commit counts, the trainer's own every 20 steps too (issue 45: only the one the
    # sidecar asked for did): attempt 1 resumed before step 60 and committed 60, 80, ...
    steps = [step for _, step in data["checkpoints"]]
    assert {20, 60, 80, 100, 120} <= set(steps), steps
    assert len(steps) == len(set(steps)), steps  # each once
    ends = [e for e in hpclaunch_events(hpclaunch, job_id) if e["event"] == "attempt_end"]
    _assert_usage_is_saccts(job_id, data["usage"], [e["mem_peak"] for e in ends])

    text = hpclaunch("report", job_id)
    assert text.returncode == 0, text.stderr
    assert f"job {job_id} " in text.stdout
    assert "COMPLETED after 2 attempts" in text.stdout

    page = tmp_path / "report.html"
    html = hpclaunch("report", job_id, "--html", str(page))
    assert html.returncode == 0, html.stderr
    if CHROMIUM is None:
        pytest.skip("no chromium here to render the page (apt-get install chromium)")
    dom = browser(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert len(re.findall(r'<tr class="attempt">', dom.stdout)) == 2
    assert len(re.findall(r"<rect ", dom.stdout)) >= 3  # queued and running stretches
    # 3 metrics x each GPU, a line broken where the requeue's wait left no sample.
    drawn = re.findall(r'<polyline class="series" data-gpu="([^"]+)"', dom.stdout)
    assert len(set(drawn)) == len(data["gpus"])
    assert len(drawn) >= 3 * len(data["gpus"])
    assert console_errors(dom) == []
    shot = page.with_suffix(".png")
    taken = browser(page, f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.stat().st_size > 10_000
    print(f"report page and screenshot kept: {page} {shot}")


def hpclaunch_events(hpclaunch: Cli, job_id: str) -> list[dict[str, Any]]:
    shown = hpclaunch("events", job_id, "--json")
    assert shown.returncode == 0, shown.stderr
    ledger: list[dict[str, Any]] = json.loads(shown.stdout)["ledger"]
    return ledger


def _assert_usage_is_saccts(job_id: str, usage: dict[str, object], cgroup: list[int]) -> None:
    """The report's GPU-hours and CPU efficiency, computed here from sacct's own columns
    for every attempt and step; its memory peak the most of sacct's and of the job cgroup's
    (``cgroup``: the sidecar's ``mem_peak`` of each attempt, exact where sacct samples)."""
    fields = "JobID,Elapsed,AllocTRES,AllocCPUS,TotalCPU,TRESUsageInTot"
    out = subprocess.run(
        ["sacct", "-n", "-P", "-D", "-j", job_id, f"--format={fields}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    gpu_seconds = cpu_used = cpu_offered = 0.0
    peak = 0
    for line in out.splitlines():
        step, elapsed, tres, cpus, total_cpu, used = line.split("|")
        if step == job_id:  # an attempt
            seconds = _seconds(elapsed)
            gpus = re.search(r"gres/gpu=(\d+)", tres)
            gpu_seconds += (int(gpus.group(1)) if gpus else 0) * seconds
            cpu_offered += int(cpus) * seconds
            cpu_used += _seconds(total_cpu)
        elif (mem := re.search(r"(?:^|,)mem=([\d.]+)([KMG]?)", used)) is not None:
            scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[mem.group(2)]
            peak = max(peak, round(float(mem.group(1)) * scale))
    assert usage["gpu_hours"] == pytest.approx(gpu_seconds / 3600)
    assert gpu_seconds > 0
    assert usage["cpu_efficiency"] == pytest.approx(min(1.0, cpu_used / cpu_offered))
    assert peak > 0  # jobacct_gather/linux: each step's tasks' peaks
    assert cgroup  # the nodes enforce memory: each attempt's end says its cgroup's peak
    assert usage["mem_peak"] == max(peak, *cgroup)
    assert usage["mem_asked"] == 800 << 20  # the limit enforced, as asked


def _seconds(text: str) -> float:
    """sacct's [D-][HH:]MM:SS[.mmm] in seconds."""
    days, _, clock = text.rpartition("-")
    whole, _, fraction = clock.partition(".")
    seconds = 0.0
    for part in whole.split(":"):
        seconds = seconds * 60 + int(part)
    return (int(days) * 86400 if days else 0) + seconds + float(f"0.{fraction or 0}")
