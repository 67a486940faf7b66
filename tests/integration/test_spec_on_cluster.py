"""Spec fields on the real cluster: script + hostile args, dependencies, constraint,
exclusive and raw sbatch options, and a spec Slurm itself refuses."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, Run, job_status, wait_state

pytestmark = pytest.mark.slurm

# The project's python, which every node sees through the repository's bind mount.
PYTHON = str(Path(sys.executable))
HOSTILE_ARGS = [
    "it's",
    'say "hi"',
    "$(touch canary)",
    "`touch canary`",
    "a b  c",
    "line one\nline two",
    "--",
    "",
    "$HOME",
    "*",
    "ünï 🙂",
    "#not a comment",
    "; echo pwned",
]


def submit(run: Run, spec: Path, *args: str) -> str:
    result = run("submit", str(spec), *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def scontrol_job(job_id: str) -> str:
    return subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout


def test_script_receives_hostile_args_exactly(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    script = shared_dir / "dump argv's.py"
    script.write_text(
        f"#!{PYTHON}\n"
        "import json, os, sys\n"
        "out = os.path.join(os.environ['HPCLAUNCH_JOB_DIR'], 'argv.json')\n"
        "with open(out, 'w', encoding='utf-8') as f:\n"
        "    json.dump(sys.argv[1:], f)\n"
    )
    script.chmod(0o755)
    spec = write_spec(script=str(script), args=HOSTILE_ARGS, workdir=str(shared_dir))
    result = hpclaunch("submit", str(spec), "--wait", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    job_dir = Path(hpclaunch.submitted()[result.stdout.strip()]["job_dir"])
    assert json.loads((job_dir / "argv.json").read_text(encoding="utf-8")) == HOSTILE_ARGS
    assert not (shared_dir / "canary").exists()


def test_dependency_afterok_waits_for_the_first_job(
    hpclaunch: Run, write_spec: Callable[..., Path], shared_dir: Path
) -> None:
    marker, go = shared_dir / "a-done", shared_dir / "go"
    # The first job ends only once the test has seen the second wait for it (a fixed sleep
    # raced the status call on a loaded machine: clean-clone run of 2026-11-29, the first had
    # ended and Slurm still said Dependency); at most 2 minutes.
    hold = f"for i in $(seq 240); do test -e '{go}' && break; sleep 0.5; done; touch '{marker}'"
    first = submit(hpclaunch, write_spec(command=["bash", "-c", hold]))
    second = submit(
        hpclaunch,
        write_spec(
            command=["bash", "-c", f"test -e '{marker}' && echo saw-a-done"],
            dependencies=[{"job": first, "type": "afterok"}],
        ),
    )
    waiting = job_status(hpclaunch, second)
    # Slurm says "Dependency"; status names the job it waits for (the history has it).
    assert waiting["state"] == "PENDING", waiting
    assert waiting["reason"].startswith("waits for: "), waiting
    assert f"(job {first}) " in waiting["reason"], waiting
    go.touch()
    done = wait_state(hpclaunch, second, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=60)
    assert done["state"] == "COMPLETED"  # `test -e` failed the job had it started early
    assert job_status(hpclaunch, first)["state"] == "COMPLETED"
    assert "saw-a-done" in hpclaunch.log(second)


def test_afterok_on_a_failed_job_never_runs(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    first = submit(hpclaunch, write_spec(command=["bash", "-c", "exit 1"]))
    second = submit(
        hpclaunch,
        write_spec(command=["true"], dependencies=[{"job": first}]),
    )
    wait_state(hpclaunch, first, {"FAILED"})
    deadline = time.monotonic() + 30
    while True:  # slurmctld re-evaluates dependencies on its next scheduling pass
        info = job_status(hpclaunch, second)
        # Slurm's DependencyNeverSatisfied, in words: which job failed, and how.
        if info["reason"].startswith("never runs: "):
            break
        assert time.monotonic() < deadline, info
        time.sleep(0.2)
    assert info["state"] == "PENDING"
    assert f"(job {first}) FAILED, exit code 1" in info["reason"], info
    subprocess.run(["scancel", second], check=True)
    assert wait_state(hpclaunch, second, {"CANCELLED"})["state"] == "CANCELLED"


def test_exclusive_and_raw_sbatch_options_reach_slurm(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(
        command=["true"],
        resources={"time": "00:05:00", "mem": "100M", "exclusive": True},
        sbatch_extra={"--nice": 10, "--begin=now": None, "--mail-type": "NONE"},
    )
    # Read back as queued: an exclusive job with a lower priority may wait long for a whole
    # node in the side-by-side pass (it waited past 60 s on a loaded clean-clone run).
    result = hpclaunch("submit", str(spec))
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().splitlines()[-1]
    try:
        shown = scontrol_job(job_id)
        assert " Nice=10 " in shown
        assert "OverSubscribe=NO" in shown  # --exclusive
    finally:
        subprocess.run(["scancel", job_id], check=False)


def test_constraint_is_passed_to_slurm(hpclaunch: Run, write_spec: Callable[..., Path]) -> None:
    # The test cluster's nodes declare no features, so the real check is that sbatch
    # receives --constraint and slurmctld judges it: an unknown feature is refused.
    spec = write_spec(
        command=["true"], resources={"time": "00:05:00", "mem": "100M", "constraint": "nosuchfeat"}
    )
    result = hpclaunch("submit", str(spec))
    assert result.returncode == 1
    assert "Invalid feature specification" in result.stderr
    assert "Traceback" not in result.stderr


def test_raw_option_conflict_is_refused_before_submitting(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(command=["true"], sbatch_extra={"-q": "high"})
    result = hpclaunch("submit", str(spec))
    assert result.returncode == 2
    assert "sbatch_extra: '-q' (sbatch reads '-q' as --qos) is set by hpclaunch: use tier" in (
        result.stderr
    )
    assert hpclaunch.submitted() == {}


def test_unknown_account_gives_slurms_message_and_our_hint(
    hpclaunch: Run, write_spec: Callable[..., Path]
) -> None:
    spec = write_spec(command=["true"], project="nosuch")
    # The local site has quotas and refuses a project it has none for before sbatch (exit 2,
    # test_quota.py): a copy without quotas lets sbatch judge. --no-check: skip the check
    # against discovered capabilities too.
    site = yaml.safe_load((REPO / "site-configs" / "local.yaml").read_text())
    site["quotas"] = {}
    site_path = spec.parent / "no-quotas.yaml"
    site_path.write_text(yaml.safe_dump(site))
    result = hpclaunch("--site", str(site_path), "submit", "--no-check", str(spec))
    assert result.returncode == 1
    assert "Error: sbatch refused job" in result.stderr
    assert "Invalid account" in result.stderr  # Slurm's own words
    assert "Hint: check the spec's project" in result.stderr
    assert "Traceback" not in result.stderr
    assert hpclaunch.submitted() == {}
