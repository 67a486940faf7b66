"""``hpclaunch.submit`` on the cluster: the README's "From Python" block, run as written, and
the job it makes known to the CLI as one the CLI made (history row, status, logs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import REPO, Run

pytestmark = [pytest.mark.slurm, pytest.mark.compat, pytest.mark.backends]


def run_python(
    hpclaunch: Run, code: str, *args: str, cwd: Path = REPO, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh python (this venv's), with the test's private history."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=dict(hpclaunch.env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def readme_block(heading: str) -> str:
    """The first ```python block after ``heading`` in README.md."""
    text = (REPO / "README.md").read_text()
    after = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", after, re.S)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def test_the_readme_python_example_runs_and_the_cli_knows_its_job(hpclaunch: Run) -> None:
    code = readme_block("### A spec as a job")
    out = run_python(hpclaunch, code)
    assert out.returncode == 0, out.stderr
    first, *log = out.stdout.splitlines()
    job_id, state, exit_code = first.split()
    assert (state, exit_code) == ("COMPLETED", "0")
    assert any(line.startswith("hello from n") for line in log), out.stdout
    assert "done" in log

    # The history row the CLI would have written, so the CLI's commands know the job.
    record = hpclaunch.submitted()[job_id]
    assert (record["name"], record["project"], record["tier"]) == ("hello", "research", "medium")
    assert record["spec_hash"]
    status = hpclaunch("status", job_id, "--json")
    assert status.returncode == 0, status.stderr
    assert '"state": "COMPLETED"' in status.stdout
    logs = hpclaunch("logs", job_id)
    assert logs.returncode == 0, logs.stderr
    assert "hello from n" in logs.stdout


def test_a_session_runs_the_job_in_the_callers_directory(hpclaunch: Run) -> None:
    # The repository is on every node (the cluster's shared path); a script in a directory
    # of its own, run by a relative path, proves the job started where the caller was.
    # A name of its own: tmp_path's is the same in each pytest-xdist worker.
    work = REPO / ".pytest-session" / uuid.uuid4().hex
    work.mkdir(parents=True)
    (work / "fit.py").write_text("import os\nprint('cwd', os.getcwd())\n")
    code = (
        "import hpclaunch\n"
        "job = hpclaunch.Session(site='local').submit({'name': 'fit', 'project': 'research',"
        " 'command': ['python3', 'fit.py'], 'resources': {'time': '00:05:00', 'mem': '100M'}})\n"
        "print(job.id, job.wait(timeout=120).state.value)\n"
        "print(job.logs())\n"
    )
    try:
        out = run_python(hpclaunch, code, cwd=work)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[1] == "COMPLETED", out.stdout
        assert f"cwd {os.path.realpath(work)}" in out.stdout
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_a_sweep_from_python_runs_every_point(hpclaunch: Run, tmp_path: Path) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: py-sweep\ncommand: [echo, 'x={x}']\nproject: research\n"
        "resources: {time: '00:05:00', mem: 100M}\n"
        "sweep: {method: grid, parameters: {x: [1, 2, 3]}}\n"
    )
    code = (
        "import sys, hpclaunch\n"
        "run = hpclaunch.Session(site='local').sweeps.submit(sys.argv[1])\n"
        "done = run.wait(timeout=240)\n"
        "print(run.sweep_id, *sorted(t.state for t in done.tasks))\n"
    )
    out = run_python(hpclaunch, code, str(spec), timeout=300)
    assert out.returncode == 0, out.stderr
    sweep_id, *states = out.stdout.split()
    assert states == ["COMPLETED"] * 3
    # The CLI knows the sweep and its arrays' history rows carry the project.
    status = hpclaunch("sweep", "status", sweep_id, "--json")
    assert status.returncode == 0, status.stderr
    assert '"COMPLETED": 3' in status.stdout
    rows = [r for r in hpclaunch.submitted().values() if r["name"] == "py-sweep"]
    assert rows
    assert all(r["project"] == "research" for r in rows)


def test_a_job_from_python_moves_tier_and_cancels(hpclaunch: Run) -> None:
    code = (
        "import hpclaunch, subprocess\n"
        "job = hpclaunch.Session(site='local').submit({'name': 'py-tier', 'project': 'research',"
        " 'tier': 'low', 'command': ['true'], 'sbatch_extra': {'--hold': None},"
        " 'resources': {'time': '00:05:00', 'mem': '100M'}})\n"
        "job.tier('high')\n"
        "print(subprocess.run(['squeue', '-h', '-j', job.id, '-o', '%q|%a'],"
        " capture_output=True, text=True).stdout.strip())\n"
        "job.cancel()\n"
        "print(job.wait(timeout=60).state.value)\n"
    )
    out = run_python(hpclaunch, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["high|research", "CANCELLED"]
    (record,) = [r for r in hpclaunch.submitted().values() if r["name"] == "py-tier"]
    assert (record["tier"], record["qos"]) == ("high", "high")


def test_following_a_job_from_python_crosses_its_requeue(hpclaunch: Run) -> None:
    # The first attempt requeues itself (tier low: preemptible, so --requeue);
    # logs(follow=True) yields both attempts' lines and ends with the job, and events()
    # shows both attempts, as 'hpclaunch events' does.
    # The first attempt waits in `exec sleep`, leaving no shell behind it: Slurm's
    # proctrack/linuxproc signals a job's processes one kill() at a time, deepest first
    # (kill_tree.c: _get_list prepends each child), so a shell waiting on `sleep` can see
    # its child die, print "Terminated" and run its next command before its own SIGTERM
    # comes (seen once on 22.05 in CI: attempt 0 printed "out: finished").
    script = (
        'echo "out: attempt ${SLURM_RESTART_COUNT:-0}"; '
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then scontrol requeue "$SLURM_JOB_ID"; '
        "exec sleep 120; fi; echo out: finished"
    )
    code = (
        "import sys, hpclaunch\n"
        "job = hpclaunch.Session(site='local').submit({'name': 'py-follow',"
        " 'project': 'research', 'tier': 'low', 'command': ['bash', '-c', sys.argv[1]],"
        " 'resources': {'time': '00:05:00', 'mem': '100M'}})\n"
        "for line in job.logs(follow=True, timeout=200):\n"
        "    print('line', line)\n"
        "print('end', job.status().state.value)\n"
        "print('attempts', *[a.state for a in job.events().attempts])\n"
    )
    out = run_python(hpclaunch, code, script, timeout=260)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line for line in lines if line.startswith("line out: ")] == [
        "line out: attempt 0",
        "line out: attempt 1",
        "line out: finished",
    ], out.stdout
    assert "end COMPLETED" in lines
    attempts = next(line for line in lines if line.startswith("attempts ")).split()[1:]
    assert attempts[-1] == "COMPLETED"
    assert len(attempts) == 2, attempts
